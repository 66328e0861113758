"""State only: this app's foreign keys now name portal.Workspace (tables, rows and constraints unchanged; see portal.0003)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0004_tenancy_foreign_keys'),
        ('recall', '0013_recall_cover_index_with_workspace'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.AlterField(
            model_name='actor',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='actors', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='memoryrecord',
            name='workspace',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memories', to='portal.workspace'),
        ),
            ])
    ]
