"""Row-level security on every workspace-owned table (portal/db/scope.py).

A row is visible, and may be written, only when its workspace is among the connection's
``portal.workspaces`` setting (``*``: all). Tables that hold no workspace id of their own
follow the row they belong to (a workload, an actor, a maintenance run): its workspace,
looked up by primary key, must be in the scope. The owner (migrations) is not subject to
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
CREATE FUNCTION portal_single_workspace() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN s ~ '^[0-9]{1,18}$' THEN s::bigint END
    FROM (SELECT current_setting('portal.workspaces', true) AS s) setting
$$;
"""

# The scope when it is one workspace (a token's call), read once per statement (a sub-select
# is an InitPlan); the other cases read the setting per row, and only for the rows the first
# comparison did not let through.
SINGLE = "(SELECT portal_single_workspace())"
SEES_ALL = "current_setting('portal.workspaces', true) = '*'"
LISTED = "string_to_array(nullif(current_setting('portal.workspaces', true), '*'), ',')::bigint[]"


def _visible(column: str) -> str:
    """The common case first, so that a row of the one workspace a call sees costs one
    comparison with a value read once per statement, and nothing else of the rule."""
    return f"{column} = {SINGLE} OR {SEES_ALL} OR {column} = ANY ({LISTED})"


def _policy(table: str, rule: str) -> str:
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"CREATE POLICY workspace_isolation ON {table} USING ({rule}) WITH CHECK ({rule});\n"
    )


def forward_sql() -> str:
    sql = [FUNCTIONS]
    for table in DIRECT:
        sql.append(_policy(table, _visible("workspace_id")))
    for table, (column, parent) in THROUGH.items():
        # A correlated lookup of the parent's workspace by its primary key, one probe per row
        # (written as EXISTS, the planner may hash every visible parent row instead).
        lookup = f"SELECT {_visible('p.workspace_id')} FROM {parent} p WHERE p.id = {column}"
        sql.append(_policy(table, f"coalesce(({lookup}), false)"))
    return "\n".join(sql)


def backward_sql() -> str:
    sql = [
        f"DROP POLICY workspace_isolation ON {table};\n"
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
        for table in (*DIRECT, *THROUGH)
    ]
    sql.append("DROP FUNCTION portal_single_workspace();")
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
