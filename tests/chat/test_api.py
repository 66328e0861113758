"""The sessions API: start, list, read, end; post turns; a turn's diagnostics and prompt.
Roles, another workspace, bad input (clear JSON errors, nothing appended)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Session, Turn, TurnContext
from policies.services import workload_archive
from tests.chat.helpers import post_turns, start, started, turn
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "editor", "viewer", "workload_a"
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(editor, workload_a) -> dict[str, Any]:
    factories.memories(editor.workspace, {"content": "Ada prefers short release notes"})
    return started(editor, workload_a, externalId="conv-1", systemPrompt="Be brief.")


class SessionStartTests:
    def test_it_answers_201_with_the_session_and_its_links(self, editor, workload_a):
        response = start(editor, workload_a, externalId="conv-1")

        assert response.status_code == 201, response.content
        body = response.json()
        assert body["status"] == "active" and body["turnCount"] == 0
        assert body["actorId"] == "user:ada" and body["externalId"] == "conv-1"
        assert body["workloadId"] == str(workload_a.id) and body["environment"] == "prod"
        assert body["links"]["turns"] == f"/v1/sessions/{body['id']}/turns"
        assert response["Location"] == body["links"]["self"]

    def test_a_second_session_with_the_same_external_id_is_a_409_naming_the_first(
        self, editor, workload_a, session
    ):
        error = error_of(start(editor, workload_a, externalId="conv-1"), 409, "SESSION_EXISTS")

        assert error["details"]["sessionId"] == session["id"]
        assert Session.objects.count() == 1

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"actorId": "ada"}, "actorId"),
            ({"environment": "Prod!"}, "environment"),
            ({"environment": "moon"}, "environment"),
            ({"toolSchemaTokens": -1}, "toolSchemaTokens"),
            ({"externalID": "x"}, "externalID"),
        ],
    )
    def test_bad_input_is_a_400_naming_the_field(self, editor, workload_a, body, field):
        error = error_of(start(editor, workload_a, **body), 400, "INVALID_REQUEST")

        assert field in error["details"]["fields"]
        assert not Session.objects.exists()

    def test_an_archived_workload_is_a_409(self, editor, workload_a):
        workload_archive(workload=workload_a, author="system:test")

        error_of(start(editor, workload_a), 409, "WORKLOAD_ARCHIVED")

    def test_a_viewer_cannot_start_one(self, viewer, workload_a):
        error_of(start(viewer, workload_a), 403, "PERMISSION_DENIED")

    def test_an_outsider_cannot_use_another_workspaces_workload(self, outsider, workload_a):
        error_of(start(outsider, workload_a), 404, "NOT_FOUND")
        assert not Session.objects.exists()

    def test_a_session_caller_names_the_workspace(self, editor, workload_a):
        client = csrf_session(editor)
        body = {"actorId": "user:ada", "workloadId": str(workload_a.id), "environment": "prod"}

        error_of(client.post("/v1/sessions", body, format="json"), 400, "INVALID_REQUEST")
        response = client.post("/v1/sessions?workspace=team-a", body, format="json")

        assert response.status_code == 201, response.content
        assert response.json()["author"] == "user:eddie"


class SessionListTests:
    def test_it_lists_newest_first_and_filters(self, editor, viewer, workload_a):
        first = started(editor, workload_a)
        second = started(editor, workload_a, actorId="user:bob", environment="dev")
        editor.api().post(f"/v1/sessions/{first['id']}/end")

        listed = viewer.api().get("/v1/sessions/").json()
        assert [s["id"] for s in listed["results"]] == [second["id"], first["id"]]
        for query, expected in (
            ("actor=user:bob", [second["id"]]),
            ("environment=prod", [first["id"]]),
            ("status=ended", [first["id"]]),
            (f"workload={workload_a.id}&status=active", [second["id"]]),
            ("actor=nobody", []),
        ):
            found = viewer.api().get(f"/v1/sessions/?{query}").json()["results"]
            assert [s["id"] for s in found] == expected, query

    def test_bad_filters_and_pages_are_400s(self, viewer):
        error_of(viewer.api().get("/v1/sessions/?status=paused"), 400, "INVALID_REQUEST")
        error_of(viewer.api().get("/v1/sessions/?workload=x"), 400, "INVALID_REQUEST")
        error_of(viewer.api().get("/v1/sessions/?pageSize=0"), 400, "INVALID_REQUEST")

    def test_both_paths_answer_both_methods(self, editor, workload_a):
        created = editor.api().post(
            "/v1/sessions/",
            {"actorId": "user:ada", "workloadId": str(workload_a.id), "environment": "prod"},
            format="json",
        )
        assert created.status_code == 201
        assert editor.api().get("/v1/sessions").json()["count"] == 1

    def test_an_outsider_sees_none_of_them(self, editor, outsider, workload_a, session):
        assert outsider.api().get("/v1/sessions/").json()["count"] == 0

    def test_the_list_costs_the_same_queries_for_more_sessions(
        self, editor, viewer, workload_a, django_assert_max_num_queries
    ):
        for n in range(6):
            started(editor, workload_a, actorId=f"user:u{n}")
        client = viewer.api()
        client.get("/v1/sessions/")  # the token's first lookup

        with django_assert_max_num_queries(4):
            response = client.get("/v1/sessions/")

        assert response.json()["count"] == 6


class SessionReadAndEndTests:
    def test_a_viewer_reads_it_with_its_last_budget_status(self, editor, viewer, session):
        turn(editor, session["id"], ("user", "what do I prefer?"))

        body = viewer.api().get(f"/v1/sessions/{session['id']}").json()

        assert body["turnCount"] == 1
        assert body["lastBudgetStatus"]["turn"] == 1
        assert body["lastBudgetStatus"]["severity"] == "normal"

    def test_ending_it_refuses_later_turns_and_appends_nothing(self, editor, session):
        ended = editor.api().post(f"/v1/sessions/{session['id']}/end")
        assert ended.status_code == 200 and ended.json()["status"] == "ended"

        error = error_of(post_turns(editor, session["id"], ("user", "hello?")), 409)

        assert error["code"] == "SESSION_ENDED"
        assert not Turn.objects.exists()

    def test_a_viewer_cannot_end_it(self, viewer, session):
        error_of(viewer.api().post(f"/v1/sessions/{session['id']}/end"), 403)

    @pytest.mark.parametrize("path", ["", "/turns/1", "/turns/1/prompt"])
    def test_another_workspaces_session_is_not_found(self, editor, outsider, session, path):
        turn(editor, session["id"], ("user", "what do I prefer?"))

        error_of(outsider.api().get(f"/v1/sessions/{session['id']}{path}"), 404, "NOT_FOUND")

    @pytest.mark.parametrize("session_id", ["999999", "abc", "1.5", "１"])
    def test_an_unknown_session_is_a_404(self, editor, session_id):
        error_of(post_turns(editor, session_id, ("user", "hi")), 404, "NOT_FOUND")
        error_of(editor.api().get(f"/v1/sessions/{session_id}"), 404, "NOT_FOUND")


class PostTurnsTests:
    def test_a_user_message_gets_its_context_assembled(self, editor, session):
        answer = turn(editor, session["id"], ("user", "what do I prefer?"))

        assert answer["appended"] == [1] and answer["turn"] == 1
        messages = answer["prompt"]["messages"]
        assert messages[0]["role"] == "system"
        assert messages[0]["content"].startswith("Be brief.")
        assert messages[-1] == {"role": "user", "content": "what do I prefer?"}
        assert answer["budgetStatus"]["availableBudget"] == answer["layout"]["dynamicBudget"]
        assert answer["compaction"]["code"] == "disabled"
        assert answer["links"]["auditEvent"] == f"/v1/audit/events/{answer['recall']['eventId']}"

    def test_messages_ending_with_an_assistants_are_only_appended(self, editor, session):
        turn(editor, session["id"], ("user", "hello"))

        answer = turn(editor, session["id"], ("assistant", "hi"), ("tool", "{}"))

        assert answer["appended"] == [2, 3] and answer["turn"] is None
        assert answer["prompt"] is None and answer["layout"] is None
        assert TurnContext.objects.count() == 1

    def test_the_next_user_turn_carries_the_history(self, editor, session):
        turn(editor, session["id"], ("user", "hello"))

        answer = turn(editor, session["id"], ("assistant", "hi there"), ("user", "and now?"))

        assert answer["appended"] == [2, 3] and answer["turn"] == 3
        assert answer["prompt"]["messages"][1:] == [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi there"},
            {"role": "user", "content": "and now?"},
        ]

    @pytest.mark.parametrize(
        ("body", "status", "field"),
        [
            ({"messages": []}, 400, "messages"),
            ({"messages": [{"role": "system", "content": "x"}]}, 400, "messages[0].role"),
            ({"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content"),
            ({"messages": "hello"}, 400, "messages"),
            ({"message": []}, 400, "message"),
            ([], 400, "body"),
        ],
    )
    def test_bad_input_is_a_clear_400_and_appends_nothing(
        self, editor, session, body, status, field
    ):
        response = editor.api().post(f"/v1/sessions/{session['id']}/turns", body, format="json")

        error = error_of(response, status, "INVALID_REQUEST")
        assert field in error["details"]["fields"]
        assert not Turn.objects.exists()

    def test_a_message_over_the_size_limit_is_a_413_and_appends_nothing(self, editor, session):
        response = post_turns(editor, session["id"], ("assistant", "fine"), ("user", "x" * 100_001))

        error = error_of(response, 413, "MESSAGE_TOO_LARGE")
        assert error["details"]["index"] == 1
        assert "x" * 50 not in error["message"]
        assert not Turn.objects.exists()

    def test_a_workload_archived_since_refuses_the_turn_and_appends_nothing(
        self, editor, workload_a, session
    ):
        workload_archive(workload=workload_a, author="system:test")

        error_of(post_turns(editor, session["id"], ("user", "hi")), 409, "WORKLOAD_ARCHIVED")

        assert not Turn.objects.exists()

    def test_a_viewer_cannot_post_turns(self, viewer, session):
        error_of(post_turns(viewer, session["id"], ("user", "hi")), 403)
        assert not Turn.objects.exists()


class TurnReadTests:
    def test_a_viewer_reads_a_turns_diagnostics_without_its_content(self, editor, viewer, session):
        turn(editor, session["id"], ("user", "what do I prefer? CANARY-turn"))

        response = viewer.api().get(f"/v1/sessions/{session['id']}/turns/1")

        assert response.status_code == 200
        body = response.json()
        assert body["assembled"] is True and body["role"] == "user"
        assert body["layout"]["dynamicBudget"] > 0 and body["recall"]["eventId"]
        assert "CANARY-turn" not in response.content.decode()
        assert "prefers short release notes" not in response.content.decode()

    def test_a_turn_without_a_context_says_so(self, editor, viewer, session):
        turn(editor, session["id"], ("assistant", "hello"))

        body = viewer.api().get(f"/v1/sessions/{session['id']}/turns/1").json()

        assert body["assembled"] is False and body["layout"] is None
        error_of(viewer.api().get(f"/v1/sessions/{session['id']}/turns/2"), 404, "NOT_FOUND")
        error_of(
            viewer.api().get(f"/v1/sessions/{session['id']}/turns/99999999999"), 404, "NOT_FOUND"
        )

    def test_only_operators_read_the_prompt_as_it_was_returned(
        self, operator, editor, viewer, session
    ):
        answer = turn(editor, session["id"], ("user", "what do I prefer?"))
        url = f"/v1/sessions/{session['id']}/turns/1/prompt"

        response = operator.api().get(url)

        assert response.status_code == 200
        body = response.json()
        assert body["private"] is True and body["messages"] == answer["prompt"]["messages"]
        assert "no-store" in response["Cache-Control"]
        error_of(editor.api().get(url), 403)
        error_of(viewer.api().get(url), 403)

    def test_a_turn_without_a_context_has_no_prompt(self, operator, editor, session):
        turn(editor, session["id"], ("assistant", "hello"))

        error_of(operator.api().get(f"/v1/sessions/{session['id']}/turns/1/prompt"), 404)


class TurnQueryCountTests:
    def test_a_turn_costs_the_same_statements_however_long_the_session(
        self, editor, workload_a, session
    ):
        client = editor.api()
        url = f"/v1/sessions/{session['id']}/turns"

        def statements() -> int:
            body = {"messages": [{"role": "assistant", "content": "ok"},
                                 {"role": "user", "content": "release notes?"}]}  # fmt: skip
            with CaptureQueriesContext(connection) as captured:
                assert client.post(url, body, format="json").status_code == 201
            return len(captured)

        statements()  # the first turn is primed, and looks the token up
        early = statements()
        for _ in range(8):
            statements()

        assert statements() == early
        assert early <= 20
