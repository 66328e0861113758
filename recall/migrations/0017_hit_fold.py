"""Hits counted later (recall/hits.py): a recall no longer rewrites the memories it carried;
its event's injections are its hits, folded into ``hit_count`` and ``last_accessed_at`` up to
``HitFold.event_id``. Every event appended before this migration was counted by the recall
that appended it, so each workspace starts folded up to its latest event. The table follows
its workspace under row-level security, as every workspace-owned table does (portal 0002).
"""

import django.db.models.deletion
from django.db import migrations, models


# Row-level security: tables with a workspace id of their own.
DIRECT = ("recall_hitfold",)
RULE = (
    "workspace_id = (SELECT portal_single_workspace())"
    " OR current_setting('portal.workspaces', true) = '*'"
    " OR workspace_id = ANY (string_to_array(nullif(current_setting('portal.workspaces', true),"
    " '*'), ',')::bigint[])"
)
SQL = f"""
ALTER TABLE recall_hitfold ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_isolation ON recall_hitfold USING ({RULE}) WITH CHECK ({RULE});
INSERT INTO recall_hitfold (workspace_id, event_id)
SELECT workspace_id, max(id) FROM audit_auditevent GROUP BY workspace_id;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0004_tenancy_foreign_keys'),
        ('recall', '0016_funnel_cache_versions'),
        ('audit', '0016_chain_lanes'),
    ]

    operations = [
        migrations.CreateModel(
            name='HitFold',
            fields=[
                ('workspace', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='hit_fold', serialize=False, to='portal.workspace')),
                ('event_id', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunSQL(SQL, reverse_sql=migrations.RunSQL.noop),
    ]
