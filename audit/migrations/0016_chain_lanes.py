"""Lanes of a workspace's chain (audit/chain.py): every existing event and head is lane 0, the
main chain, whose hashes do not cover a lane and so are unchanged; recalls append to lanes 1..N
from now on, each with its own head. The head's one-per-workspace constraint becomes one per
workspace and lane; a checkpoint keeps each lane's tip."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0015_tenancy_foreign_keys'),
        ('portal', '0004_tenancy_foreign_keys'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditchainhead',
            name='lane',
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='auditcheckpoint',
            name='lanes',
            field=models.JSONField(db_default={}, default=dict),
        ),
        migrations.AddField(
            model_name='auditevent',
            name='lane',
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name='auditchainhead',
            name='workspace',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='audit_heads', to='portal.workspace'),
        ),
        migrations.AddConstraint(
            model_name='auditchainhead',
            constraint=models.UniqueConstraint(fields=('workspace', 'lane'), name='audit_head_lane_unique'),
        ),
    ]
