"""Compaction over HTTP: ``POST /v1/sessions/{id}/compact`` (seed 000's ``/compact``) and
``GET /v1/compaction/runs/{id}``: roles, another workspace's runs, the refusals (disabled,
no history, in flight, ended), and an unknown service refused when a layout is saved."""

from __future__ import annotations

from typing import Any

import pytest

from chat.models import CompactionRun, Session
from tests.chat.helpers import in_flight, layout, started, turn
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "editor", "viewer", "workload_a"
)

pytestmark = pytest.mark.django_db

ENABLED = {"compaction": {"enabled": True}}


@pytest.fixture
def session(editor, workload_a) -> dict[str, Any]:
    """A session with one assembled turn, compaction enabled."""
    layout(workload_a, ENABLED)
    created = started(editor, workload_a)
    turn(editor, created["id"], ("user", "release notes?"))
    return created


def compact(persona: Any, session_id: str) -> Any:
    return persona.api().post(f"/v1/sessions/{session_id}/compact")


def error_of(response: Any) -> dict[str, Any]:
    return response.json()["error"]


class CompactTests:
    def test_an_editor_compacts_now_and_gets_the_finished_run(self, editor, session):
        response = compact(editor, session["id"])

        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["trigger"], body["reason"], body["status"]) == (
            "manual", "manual", "succeeded",
        )  # fmt: skip
        assert body["sessionId"] == session["id"]
        assert body["serviceKind"] == "extractive"
        assert "not a language model" in body["serviceLabel"]
        assert response["Location"] == body["links"]["self"]
        run = CompactionRun.objects.get()
        assert run.author == "token:eddie-token"
        assert Session.objects.get(pk=session["id"]).compaction_started_turn == 1

    def test_an_operator_may_compact_too(self, operator, session):
        assert compact(operator, session["id"]).status_code == 200

    def test_a_viewer_cannot_compact(self, viewer, session):
        assert compact(viewer, session["id"]).status_code == 403
        assert not CompactionRun.objects.exists()

    def test_another_workspaces_session_is_not_found(self, outsider, session):
        response = compact(outsider, session["id"])

        assert response.status_code == 404
        assert not CompactionRun.objects.exists()

    def test_disabled_compaction_refuses_the_manual_run_too(self, editor, workload_a, session):
        layout(workload_a, {"compaction": {"enabled": False}})

        response = compact(editor, session["id"])

        assert response.status_code == 422
        error = error_of(response)
        assert error["code"] == "COMPACTION_DISABLED"
        assert "memory.compaction.enabled" in error["message"]
        assert not CompactionRun.objects.exists()

    def test_a_session_without_an_assembled_turn_has_nothing_to_compact(self, editor, workload_a):
        layout(workload_a, ENABLED)
        created = started(editor, workload_a)

        response = compact(editor, created["id"])

        assert response.status_code == 409
        assert error_of(response)["code"] == "COMPACTION_NO_HISTORY"

    def test_a_run_in_flight_is_a_409_naming_it(self, editor, session):
        stored = Session.objects.get(pk=session["id"])
        running = in_flight(
            stored, trigger="automatic", reason="severity", severity="warning",
            author="system:compaction",
        )  # fmt: skip

        response = compact(editor, session["id"])

        assert response.status_code == 409
        assert error_of(response)["code"] == "COMPACTION_IN_PROGRESS"
        assert error_of(response)["details"]["runId"] == str(running.pk)
        assert CompactionRun.objects.count() == 1

    def test_an_ended_session_is_a_409(self, editor, session):
        editor.api().post(f"/v1/sessions/{session['id']}/end")

        response = compact(editor, session["id"])

        assert response.status_code == 409
        assert error_of(response)["code"] == "SESSION_ENDED"


class RunReadTests:
    def test_a_viewer_reads_a_run(self, editor, viewer, session):
        created = compact(editor, session["id"]).json()

        response = viewer.api().get(created["links"]["self"])

        assert response.status_code == 200
        assert response.json() == created | {"links": response.json()["links"]}
        assert "auditEvent" in response.json()["links"]

    def test_another_workspaces_run_is_not_found(self, editor, outsider, session):
        created = compact(editor, session["id"]).json()

        assert outsider.api().get(created["links"]["self"]).status_code == 404

    @pytest.mark.parametrize("run_id", ["999999", "abc", "１"])
    def test_an_unknown_run_is_a_404(self, viewer, run_id):
        response = viewer.api().get(f"/v1/compaction/runs/{run_id}")

        assert response.status_code == 404
        assert error_of(response)["code"] == "NOT_FOUND"

    def test_a_turn_that_asked_for_a_run_links_to_it(self, editor, workload_a):
        layout(
            workload_a,
            {"context_window": 10, "output_buffer": 0, "compaction": {"enabled": True}},
        )
        created = started(editor, workload_a)

        answer = turn(editor, created["id"], ("user", "release notes for the whole team?"))

        run_id = answer["compaction"]["runId"]
        assert answer["compaction"]["compact"] is True and run_id
        assert answer["links"]["compactionRun"] == f"/v1/compaction/runs/{run_id}"
        assert editor.api().get(answer["links"]["compactionRun"]).status_code == 200


class ServiceNameTests:
    def test_a_layout_naming_an_unknown_service_is_refused_with_the_names(
        self, operator, workload_a
    ):
        response = operator.api().put(
            f"/v1/workloads/{workload_a.id}/layout-config",
            {"memory": {"compaction": {"enabled": True, "llm_service": "gpt-9"}}},
            format="json",
        )

        assert response.status_code == 400
        field = error_of(response)["details"]["fields"]["memory.compaction.llm_service"]
        assert "unknown compaction service 'gpt-9'" in field
        assert "the services are: compaction (COMPACTION_SERVICES)" in field


class SummarisedTurnTests:
    def test_a_summarised_turn_names_its_run(self, editor, viewer, workload_a):
        from tests.chat.compaction_support import compacting, start, talk_until_compacted
        from tests.chat.helpers import roomy_floor

        roomy_floor(workload_a.workspace)
        compacting(workload_a)
        session = start(workload_a)
        run = talk_until_compacted(session).run

        first = viewer.api().get(f"/v1/sessions/{session.pk}/turns/1").json()
        last = viewer.api().get(f"/v1/sessions/{session.pk}/turns/{session.turns.count()}")

        assert first["summarisedBy"] == str(run.pk)
        assert last.json()["summarisedBy"] is None
