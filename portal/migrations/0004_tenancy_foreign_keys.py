"""State only: this app's foreign keys now name portal.Workspace (tables, rows and constraints unchanged; see portal.0003)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0003_tenancy_workspace_environment'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.AlterField(
            model_name='apitoken',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='membership',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='portal.workspace'),
        ),
            ])
    ]
