"""Row-level security on every workspace-owned table (portal/db/scope.py).

A row is visible, and may be written, only when its workspace is among the connection's
``portal.workspaces`` setting (``*``: all). Tables that hold no workspace id of their own
follow the row they belong to (a workload, an actor, a maintenance run), whose own policy
then decides. The functions are wrapped in sub-selects in the policies so PostgreSQL reads
the setting once per statement, not once per row. The owner (migrations) is not subject to
the policies; the application's role cannot turn them off (portal/db/roles.py).
"""

from django.db import migrations

DIRECT = (
    "policies_environment",
    "policies_workload",
    "policies_workspacepolicyversion",
    "recall_actor",
    "recall_memoryrecord",
    "audit_auditevent",
    "audit_auditchainhead",
    "audit_auditcheckpoint",
    "audit_injection",
    "maintenance_lifecyclesettingsversion",
    "maintenance_maintenancerun",
)
# table -> (its column, the table whose row it belongs to)
THROUGH = {
    "policies_workloadpolicyversion": ("workload_id", "policies_workload"),
    "recall_workloadlayoutconfigversion": ("workload_id", "policies_workload"),
    "recall_funnelcache": ("actor_id", "recall_actor"),
    "maintenance_maintenanceitem": ("run_id", "maintenance_maintenancerun"),
    "maintenance_archivechunk": ("run_id", "maintenance_maintenancerun"),
}

FUNCTIONS = """
CREATE FUNCTION portal_sees_all_workspaces() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(current_setting('portal.workspaces', true) = '*', false)
$$;
CREATE FUNCTION portal_visible_workspaces() RETURNS bigint[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN current_setting('portal.workspaces', true) = '*' THEN NULL
        ELSE string_to_array(nullif(current_setting('portal.workspaces', true), ''), ',')::bigint[]
    END
$$;
"""

ALL = "(SELECT portal_sees_all_workspaces())"
VISIBLE = "(SELECT portal_visible_workspaces())::bigint[]"


def _policy(table: str, condition: str) -> str:
    rule = f"{ALL} OR {condition}"
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"CREATE POLICY workspace_isolation ON {table} USING ({rule}) WITH CHECK ({rule});\n"
    )


def forward_sql() -> str:
    sql = [FUNCTIONS]
    for table in DIRECT:
        sql.append(_policy(table, f"workspace_id = ANY ({VISIBLE})"))
    for table, (column, parent) in THROUGH.items():
        sql.append(_policy(table, f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {column})"))
    return "\n".join(sql)


def backward_sql() -> str:
    sql = [
        f"DROP POLICY workspace_isolation ON {table};\n"
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
        for table in (*DIRECT, *THROUGH)
    ]
    sql.append(
        "DROP FUNCTION portal_sees_all_workspaces(); DROP FUNCTION portal_visible_workspaces();"
    )
    return "\n".join(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0001_initial"),
        ("policies", "0004_workspace_recall_rate"),
        ("recall", "0012_actor_tombstone"),
        ("audit", "0014_key_existing_chains"),
        ("maintenance", "0001_initial"),
    ]

    operations = [migrations.RunSQL(forward_sql(), backward_sql())]
