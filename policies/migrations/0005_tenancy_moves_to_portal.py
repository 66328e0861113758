"""State only: Workspace and Environment leave policies once nothing refers to them (tables, rows and constraints unchanged; see portal.0003)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0015_tenancy_foreign_keys'),
        ('maintenance', '0002_tenancy_foreign_keys'),
        ('policies', '0004_workspace_recall_rate'),
        ('portal', '0004_tenancy_foreign_keys'),
        ('recall', '0014_tenancy_foreign_keys'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.AlterField(
            model_name='workspacepolicyversion',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='policy_versions', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='workload',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='workloads', to='portal.workspace'),
        ),
        migrations.DeleteModel(
            name='Environment',
        ),
        migrations.DeleteModel(
            name='Workspace',
        ),
            ])
    ]
