"""Workspace isolation enforced by the database: row-level security on every workspace-owned
table, keyed on the connection's ``portal.workspaces`` scope (portal/db/scope.py).

The queries here omit every workspace filter on purpose: what they return is what the
database lets through, whatever the application forgets.
"""

from __future__ import annotations

from datetime import timedelta
from importlib import import_module
from typing import Any

import psycopg
import pytest
from django.apps import apps
from django.db import connection, transaction
from django.utils import timezone

from audit.services import audit_chain_check
from maintenance.services import maintenance_start
from policies.services import workload_create
from portal.db.scope import ALL, scope_include, scope_set
from portal.models import Workspace
from recall.hits import hits_fold
from recall.models import MemoryRecord
from tests.conftest import Persona, support_bot
from tests.helpers import csrf_session
from tests.module_personas import module_scoped
from tests.recall import factories

pytestmark = pytest.mark.django_db

RLS = import_module("portal.migrations.0002_row_level_security")
# Tables created since, each protected by the migration that created it.
LATER_THROUGH = import_module("recall.migrations.0015_funnel_cache_changes").THROUGH
THROUGH = {**RLS.THROUGH, **LATER_THROUGH}
DIRECT = (
    *RLS.DIRECT,
    *import_module("recall.migrations.0017_hit_fold").DIRECT,
    *import_module("audit.migrations.0017_stored_queries").DIRECT,
    *import_module("chat.migrations.0001_initial").DIRECT,
    *import_module("chat.migrations.0003_compaction_run_row_security").DIRECT,
)
PROTECTED = (*DIRECT, *THROUGH)
# Workspace-scoped, but read before the workspace is known (a token by its hash, a user's
# memberships) and never holding a workspace's data: no policy.
TENANCY_TABLES = {"portal_apitoken", "portal_membership"}
# Tables each workspace of the fixture below has rows in (the premise of the tests).
POPULATED = {
    "policies_environment", "policies_workload", "policies_workspacepolicyversion",
    "policies_workloadpolicyversion", "recall_actor", "recall_memoryrecord", "recall_funnelcache",
    "audit_auditevent", "audit_auditchainhead", "audit_auditcheckpoint", "audit_injection",
    "maintenance_maintenancerun", "maintenance_maintenanceitem", "recall_memorychange",
    "recall_hitfold", "audit_storedquery", "chat_session", "chat_turn", "chat_turncontext",
    "chat_compactionrun",
}  # fmt: skip


def scope_value(workspace_ids: list[int]) -> str:
    """The scope a user with these workspaces' memberships gets (portal/db/scope.py)."""
    return ",".join(str(pk) for pk in sorted(workspace_ids))


def _workspace_of(table: str) -> str:
    """SQL for a row's workspace id, through the row it belongs to where it has none."""
    if table in DIRECT:
        return "t.workspace_id"
    column, parent = THROUGH[table]
    if parent in DIRECT:
        return f"(SELECT p.workspace_id FROM {parent} p WHERE p.id = t.{column})"
    raise AssertionError(f"{table} belongs to {parent}, which has no workspace of its own")


def _counts(table: str) -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_workspace_of(table)}, count(*) FROM {table} t GROUP BY 1")
        return dict(cursor.fetchall())


def _populate(persona: Any, workload: Any) -> None:
    workspace = persona.workspace
    factories.memories(workspace, {"content": "release notes for the canary"})
    factories.memories(
        workspace, {"content": "an old note", "expires_at": timezone.now() - timedelta(days=1)}
    )
    from policies.services import workload_policy_save

    workload_policy_save(workload=workload, environment="", document={}, author="t")
    Workspace.objects.filter(pk=workspace.pk).update(store_queries=True)  # a stored query
    response = persona.api().post(
        "/v1/memory/actors/user:ada/recall",
        {"workloadId": str(workload.id), "environment": "prod", "query": "release", "topK": 5},
        format="json",
    )
    assert response.status_code == 200, response.content
    # a change to a memory of the actor whose funnel that recall cached: logged for it
    MemoryRecord.objects.filter(workspace=workspace, content="release notes for the canary").update(
        confidence=0.8
    )
    session = persona.api().post(
        "/v1/sessions",
        {"actorId": "user:ada", "workloadId": str(workload.id), "environment": "prod"},
        format="json",
    )
    assert session.status_code == 201, session.content
    turned = persona.api().post(
        f"/v1/sessions/{session.json()['id']}/turns",
        {"messages": [{"role": "user", "content": "release notes?"}]},
        format="json",
    )
    assert turned.status_code == 201, turned.content
    from recall.layout.services import layout_config_save

    layout_config_save(
        workload=workload, document={"memory": {"compaction": {"enabled": True}}}, author="t"
    )
    compacted = persona.api().post(f"/v1/sessions/{session.json()['id']}/compact")
    assert compacted.status_code == 200, compacted.content  # a compaction run
    maintenance_start(workspace=workspace, sweep="expiry", mode="preview", author="t")
    audit_chain_check(workspace=workspace, full=True)
    hits_fold(workspace_id=workspace.pk)


# Both workspaces are populated once for the module; each test's writes are rolled back at
# its end, the connection's scope with them.
workspace_a, workspace_b, operator, outsider, made_first = module_scoped(
    "workspace_a", "workspace_b", "operator", "outsider"
)


@pytest.fixture(scope="module")
def two_workspaces(operator: Persona, outsider: Persona) -> tuple[Any, Any]:
    from recall.engine import read as selectors

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(selectors, "FUNNEL_CACHE_MIN", 1)  # every recall keeps its funnel
        other_bot = workload_create(
            workspace=outsider.workspace, name="other-bot", author="system:test"
        )
        _populate(operator, support_bot(operator.workspace))
        _populate(outsider, other_bot)
    scope_set(ALL)  # the test's own connection again (the requests scoped it)
    return operator.workspace, outsider.workspace


class PolicyCatalogueTests:
    def test_every_table_holding_a_workspace_id_is_protected_or_named_as_tenancy(self):
        holding = {
            model._meta.db_table
            for model in apps.get_models()
            if any(field.column == "workspace_id" for field in model._meta.concrete_fields)
        }

        assert holding - set(DIRECT) == TENANCY_TABLES

    def test_every_table_with_a_foreign_key_to_a_protected_table_is_protected(self):
        """A new table hanging off a protected row needs a policy of its own."""
        children = {
            model._meta.db_table
            for model in apps.get_models()
            for field in model._meta.concrete_fields
            if field.is_relation
            and field.related_model is not None
            and field.related_model._meta.db_table in PROTECTED
            and model._meta.db_table not in TENANCY_TABLES
        }

        assert children <= set(PROTECTED)

    @pytest.mark.parametrize("table", PROTECTED)
    def test_the_table_has_row_level_security_and_its_policy(self, table):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.relrowsecurity, count(p.polname) FROM pg_class c"
                " LEFT JOIN pg_policy p ON p.polrelid = c.oid AND p.polname = 'workspace_isolation'"
                " WHERE c.relname = %s GROUP BY c.relrowsecurity",
                [table],
            )
            assert cursor.fetchone() == (True, 1)


class ScopedQueryTests:
    def test_the_premise_both_workspaces_have_rows_everywhere(self, two_workspaces):
        a, b = two_workspaces
        for table in POPULATED:
            counts = _counts(table)
            assert counts.get(a.pk) and counts.get(b.pk), (table, counts)

    @pytest.mark.parametrize("table", PROTECTED)
    def test_a_query_without_a_workspace_filter_returns_only_the_scope(self, two_workspaces, table):
        a, b = two_workspaces
        everything = _counts(table)

        scope_set(scope_value([a.pk]))
        scoped = _counts(table)

        assert b.pk not in scoped
        assert scoped == {k: v for k, v in everything.items() if k == a.pk}

    @pytest.mark.parametrize("table", PROTECTED)
    def test_an_unscoped_connection_sees_nothing(self, two_workspaces, table):
        scope_set("")

        assert _counts(table) == {}

    def test_a_scope_of_several_workspaces_sees_those(self, two_workspaces):
        a, b = two_workspaces
        scope_set(scope_value([a.pk, b.pk]))

        assert set(_counts("recall_memoryrecord")) == {a.pk, b.pk}

    def test_the_orm_without_a_filter_sees_only_the_scope(self, two_workspaces):
        a, b = two_workspaces
        scope_set(scope_value([b.pk]))

        contents = list(MemoryRecord.objects.values_list("workspace_id", flat=True))

        assert contents and set(contents) == {b.pk}

    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE recall_memoryrecord SET content = 'overwritten' WHERE workspace_id = %(b)s",
            "DELETE FROM recall_memoryrecord WHERE workspace_id = %(b)s",
            "UPDATE policies_workload SET description = 'x' WHERE workspace_id = %(b)s",
        ],
    )
    def test_another_workspaces_rows_cannot_be_changed(self, two_workspaces, statement):
        a, b = two_workspaces
        before = _counts("recall_memoryrecord")
        scope_set(scope_value([a.pk]))

        with connection.cursor() as cursor:
            cursor.execute(statement, {"b": b.pk})
            assert cursor.rowcount == 0
        scope_set(ALL)
        assert _counts("recall_memoryrecord") == before
        assert not MemoryRecord.objects.filter(content="overwritten").exists()

    def test_a_row_cannot_be_written_into_another_workspace(self, two_workspaces):
        a, b = two_workspaces
        memory = MemoryRecord.objects.filter(workspace=a).first()
        scope_set(scope_value([a.pk]))

        with pytest.raises(psycopg.errors.InsufficientPrivilege), transaction.atomic():
            with connection.cursor() as cursor:
                try:
                    cursor.execute(
                        "UPDATE recall_memoryrecord SET workspace_id = %s WHERE id = %s",
                        [b.pk, memory.pk],
                    )
                except Exception as exc:  # Django wraps the driver's error
                    raise exc.__cause__ or exc from None


def _scope_seen_by(call: Any) -> str:
    """The scope a request's connection had when the request ended."""
    from django.core.signals import request_finished

    from tests.conftest import SCOPE_RESTORE, restore_scope_after_request

    seen: list[str] = []

    def capture(**kwargs: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('portal.workspaces', true)")
            seen.append(cursor.fetchone()[0])

    request_finished.disconnect(dispatch_uid=SCOPE_RESTORE)
    request_finished.connect(capture, dispatch_uid="capture-scope")
    try:
        call()
    finally:
        request_finished.disconnect(dispatch_uid="capture-scope")
        request_finished.connect(restore_scope_after_request, dispatch_uid=SCOPE_RESTORE)
        scope_set(ALL)
    return seen[0]


class ScopeIncludeTests:
    @pytest.mark.parametrize(
        ("before", "after"), [("", "7"), ("3", "3,7"), ("3,5", "3,5,7"), (ALL, ALL)]
    )
    def test_a_created_workspace_joins_the_scope(self, before, after):
        scope_set(before)

        scope_include(7)

        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('portal.workspaces')")
            assert cursor.fetchone()[0] == after

    def test_a_user_creating_a_workspace_writes_its_rows_under_the_scope(self, editor, settings):
        settings.WORKSPACE_SELF_SERVICE = True

        response = csrf_session(editor).post(
            "/v1/workspaces/", {"slug": "team-c", "name": "C"}, format="json"
        )

        assert response.status_code == 201, response.content
        assert Workspace.objects.get(slug="team-c").environments.count() == 3


class RequestScopeTests:
    def test_a_token_call_is_scoped_to_the_tokens_workspace(self, two_workspaces, outsider):
        a, b = two_workspaces

        seen = _scope_seen_by(lambda: outsider.api().get("/v1/audit/events/"))

        assert seen == str(b.pk)

    def test_a_session_call_is_scoped_to_the_users_memberships(self, two_workspaces, viewer):
        a, b = two_workspaces

        seen = _scope_seen_by(lambda: viewer.session().get("/v1/audit/events/?workspace=team-a"))

        assert seen == str(a.pk)

    def test_a_superusers_session_sees_every_workspace(self, two_workspaces):
        from django.contrib.auth import get_user_model
        from django.test import Client

        admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
        client = Client()
        client.force_login(admin)

        assert _scope_seen_by(lambda: client.get("/")) == ALL

    def test_nobody_signed_in_reads_with_the_connections_scope_untouched(self, two_workspaces):
        """No statement for an anonymous request (a database that is down does not make
        /healthz an error); such requests read no workspace data."""
        from django.test import Client

        scope_set("")
        assert _scope_seen_by(lambda: Client().get("/login/")) == ""
