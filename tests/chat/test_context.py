"""The pure phases of a turn's context (``chat.context``): the section table, the retrieval
plan, priming's earlier turns, the recall's budget, and the prompt; with the properties the
issue asks of every composed turn."""

from __future__ import annotations

import string
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat.context import (
    SECTION_TITLES,
    PastTurn,
    RecallBudget,
    Recalled,
    compose_turn,
    prior_turns,
    prompt_dynamic_tokens,
    recall_budget,
    render_prompt,
    retrieval_plan,
    section_of,
    supporting_sections,
)
from recall.layout.config import (
    LayoutConfig,
    PrimingConfig,
    SupportingContextConfig,
    parse_memory_config,
)
from recall.layout.request import SupportingItem
from recall.layout.vocabulary import KNOWN_SECTIONS
from recall.tokens import estimate_tokens
from tests.properties import examples

DEFAULT_PRIORITY = LayoutConfig().supporting_context.section_priority


def memory(pk: str, memory_type: str = "fact", segment: str = "memory", **kw: Any) -> Recalled:
    return Recalled(
        id=pk, content=kw.get("content", f"memory {pk}"), memory_type=memory_type,
        segment_kind=segment, tier=kw.get("tier", "short_term"),
        similarity=kw.get("similarity", 0.5), score=kw.get("score", 0.5),
    )  # fmt: skip


class SectionTableTests:
    @pytest.mark.parametrize(
        ("memory_type", "segment", "section"),
        [
            ("fact", "memory", "known_facts"),
            ("preference", "memory", "known_facts"),
            ("decision", "system_policy", "known_facts"),
            ("instruction", "memory", "known_facts"),
            ("insight", "memory", "insights"),
            ("summary", "memory", "summaries"),
            ("episode", "memory", "passages"),
            ("entity", "memory", "state"),
            ("fact", "retrieval", "passages"),
            ("summary", "tool_result", "tools"),
        ],
    )
    def test_each_memory_goes_to_its_section(self, memory_type, segment, section):
        assert section_of(memory("1", memory_type, segment), DEFAULT_PRIORITY) == section

    def test_entities_get_their_own_section_when_it_is_listed(self):
        assert section_of(memory("1", "entity"), ("entities", "state")) == "entities"

    def test_a_passage_takes_its_term_from_the_memorys_tier(self):
        plan = retrieval_plan(LayoutConfig(), primed=False, top_k_max=200)
        sections = supporting_sections(
            [memory("1", segment="retrieval", tier="long_term"), memory("2", "episode")],
            plan,
            DEFAULT_PRIORITY,
        )

        passages = [(i.id, i.term) for i in sections.items["passages"]]
        assert passages == [("1", "long"), ("2", "short")]


class RetrievalPlanTests:
    def test_a_later_turn_retrieves_what_the_sections_can_show(self):
        plan = retrieval_plan(LayoutConfig(), primed=False, top_k_max=200)

        assert dict(plan.limits) == {
            "known_facts": 15, "passages": 5, "insights": 10, "summaries": 5, "tools": 5,
            "state": 20,
        }  # fmt: skip
        assert plan.top_k == 60

    def test_a_primed_turn_retrieves_within_primings_limits(self):
        config = parse_memory_config(
            {"priming": {"top_entities": 7, "max_insights": 2, "max_summaries": 1,
                         "max_known_facts": 3}}
        )  # fmt: skip

        plan = retrieval_plan(config, primed=True, top_k_max=200)

        assert dict(plan.limits) == {
            "known_facts": 3, "passages": 5, "insights": 2, "summaries": 1, "tools": 5,
            "state": 7,
        }  # fmt: skip

    def test_the_section_limit_cuts_in_score_order(self):
        plan = retrieval_plan(
            parse_memory_config({"supporting_context": {"max_items": {"known_facts": 2}}}),
            primed=False,
            top_k_max=200,
        )
        memories = [memory(str(n), score=n / 10) for n in range(5)]

        sections = supporting_sections(memories, plan, DEFAULT_PRIORITY)

        assert [i.id for i in sections.items["known_facts"]] == ["4", "3"]
        assert sections.over_retrieval_limit == 3


def past(session: str, index: int, tokens: int = 10) -> PastTurn:
    return PastTurn(session, index, "user", f"turn {index} of {session}", tokens)


class PriorTurnsTests:
    def test_the_last_turns_of_the_newest_sessions_oldest_first(self):
        newest = [past("9", n) for n in range(1, 6)]
        older = [past("8", n) for n in range(1, 6)]
        priming = PrimingConfig(previous_sessions=2, previous_session_turns=2)

        taken = prior_turns([newest, older], priming)

        assert [(t.session_id, t.index) for t in taken] == [("8", 4), ("8", 5), ("9", 4), ("9", 5)]

    def test_turns_are_taken_while_they_fit_the_priming_budget(self):
        turns = [past("9", n, tokens=30) for n in range(1, 4)]
        priming = PrimingConfig(token_budget=70, previous_session_turns=3)

        assert [t.index for t in prior_turns([turns], priming)] == [2, 3]

    def test_nothing_when_priming_is_off(self):
        priming = PrimingConfig(enabled=False)

        assert prior_turns([[past("9", 1)]], priming) == []


class RecallBudgetTests:
    @pytest.mark.parametrize(
        ("policy", "supporting", "priming", "applied", "winner"),
        [
            (3200, 8250, None, 3200, "policy"),
            (20000, 8250, None, 8250, "supporting_context"),
            (20000, 8250, 4000, 4000, "priming"),
            (8250, 8250, None, 8250, "policy"),
        ],
    )
    def test_the_smallest_budget_wins(self, policy, supporting, priming, applied, winner):
        caps = RecallBudget(supporting, priming)

        assert min(policy, caps.cap) == applied and caps.limited_by(policy) == winner

    def test_priming_pays_for_the_earlier_turns_first(self):
        caps = recall_budget(8250, PrimingConfig(token_budget=4000), primed=True, prior_tokens=900)

        assert caps.cap == 3100
        assert recall_budget(8250, PrimingConfig(), primed=False, prior_tokens=900).priming is None


# --- properties ---------------------------------------------------------------------------------

words = st.lists(
    st.text(alphabet=string.ascii_letters + "éü-", min_size=1, max_size=12), min_size=1,
    max_size=60,
).map(" ".join)  # fmt: skip
MEMORY_TYPES = ("fact", "preference", "decision", "instruction", "episode", "summary",
                "insight", "entity")  # fmt: skip
SEGMENTS = ("system_policy", "memory", "retrieval", "tool_result")


@st.composite
def configs(draw: Any) -> LayoutConfig:
    priority = draw(st.permutations(KNOWN_SECTIONS).map(tuple))
    priority = priority[: draw(st.integers(0, len(priority)))]
    caps = draw(st.dictionaries(st.sampled_from(KNOWN_SECTIONS), st.none() | st.integers(0, 8)))
    return LayoutConfig(
        context_window=draw(st.integers(0, 3000)),
        output_buffer=draw(st.integers(0, 400)),
        max_history_turns=draw(st.integers(0, 12)),
        supporting_context=SupportingContextConfig(
            budget_ratio=draw(st.floats(0, 1)),
            section_priority=priority,
            max_items=caps,
            min_query_relevance=draw(st.sampled_from([0.0, 0.2, 0.6])),
        ),
        priming=PrimingConfig(top_entities=draw(st.integers(0, 5))),
    )


@st.composite
def memories(draw: Any) -> list[Recalled]:
    count = draw(st.integers(0, 25))
    return [
        Recalled(
            id=str(n + 1),
            content=draw(words),
            memory_type=draw(st.sampled_from(MEMORY_TYPES)),
            segment_kind=draw(st.sampled_from(SEGMENTS)),
            tier=draw(st.sampled_from(["short_term", "long_term"])),
            similarity=draw(st.floats(-1, 1)),
            score=draw(st.floats(0, 2)),
        )  # fmt: skip
        for n in range(count)
    ]


def turns_of(session: str, contents: list[tuple[str, str]]) -> list[PastTurn]:
    return [
        PastTurn(session, n + 1, role, content, estimate_tokens(content))
        for n, (role, content) in enumerate(contents)
    ]


roles = st.sampled_from(["user", "assistant", "tool"])


@settings(max_examples=examples(300), deadline=None)
@given(
    config=configs(),
    system_tokens=st.integers(0, 600),
    tool_tokens=st.integers(0, 300),
    recalled=memories(),
    history=st.lists(st.tuples(roles, words), max_size=14),
    prior=st.lists(st.tuples(roles, words), max_size=5),
    query=words,
    primed=st.booleans(),
)
def test_every_composed_prompt_keeps_to_the_budget_and_its_sources(
    config, system_tokens, tool_tokens, recalled, history, prior, query, primed
):
    """The prompt's estimate never exceeds the dynamic budget unless the cascade's last stage
    reported the overage; every line is the system prompt's, a recalled memory's or a turn's
    (this session's, or an earlier one's), and the prompt is exactly those, in order."""
    current = turns_of("7", history)
    query_turn = PastTurn("7", len(current) + 1, "user", query, estimate_tokens(query))
    keep = config.max_history_turns
    readable = current[-keep:] if keep else []
    earlier = turns_of("3", prior)
    plan = retrieval_plan(config, primed=primed, top_k_max=200)

    composed = compose_turn(
        config, system_prompt="You help.", system_prompt_tokens=system_tokens,
        tool_schema_tokens=tool_tokens, memories=recalled, plan=plan, history=readable,
        prior=earlier, query=query_turn, estimator=estimate_tokens,
    )  # fmt: skip

    result, prompt = composed.result, composed.prompt
    estimated = prompt_dynamic_tokens(prompt, estimate_tokens)
    assert estimated <= result.estimated_tokens
    if result.estimated_tokens > result.dynamic_budget:
        last = result.stages[-1]
        assert last.number == 9 and not last.fits
        assert any("emergency overage" in w for w in result.warnings)
    by_id = {m.id: m for m in recalled}
    own = {t.index: t for t in [*current, query_turn]}
    others = {t.index: t for t in earlier}
    blocks = [["You help."]]
    rest: list[dict[str, str]] = []
    section = None
    header = False
    for part in prompt.parts:
        if part.kind == "supporting":
            assert part.memory_id in by_id
            if part.section != section:
                section = part.section
                blocks.append([f"## {_title(section)}"])
            blocks[-1].append(f"- {by_id[part.memory_id].content}")
        elif part.kind == "prior":
            assert part.session_id == "3" and part.turn in others
            if not header:
                header = True
                blocks.append(["## Earlier sessions"])
            blocks[-1].append(f"{others[part.turn].role}: {others[part.turn].content}")
        elif part.kind in ("history", "query"):
            row = own[part.turn]
            rest.append({"role": row.role, "content": row.content})
        else:
            assert part.kind == "system_prompt"
    system = "\n\n".join("\n".join(block) for block in blocks)
    assert prompt.messages == [{"role": "system", "content": system}, *rest]
    assert rest[-1] == {"role": "user", "content": query}


def _title(section: str | None) -> str:
    return SECTION_TITLES[section or ""]


def test_the_composed_layout_counts_what_it_did_not_read() -> None:
    config = replace(LayoutConfig(), max_history_turns=2)
    current = turns_of("7", [("user", "a"), ("assistant", "b"), ("user", "c")])
    query = PastTurn("7", 4, "user", "d", 1)

    composed = compose_turn(
        config, system_prompt="", system_prompt_tokens=0, tool_schema_tokens=0, memories=[],
        plan=retrieval_plan(config, primed=False, top_k_max=200), history=current[-2:],
        prior=[], query=query, estimator=estimate_tokens,
    )  # fmt: skip

    assert composed.layout["filtered"] == {"history_over_max_turns": 1}
    assert composed.layout["parts"]["history"]["given"] == 3
    assert composed.prompt.messages[0] == {"role": "assistant", "content": "b"}


def test_the_system_message_separates_its_blocks_with_one_blank_line() -> None:
    """The system prompt, each section and the earlier sessions, a blank line between them,
    nothing before the first or after the last."""
    query = PastTurn("7", 2, "user", "and now?", 3)
    supporting = {
        "known_facts": [SupportingItem("Ada is on the Pro plan.", id="m1")],
        "passages": [SupportingItem("Refunds take 5 days.", term="short", id="m2")],
    }
    prior = [PastTurn("3", 1, "user", "hi", 1), PastTurn("3", 2, "assistant", "hello", 1)]
    priority = ["known_facts", "passages"]
    kwargs: dict[str, Any] = {"supporting": supporting, "prior": prior, "priority": priority}
    kwargs |= {"history": [], "query": query}
    facts = SECTION_TITLES["known_facts"]
    passages = SECTION_TITLES["passages"]
    body = (
        f"## {facts}\n- Ada is on the Pro plan.\n\n## {passages}\n- Refunds take 5 days.\n\n"
        "## Earlier sessions\nuser: hi\nassistant: hello"
    )

    with_prompt = render_prompt(system_prompt="Be brief.", **kwargs)
    without = render_prompt(system_prompt="", **kwargs)
    alone = render_prompt(**(kwargs | {"system_prompt": "Be brief", "supporting": {}, "prior": []}))

    assert with_prompt.messages[0]["content"] == "Be brief.\n\n" + body
    assert with_prompt.system_dynamic == "\n\n" + body
    assert without.messages[0]["content"] == body == without.system_dynamic
    assert alone.messages[0]["content"] == "Be brief" and alone.system_dynamic == ""
    assert with_prompt.messages[1] == {"role": "user", "content": "and now?"}
