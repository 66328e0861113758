"""Query texts beside their events (``StoredQuery``), outside the hashed payload, so that an
erasure can delete them; a seal for the events whose text moves out (``audit.0018``); and a
dry run's injections (the sandbox's recall), which are never counted as hits.

The new table follows its workspace under row-level security, as every workspace-owned table
does (portal 0002); unlike the events it may be deleted from (portal/db/roles.py).
"""

import django.db.models.deletion
from django.db import migrations, models

# Row-level security: tables with a workspace id of their own.
DIRECT = ("audit_storedquery",)
RULE = (
    "workspace_id = (SELECT portal_single_workspace())"
    " OR current_setting('portal.workspaces', true) = '*'"
    " OR workspace_id = ANY (string_to_array(nullif(current_setting('portal.workspaces', true),"
    " '*'), ',')::bigint[])"
)
SQL = f"""
ALTER TABLE audit_storedquery ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_isolation ON audit_storedquery USING ({RULE}) WITH CHECK ({RULE});
"""


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0016_chain_lanes'),
        ('portal', '0004_tenancy_foreign_keys'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='seal',
            field=models.CharField(blank=True, db_default='', default='', max_length=64),
        ),
        migrations.AddField(
            model_name='injection',
            name='dry_run',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.CreateModel(
            name='StoredQuery',
            fields=[
                ('event', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='stored_query', serialize=False, to='audit.auditevent')),
                ('actor_id', models.CharField(max_length=250)),
                ('text', models.TextField()),
                ('workspace', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, to='portal.workspace')),
            ],
            options={
                'indexes': [models.Index(fields=['workspace', 'actor_id'], name='audit_query_actor_idx')],
            },
        ),
        migrations.RunSQL(SQL, reverse_sql=migrations.RunSQL.noop),
    ]
