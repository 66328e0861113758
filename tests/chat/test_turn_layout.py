"""'Open in Layout': the Layout tab started from a recorded turn (its session's turns before
the query, the memories its recall gave with their similarity, the configuration it ran
under, the session's fixed costs), planned as it stands, for operators only (it shows turn
content, as the formatted prompt does)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from chat.models import Session, TurnContext
from recall.models import MemoryRecord
from tests.chat.helpers import layout, roomy_floor, started, turn
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "workload_a"
)

pytestmark = pytest.mark.django_db

CANARY = "CANARY-layout-5Rm"
NOTED = " ".join(["noted"] * 80)
DATED = " ".join(["dated"] * 120)


def client_for(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


@pytest.fixture
def session(editor: Any, workload_a: Any) -> dict[str, Any]:
    """Three exchanges in a small window, the third turn pruned by the cascade; memories of
    several sections, one holding the canary."""
    roomy_floor(editor.workspace)
    factories.memories(
        editor.workspace,
        {"content": f"release notes of {CANARY} are short"},
        {"content": "release dates move to Friday", "memory_type": "insight"},
        {"content": "release runbook step one", "segment_kind": "retrieval"},
    )
    layout(workload_a, {"context_window": 400, "output_buffer": 0, "max_history_turns": 3})
    found = started(editor, workload_a, systemPromptTokens=40, toolSchemaTokens=10)
    turn(editor, found["id"], ("user", "release notes please"))
    turn(editor, found["id"], ("assistant", NOTED), ("user", "release dates please"))
    found["answer"] = turn(
        editor, found["id"], ("assistant", DATED), ("user", "release runbook please")
    )
    return found


def open_in_layout(persona: Any, session: dict[str, Any], number: int = 5) -> Any:
    return client_for(persona).get(f"/w/team-a/sessions/{session['id']}/turns/{number}/layout/")


class OpenInLayoutTests:
    def test_the_session_page_offers_it_to_operators_only(self, operator, editor, session):
        url = f"/w/team-a/sessions/{session['id']}/turns/5/layout/"

        assert (
            url in client_for(operator).get(f"/w/team-a/sessions/{session['id']}/").content.decode()
        )
        assert (
            url
            not in client_for(editor).get(f"/w/team-a/sessions/{session['id']}/").content.decode()
        )

    def test_it_prefills_the_turns_inputs_and_plans_them_as_the_turn_did(self, operator, session):
        response = open_in_layout(operator, session)

        assert response.status_code == 200
        form = response.context["form"]
        assert form.data["history"].splitlines() == [
            "user: release notes please",
            f"assistant: {NOTED}",
            "user: release dates please",
            f"assistant: {DATED}",
        ]
        assert form.data["query"] == "release runbook please"
        assert (form.data["system_prompt_tokens"], form.data["tool_schema_tokens"]) == ("40", "10")
        assert form.data["workload"] == "" and "context_window: 400" in form.data["config"]
        supporting = form.data["supporting"]
        recorded = session["answer"]["recall"]
        for memory_id in recorded["memoryIds"]:
            content = MemoryRecord.objects.get(pk=memory_id).content
            assert f"| {recorded['similarities'][memory_id]} |" in supporting
            assert content in supporting
        assert "passages |" in supporting and "insights |" in supporting
        # Planned as it stands, it is what the turn's layout was.
        result, layout_ = response.context["result"], session["answer"]["layout"]
        assert layout_["stages"] and layout_["parts"]["history"]["kept"] < 3  # it was pruned
        assert result.estimated_tokens == layout_["estimatedTokens"]
        assert [s.name for s in result.stages] == [s["name"] for s in layout_["stages"]]
        assert len(result.history) == layout_["parts"]["history"]["kept"]
        page = response.content.decode()
        assert "Opened from" in page and "Private content" in page and "version 1" in page

    def test_the_prefilled_form_plans_again_when_edited(self, operator, session):
        form = open_in_layout(operator, session).context["form"]
        data = {**form.data, "context_window": "20000"}

        response = client_for(operator).post("/w/team-a/sandbox/layout/", data)

        assert response.status_code == 200
        assert response.context["result"].context_window == 20000
        assert not response.context["result"].stages

    def test_a_primed_turn_gets_the_earlier_session_as_it_was_then(self, operator, workload_a):
        layout(workload_a, {"priming": {"previous_session_turns": 2, "previous_sessions": 2}})
        older = started(operator, workload_a)
        for content in ("older one", "older two", "older three"):
            turn(operator, older["id"], ("user", content))
        earlier = started(operator, workload_a)
        for content in ("earlier one", "earlier two"):
            turn(operator, earlier["id"], ("user", content))
        primed = started(operator, workload_a)
        answer = turn(operator, primed["id"], ("user", "hello again"))
        assert answer["primed"] and answer["layout"]["parts"]["priorSessionHistory"]["kept"] == 4
        # The earlier session goes on after the primed turn was assembled.
        turn(operator, earlier["id"], ("user", "earlier three"))

        given = [
            "user: older two",
            "user: older three",
            "user: earlier one",
            "user: earlier two",
        ]

        response = open_in_layout(operator, primed, 1)
        # A context recorded before the turns given were kept: worked out as they were then.
        TurnContext.objects.filter(session_id=primed["id"]).update(prior_given=None)
        worked_out = open_in_layout(operator, primed, 1)

        assert response.context["form"].data["prior_history"].splitlines() == given
        assert worked_out.context["form"].data["prior_history"].splitlines() == given
        assert "the earlier sessions' turns it was given" in response.content.decode()

    def test_a_later_turn_gets_the_earlier_sessions_it_was_given_too(self, operator, workload_a):
        layout(workload_a, {"priming": {"previous_session_turns": 2, "previous_sessions": 1}})
        earlier = started(operator, workload_a)
        for content in ("earlier one", "earlier two"):
            turn(operator, earlier["id"], ("user", content))
        current = started(operator, workload_a)
        turn(operator, current["id"], ("user", "hello again"))
        answer = turn(operator, current["id"], ("assistant", "hi"), ("user", "and then?"))
        # Not primed, but given the earlier session's turns as every turn is.
        assert not answer["primed"]
        assert answer["layout"]["parts"]["priorSessionHistory"]["given"] == 2

        form = open_in_layout(operator, current, 3).context["form"]

        assert form.data["prior_history"].splitlines() == ["user: earlier one", "user: earlier two"]

    def test_a_session_deleted_since_is_left_out_not_replaced(self, operator, workload_a):
        layout(workload_a, {"priming": {"previous_session_turns": 1, "previous_sessions": 1}})
        older = started(operator, workload_a)
        turn(operator, older["id"], ("user", "older one"))
        earlier = started(operator, workload_a)
        turn(operator, earlier["id"], ("user", "earlier one"))
        primed = started(operator, workload_a)
        turn(operator, primed["id"], ("user", "hello again"))
        Session.objects.filter(pk=earlier["id"]).delete()  # as retention deletes it

        response = open_in_layout(operator, primed, 1)

        # The turn was given the earlier session, not the older one, which must not stand in.
        assert response.context["form"].data["prior_history"] == ""
        assert "older one" not in response.content.decode()

    def test_a_memory_erased_since_is_left_out(self, operator, session):
        erased = MemoryRecord.objects.get(content__contains=CANARY)
        erased.delete()

        response = open_in_layout(operator, session)

        assert response.status_code == 200
        assert CANARY not in response.content.decode()

    def test_editors_and_viewers_may_not_and_an_outsider_sees_nothing(
        self, editor, viewer, outsider, session
    ):
        assert open_in_layout(editor, session).status_code == 403
        assert open_in_layout(viewer, session).status_code == 403
        assert open_in_layout(outsider, session).status_code == 404

    @pytest.mark.parametrize("number", [2, 6, 99])
    def test_a_turn_without_an_assembled_context_is_404(self, operator, session, number):
        assert open_in_layout(operator, session, number).status_code == 404
