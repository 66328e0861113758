"""State only: this app's foreign keys now name portal.Workspace (tables, rows and constraints unchanged; see portal.0003)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('maintenance', '0001_initial'),
        ('portal', '0004_tenancy_foreign_keys'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.AlterField(
            model_name='lifecyclesettingsversion',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='lifecycle_versions', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='maintenancerun',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='maintenance_runs', to='portal.workspace'),
        ),
            ])
    ]
