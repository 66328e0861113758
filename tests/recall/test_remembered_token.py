"""The recall endpoint takes a token this process looked up before as remembered: no lookup
of its own, the read checks the token and the connection's scope in its own snapshot
(``portal.tokens.TokenCheck``). A revocation, or a change of the token's workspace, is seen
by the very next recall; nothing is recorded for a refused one.

The test suite's connection sees every workspace again after each request
(``tests/conftest.py``), as no production connection does; these tests keep the scope a
request left, as between two requests of a production worker.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent, EventType, StoredQuery
from policies.services import workload_create
from portal.db.scope import ALL, SETTING, scope_set
from portal.models import ApiToken, Workspace
from recall.engine import read
from recall.models import FunnelCache
from team.services import api_token_revoke
from tests.helpers import error_of, recall_body
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "editor", "viewer", "workload_a"
)

RECALL = "/v1/memory/actors/user:ada/recall"
TOKEN_LOOKUP = f"set_config('{SETTING}', w.id::text, false)"


@pytest.fixture
def remembered(scope_kept: None, editor: Any, workload_a: Any) -> Any:
    """The editor's API client after one recall: its token remembered, the connection scoped
    to its workspace."""
    factories.memories(editor.workspace, {"content": "release summary"}, {"content": "notes"})
    client = editor.api()
    first = client.post(RECALL, recall_body(workload_a), format="json")
    assert first.status_code == 200, first.content
    return client


def _scope_changed_unseen(value: str) -> None:
    """Scope the connection behind the process's back, as a rolled-back ``set_config`` would."""
    connection.connection.execute("SELECT set_config(%s, %s, false)", [SETTING, value])


def _assembled() -> int:
    with connection.cursor() as cursor:  # whatever the connection's scope is now
        cursor.execute(
            "SELECT count(*) FROM audit_auditevent WHERE type = %s", [EventType.ASSEMBLED]
        )
        return cursor.fetchone()[0]


def _recalled(client: Any, workload: Any) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.post(RECALL, recall_body(workload), format="json")
    return response, [q["sql"] for q in queries.captured_queries]


class RememberedTokenTests:
    def test_a_repeated_recall_runs_its_read_and_its_write_alone(self, remembered, workload_a):
        response, statements = _recalled(remembered, workload_a)

        assert response.status_code == 200, response.content
        assert len(statements) == 2, statements
        assert "FROM recall_actor a" in statements[0] and "audit_auditevent" in statements[1]
        assert response.json()["entries"]

    def test_the_answer_is_the_one_a_looked_up_token_gets(self, remembered, workload_a, editor):
        fast = remembered.post(RECALL, recall_body(workload_a), format="json").json()
        _scope_changed_unseen(ALL)  # the next recall cannot take its token as remembered
        looked_up = remembered.post(RECALL, recall_body(workload_a), format="json").json()

        # the same memories in the same order (their scores move with the hits counted)
        assert fast["entries"], fast
        assert [(e["id"], e["similarity"]) for e in fast["entries"]] == [
            (e["id"], e["similarity"]) for e in looked_up["entries"]
        ]
        for key in ("effectivePolicyHash", "effectiveBudgetHash", "prefixFingerprint"):
            assert fast[key] == looked_up[key], key
        assert fast["diagnostics"]["counts"] == looked_up["diagnostics"]["counts"]

    def test_a_token_revoked_since_is_refused_and_nothing_is_recorded(self, remembered, workload_a):
        before = _assembled()
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        response, statements = _recalled(remembered, workload_a)

        error_of(response, 401, "AUTHENTICATION_FAILED")
        assert response["WWW-Authenticate"] == "Bearer"
        assert _assembled() == before
        # the read refused it, the lookup did not find it live, and the answer asked why (to
        # tell an expired token from a revoked one); no write
        assert len(statements) == 3 and TOKEN_LOOKUP in statements[1], statements
        assert "audit_auditevent" not in statements[2], statements

    def test_a_workspace_that_stops_storing_queries_stops_at_the_next_recall(
        self, scope_kept, editor, workload_a
    ):
        Workspace.objects.filter(pk=editor.workspace.pk).update(store_queries=True)
        factories.memories(editor.workspace, {"content": "release summary"})
        client = editor.api()
        assert client.post(RECALL, recall_body(workload_a), format="json").status_code == 200
        Workspace.objects.filter(pk=editor.workspace.pk).update(store_queries=False)

        response, statements = _recalled(client, workload_a)

        assert response.status_code == 200, response.content
        events = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("pk")
        first, second = events
        assert first.stored_query.text == recall_body(workload_a)["query"]
        assert not StoredQuery.objects.filter(event=second).exists()
        # read (refused: the key moved), lookup, then the call again: read, write
        assert len(statements) == 4 and TOKEN_LOOKUP in statements[1], statements

    def test_a_connection_scoped_otherwise_is_looked_up_and_read_again(
        self, remembered, workload_a
    ):
        before = _assembled()
        _scope_changed_unseen(ALL)  # sees every workspace: not what the token may see

        response, statements = _recalled(remembered, workload_a)

        assert response.status_code == 200, response.content
        assert len(statements) == 4 and TOKEN_LOOKUP in statements[1], statements
        assert _assembled() == before + 1

    def test_a_connection_scoped_to_nothing_is_no_404(self, remembered, workload_a):
        _scope_changed_unseen("")  # every row hidden, the actor included

        response = remembered.post(RECALL, recall_body(workload_a), format="json")

        assert response.status_code == 200, response.content
        assert response.json()["entries"]

    def test_a_revoked_token_on_a_connection_scoped_otherwise_writes_nothing(
        self, remembered, workload_a, monkeypatch
    ):
        # a funnel is stored by any read of a large enough actor; this one is refused
        monkeypatch.setattr(read, "FUNNEL_CACHE_MIN", 1)
        FunnelCache.objects.all().delete()
        before = _assembled()
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))
        _scope_changed_unseen(ALL)

        response = remembered.post(RECALL, recall_body(workload_a), format="json")

        error_of(response, 401, "AUTHENTICATION_FAILED")
        scope_set(ALL)
        assert _assembled() == before
        assert not FunnelCache.objects.exists()

    def test_the_funnel_is_stored_for_a_remembered_token_as_for_any(
        self, remembered, workload_a, monkeypatch
    ):
        monkeypatch.setattr(read, "FUNNEL_CACHE_MIN", 1)
        read._FUNNEL_SIZES.clear()
        FunnelCache.objects.all().delete()

        response, statements = _recalled(remembered, workload_a)

        assert response.status_code == 200, response.content
        assert len(statements) == 2, statements
        assert FunnelCache.objects.exists()

    def test_a_workspace_parameter_is_looked_up_with_the_token(
        self, remembered, workload_a, editor
    ):
        with CaptureQueriesContext(connection) as queries:
            response = remembered.post(
                f"{RECALL}?workspace={editor.workspace.slug}",
                recall_body(workload_a),
                format="json",
            )

        assert response.status_code == 200, response.content
        assert TOKEN_LOOKUP in queries.captured_queries[0]["sql"]

    def test_another_token_of_the_same_workspace_has_its_own_role(
        self, remembered, workload_a, viewer
    ):
        # a viewer may not recall: the role is that token's, not the remembered one's
        response = viewer.api().post(RECALL, recall_body(workload_a), format="json")

        error_of(response, 403)


class RefusedBeforeTheReadTests:
    """A call refused before its read checked the token is answered as a lookup would answer
    it: a revoked token is a 401 whatever else is wrong with the call."""

    def test_a_body_not_valid(self, remembered, workload_a):
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        response = remembered.post(RECALL, {"topK": "many"}, format="json")

        error_of(response, 401, "AUTHENTICATION_FAILED")

    def test_a_method_other_than_post(self, remembered):
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        error_of(remembered.options(RECALL), 401, "AUTHENTICATION_FAILED")
        error_of(remembered.get(RECALL), 401, "AUTHENTICATION_FAILED")

    def test_a_throttled_call(self, remembered, workload_a, settings):
        settings.RECALL_RATE_PER_MINUTE = 1  # the remembered fixture's recall used it
        assert remembered.post(RECALL, recall_body(workload_a), format="json").status_code == 429
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        response = remembered.post(RECALL, recall_body(workload_a), format="json")

        error_of(response, 401, "AUTHENTICATION_FAILED")

    @pytest.fixture
    def viewer_remembered(self, scope_kept: None, viewer: Any, workload_a: Any) -> Any:
        """The viewer's API client after a recall it may not make: its token remembered."""
        factories.memories(viewer.workspace, {"content": "release summary"})
        client = viewer.api()
        error_of(client.post(RECALL, recall_body(workload_a), format="json"), 403)
        return client

    def test_a_role_short_of_recall(self, viewer_remembered, workload_a):
        api_token_revoke(token=ApiToken.objects.get(name="vera-token"))

        response = viewer_remembered.post(RECALL, recall_body(workload_a), format="json")

        error_of(response, 401, "AUTHENTICATION_FAILED")

    def test_a_role_raised_since_is_taken_at_the_next_call(self, viewer_remembered, workload_a):
        ApiToken.objects.filter(name="vera-token").update(role="editor")

        response = viewer_remembered.post(RECALL, recall_body(workload_a), format="json")

        assert response.status_code == 200, response.content

    def test_a_role_lowered_since_writes_nothing(self, remembered, workload_a, monkeypatch):
        monkeypatch.setattr(read, "FUNNEL_CACHE_MIN", 1)
        FunnelCache.objects.all().delete()
        before = _assembled()
        ApiToken.objects.filter(name="eddie-token").update(role="viewer")

        response, statements = _recalled(remembered, workload_a)

        error_of(response, 403)
        # the read (refused: the key moved, so no funnel stored), the lookup; the call again
        # stops at the role
        assert len(statements) == 2 and TOKEN_LOOKUP in statements[1], statements
        assert _assembled() == before
        assert not FunnelCache.objects.exists()


class PolicyReadFirstTests:
    def test_a_policy_not_remembered_is_read_after_the_token_is_looked_up(self, remembered, editor):
        # a workload this process has not recalled for: its policy context is read before the
        # recall's read, here on a connection scoped behind the process's back to nothing
        other = workload_create(workspace=editor.workspace, name="second", author="system:test")
        _scope_changed_unseen("")

        response, statements = _recalled(remembered, other)

        assert response.status_code == 200, response.content
        assert TOKEN_LOOKUP in statements[0], statements
        assert response.json()["entries"]
