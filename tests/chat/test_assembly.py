"""The context assembled for a turn, end to end through the API: seed 000's 32,000-token
example with the recall capped by the supporting-context budget, the recall's event naming
the session, prior-session history dropped first, priming's turns, a refused memory kept
out of every prompt, and the prompt made of the kept parts in order."""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEvent
from chat.models import Turn
from policies.services import workload_policy_save
from recall.models import MemoryRecord
from tests.chat.helpers import layout, prompt_text, roomy_floor, started, turn
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

pytestmark = pytest.mark.django_db

CANARY = "CANARY-refused-4Kp"


def facts(workspace: Any, count: int, words: int = 200, **fields: Any) -> list[MemoryRecord]:
    """``count`` release facts of about ``words`` words each (about 1.3 tokens a word)."""
    body = " ".join(["release"] * words)
    return factories.memories(
        workspace, *({"content": f"fact {n}: {body}"} for n in range(count)), **fields
    )


class SeedExampleTests:
    def test_the_32000_token_example_composed_end_to_end(self, editor, workload_a):
        """Seed 000: 32000 window, 1500 system, 500 tools, 2500 output, ratio 0.30 ->
        27500 dynamic, 8250 supporting; the recall's budget never above 8250."""
        roomy_floor(editor.workspace)
        facts(editor.workspace, 40)
        session = started(
            editor, workload_a, systemPrompt="You help Ada.", systemPromptTokens=1500,
            toolSchemaTokens=500,
        )  # fmt: skip

        first = turn(editor, session["id"], ("user", "release summary"))
        second = turn(
            editor, session["id"], ("assistant", "Here it is."), ("user", "release again")
        )

        for answer in (first, second):
            layout_ = answer["layout"]
            assert layout_["contextWindow"] == 32000 and layout_["fixedCosts"] == 4500
            assert layout_["dynamicBudget"] == 27500
            assert layout_["supportingContextBudget"] == 8250
            assert answer["budgetStatus"]["availableBudget"] == 27500
            assert layout_["parts"]["supporting"]["tokens"] <= 8250
            assert answer["recall"]["usedTokens"] <= 8250
        # The first turn is primed: priming's 4000 tokens are the smallest budget.
        assert first["primed"] is True
        assert first["recall"]["tokenBudget"] == {
            "policy": 20000, "supportingContext": 8250, "priming": 4000, "applied": 4000,
            "limitedBy": "priming",
        }  # fmt: skip
        # Later turns: the supporting-context budget caps the policy's 20000.
        assert second["primed"] is False
        assert second["recall"]["tokenBudget"] == {
            "policy": 20000, "supportingContext": 8250, "priming": None, "applied": 8250,
            "limitedBy": "supporting_context",
        }  # fmt: skip
        assert second["recall"]["usedTokens"] > 4000
        event = AuditEvent.objects.get(pk=second["recall"]["eventId"])
        assert event.payload["tokenCounts"]["budget"] == 8250
        assert event.payload["sessionId"] == session["id"] and event.payload["turn"] == 3
        assert event.payload["tokenBudgetCap"] == {"cap": 8250, "policy": 20000}
        # The supporting section holds what fitted: known facts, at most max_items (15).
        kept = second["layout"]["parts"]["supporting"]["sections"]["known_facts"]
        assert 0 < kept["kept"] <= 15

    def test_a_smaller_policy_budget_wins_and_says_so(self, editor, workload_a):
        facts(editor.workspace, 5, words=20)
        session = started(editor, workload_a)
        turn(editor, session["id"], ("user", "release"))

        answer = turn(editor, session["id"], ("user", "release notes"))

        # The default floor's 3200 tokens are below the 8250 of the default layout.
        assert answer["recall"]["tokenBudget"]["applied"] == 3200
        assert answer["recall"]["tokenBudget"]["limitedBy"] == "policy"


def earlier_session(persona: Any, workload: Any, *contents: str) -> dict[str, Any]:
    """An ended session of Ada's with one user turn per content (and no memories to recall)."""
    session = started(persona, workload)
    for content in contents:
        turn(persona, session["id"], ("user", content))
    persona.api().post(f"/v1/sessions/{session['id']}/end")
    return session


class PriorSessionTests:
    def test_priming_brings_exactly_the_last_previous_session_turns(self, editor, workload_a):
        layout(workload_a, {"priming": {"previous_session_turns": 3, "previous_sessions": 1}})
        earlier_session(editor, workload_a, "older one", "older two")
        last = earlier_session(editor, workload_a, *(f"earlier {n}" for n in range(1, 7)))
        session = started(editor, workload_a)

        answer = turn(editor, session["id"], ("user", "hello again"))

        prior = [p for p in answer["parts"] if p["kind"] == "prior"]
        assert [(p["sessionId"], p["turn"]) for p in prior] == [(last["id"], n) for n in (4, 5, 6)]
        system = answer["prompt"]["messages"][0]["content"]
        earlier = "## Earlier sessions\nuser: earlier 4\nuser: earlier 5\nuser: earlier 6"
        assert system.endswith(earlier)
        assert "earlier 3" not in system and "older" not in system
        assert answer["layout"]["parts"]["priorSessionHistory"] == {
            "given": 3, "kept": 3, "tokens": sum(
                t.tokens for t in Turn.objects.filter(session_id=last["id"], index__gte=4)
            ),
        }  # fmt: skip

    def test_priming_off_brings_no_earlier_turns(self, editor, workload_a):
        layout(workload_a, {"priming": {"enabled": False}})
        earlier_session(editor, workload_a, "earlier")
        session = started(editor, workload_a)

        answer = turn(editor, session["id"], ("user", "hello again"))

        assert answer["primed"] is False
        assert not [p for p in answer["parts"] if p["kind"] == "prior"]

    def test_prior_session_history_is_the_first_dropped_under_pressure(self, editor, workload_a):
        long = "word " * 400  # about 500 tokens each
        earlier_session(editor, workload_a, long + "one", long + "two", long + "three")
        # 1500 - 200 = 1300 tokens: the current session fits, not with ~1500 more.
        layout(workload_a, {"context_window": 1500, "output_buffer": 200})
        session = started(editor, workload_a)
        turn(editor, session["id"], ("user", "first question"))

        answer = turn(editor, session["id"], ("assistant", "an answer"), ("user", "next one"))

        stages = answer["layout"]["stages"]
        assert [s["name"] for s in stages] == ["drop_prior_session_history"]
        assert stages[0]["removed"] == {"prior_session_turns": 3} and stages[0]["fits"]
        assert answer["layout"]["parts"]["priorSessionHistory"]["kept"] == 0
        assert answer["layout"]["parts"]["history"] == {
            "given": 2, "kept": 2, "tokens": answer["layout"]["parts"]["history"]["tokens"],
        }  # fmt: skip
        assert "Earlier sessions" not in prompt_text(answer)
        assert [m["content"] for m in answer["prompt"]["messages"]] == [
            "first question", "an answer", "next one",
        ]  # fmt: skip


class GovernanceTests:
    def test_a_memory_the_policy_refuses_never_reaches_a_prompt(self, operator, editor, workload_a):
        workspace = editor.workspace
        factories.memories(workspace, {"content": "release notes are short"})
        # Refused by the floor (restricted is above its confidential ceiling), by the
        # workload's policy (episodes not allowed), and suppressed.
        factories.memories(
            workspace,
            {"content": f"release {CANARY} secret", "sensitivity": "restricted"},
            {"content": f"release {CANARY} episode", "memory_type": "episode"},
            {"content": f"release {CANARY} hidden", "lifecycle_status": "suppressed"},
        )
        allowed = [t for t in ("fact", "preference", "decision", "summary", "insight")]
        workload_policy_save(
            workload=workload_a, environment="", document={"memoryTypeAllowed": allowed},
            author="system:test",
        )  # fmt: skip
        session = started(editor, workload_a)
        answers = [turn(editor, session["id"], ("user", f"release {CANARY} please"))]
        answers.append(turn(editor, session["id"], ("assistant", "ok"), ("user", "release?")))

        for answer in answers:
            system = answer["prompt"]["messages"][0]["content"]
            assert "release notes are short" in system
            assert CANARY not in system
            stored = operator.api().get(
                f"/v1/sessions/{session['id']}/turns/{answer['turn']}/prompt"
            )
            assert "secret" not in stored.content.decode()
            assert "episode" not in stored.content.decode()
            assert "hidden" not in stored.content.decode()
        # The user's own words are the session's: they are in the history, as sent.
        assert answers[1]["prompt"]["messages"][1]["content"] == f"release {CANARY} please"


class PromptTests:
    def test_the_prompt_is_the_kept_parts_in_order(self, editor, workload_a):
        roomy_floor(editor.workspace)
        workspace = editor.workspace
        factories.memories(
            workspace,
            {"content": "Ada prefers release notes in French", "memory_type": "preference"},
            {"content": "release insight: Ada reads on Fridays", "memory_type": "insight"},
            {"content": "release summary of last month", "memory_type": "summary"},
            {"content": "release docs page", "segment_kind": "retrieval", "tier": "long_term"},
            {"content": "release tool output", "segment_kind": "tool_result"},
        )
        earlier_session(editor, workload_a, "what did we release?")
        session = started(editor, workload_a, systemPrompt="You help Ada.")
        turn(editor, session["id"], ("user", "release plans"))

        answer = turn(editor, session["id"], ("assistant", "Plans."), ("user", "release notes"))

        assert _rebuilt(answer, session) == answer["prompt"]["messages"]
        sections = answer["layout"]["parts"]["supporting"]["sections"]
        supporting = [p for p in answer["parts"] if p["kind"] == "supporting"]
        assert len(supporting) == sum(s["kept"] for s in sections.values())
        assert [p["section"] for p in supporting] == sorted(
            (p["section"] for p in supporting),
            key=["known_facts", "passages", "insights", "summaries", "tools", "state"].index,
        )
        assert set(sections) == {"known_facts", "passages", "insights", "summaries", "tools"}
        assert answer["layout"]["promptTokens"] <= answer["layout"]["estimatedTokens"]


TITLES = {
    "known_facts": "Known facts", "passages": "Passages", "insights": "Insights",
    "summaries": "Summaries", "tools": "Tool results", "state": "State",
}  # fmt: skip


def _rebuilt(answer: dict[str, Any], session: dict[str, Any]) -> list[dict[str, str]]:
    """The prompt built again from its parts alone: the system prompt, each memory under its
    section's header, each earlier session's turn, then this session's turns."""
    blocks = [["You help Ada."]]
    messages: list[dict[str, str]] = []
    section = None
    prior_started = False
    for part in answer["parts"]:
        if part["kind"] == "supporting":
            if part["section"] != section:
                section = part["section"]
                blocks.append([f"## {TITLES[section]}"])
            blocks[-1].append(f"- {MemoryRecord.objects.get(pk=part['memoryId']).content}")
        elif part["kind"] == "prior":
            if not prior_started:
                prior_started = True
                blocks.append(["## Earlier sessions"])
            row = Turn.objects.get(session_id=part["sessionId"], index=part["turn"])
            blocks[-1].append(f"{row.role}: {row.content}")
        elif part["kind"] in ("history", "query"):
            row = Turn.objects.get(session_id=session["id"], index=part["turn"])
            messages.append({"role": row.role, "content": row.content})
    system = "\n\n".join("\n".join(block) for block in blocks)
    return [{"role": "system", "content": system}, *messages]
