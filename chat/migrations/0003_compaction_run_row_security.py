"""Compaction runs key their rows on the workspace and follow it under row-level security, as
every workspace-owned table does (portal 0002, chat 0001)."""

from django.db import migrations

RULE = (
    "workspace_id = (SELECT portal_single_workspace())"
    " OR current_setting('portal.workspaces', true) = '*'"
    " OR workspace_id = ANY (string_to_array(nullif(current_setting('portal.workspaces', true),"
    " '*'), ',')::bigint[])"
)
DIRECT = ("chat_compactionrun",)
SQL = "".join(
    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY workspace_isolation ON {table} USING ({RULE}) WITH CHECK ({RULE});\n"
    for table in DIRECT
)


class Migration(migrations.Migration):

    dependencies = [("chat", "0002_compaction_runs")]

    operations = [migrations.RunSQL(SQL, reverse_sql=migrations.RunSQL.noop)]
