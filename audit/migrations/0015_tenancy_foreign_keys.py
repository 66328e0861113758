"""State only: this app's foreign keys now name portal.Workspace (tables, rows and constraints unchanged; see portal.0003)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0014_key_existing_chains'),
        ('portal', '0004_tenancy_foreign_keys'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.AlterField(
            model_name='auditchainhead',
            name='workspace',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='audit_head', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='auditcheckpoint',
            name='workspace',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='audit_checkpoint', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='workspace',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='audit_events', to='portal.workspace'),
        ),
        migrations.AlterField(
            model_name='injection',
            name='workspace',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, to='portal.workspace'),
        ),
            ])
    ]
