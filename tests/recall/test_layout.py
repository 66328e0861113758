"""Chat layout budgeting and the nine-stage pruning cascade (seed 000, SPEC section 6)."""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from recall.layout.budget import compute_budget
from recall.layout.cascade import PRUNING_STAGES
from recall.layout.config import (
    SEED_CHAT_FRAGMENT,
    SEED_COMPACTION_FRAGMENT,
    LayoutConfig,
    LayoutConfigError,
    PrimingConfig,
    SupportingContextConfig,
    layout_config_errors,
    layout_config_to_dict,
    parse_memory_config,
)
from recall.layout.estimate import (
    ITEM_OVERHEAD_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    SECTION_HEADER_TOKENS,
    estimate_tokens,
)
from recall.layout.monitor import BudgetSeverity, CompactionConfig, ContextBudgetMonitor
from recall.layout.planner import LayoutResult, layout_result_to_dict, plan_layout
from recall.layout.request import LayoutRequest, LayoutRequestError, SupportingItem, Turn
from recall.layout.vocabulary import KNOWN_SECTIONS
from tests.properties import examples


def one_token_per_char(text: str) -> int:
    """Makes hand arithmetic in the examples exact."""
    return len(text)


def text(tokens: int) -> str:
    return "x" * tokens


def turn(tokens: int, role: str = "user") -> Turn:
    return Turn(role, text(tokens))


def item(tokens: int = 5, **kwargs: Any) -> SupportingItem:
    return SupportingItem(content=text(tokens), **kwargs)


def request(**kwargs: Any) -> LayoutRequest:
    """A request with no fixed costs unless given, so dynamic budget = context_window."""
    defaults: dict[str, Any] = {
        "system_prompt_tokens": 0,
        "tool_schema_tokens": 0,
        "output_buffer": 0,
        "budget_ratio": 1.0,
    }
    return LayoutRequest(**{**defaults, **kwargs})


def plan(**kwargs: Any) -> LayoutResult:
    return plan_layout(request(**kwargs), one_token_per_char)


ALL_SECTIONS_UNCAPPED = parse_memory_config(
    {
        "supporting_context": {
            "section_priority": list(KNOWN_SECTIONS),
            "max_items": dict.fromkeys(KNOWN_SECTIONS),
        }
    }
)


# --- budget accounting (the seed's numbers) ---------------------------------------------


def test_seed_budget_example_27500_and_8250() -> None:
    budget = compute_budget(32000, 1500, 500, 2500, 0.30)
    assert (budget.fixed_costs, budget.dynamic_budget, budget.supporting_context_budget) == (
        4500,
        27500,
        8250,
    )


def test_seed_budget_example_through_the_planner_with_default_config() -> None:
    result = plan_layout(
        LayoutRequest(system_prompt_tokens=1500, tool_schema_tokens=500, query="hello")
    )
    assert result.fixed_costs == 4500
    assert result.dynamic_budget == result.available_budget == 27500
    assert result.supporting_context_budget == 8250
    assert result.stages == []
    assert result.fits and not result.emergency_overage


def test_supporting_budget_is_floored() -> None:
    assert compute_budget(1000, 0, 0, 0, 0.3333).supporting_context_budget == 333


def test_dynamic_budget_never_goes_negative_and_is_reported() -> None:
    result = plan(context_window=1000, system_prompt_tokens=900, output_buffer=200)
    assert result.fixed_costs == 1100
    assert result.dynamic_budget == 0
    assert any("leave no room" in w for w in result.warnings)


def test_request_overrides_config_numbers() -> None:
    result = plan_layout(LayoutRequest(context_window=8000, output_buffer=1000, budget_ratio=0.5))
    assert (result.dynamic_budget, result.supporting_context_budget) == (7000, 3500)


def test_default_estimator_is_about_four_chars_per_token() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("x" * 8) == 2
    assert estimate_tokens("x" * 9) == 3


# --- estimates, utilization and severity ------------------------------------------------


def test_parts_add_up_to_the_estimate() -> None:
    result = plan(
        context_window=10_000,
        history=[turn(100), turn(50, "assistant")],
        prior_session_history=[turn(30)],
        supporting={"known_facts": [item(10), item(20)], "passages": [item(7, term="short")]},
        query=text(9),
    )
    assert (result.history_tokens, result.prior_history_tokens) == (150, 30)
    assert (result.supporting_tokens, result.query_tokens) == (37, 9)
    messages = 4 * MESSAGE_OVERHEAD_TOKENS  # two turns, one prior turn, the query
    headers = 3 * SECTION_HEADER_TOKENS  # prior history, known_facts, passages
    assert result.formatting_overhead == messages + headers + 3 * ITEM_OVERHEAD_TOKENS
    parts = (
        result.history_tokens
        + result.prior_history_tokens
        + result.supporting_tokens
        + result.query_tokens
        + result.formatting_overhead
    )
    assert result.estimated_tokens == parts
    assert result.free_tokens == 10_000 - parts


@pytest.mark.parametrize(
    ("estimate", "severity"),
    [
        (700, BudgetSeverity.NORMAL),
        (701, BudgetSeverity.ELEVATED),
        (850, BudgetSeverity.ELEVATED),
        (851, BudgetSeverity.WARNING),
        (950, BudgetSeverity.WARNING),
        (951, BudgetSeverity.CRITICAL),
        (1000, BudgetSeverity.CRITICAL),
    ],
)
def test_utilization_is_relative_to_the_dynamic_budget(
    estimate: int, severity: BudgetSeverity
) -> None:
    # 500 fixed tokens do not count: the denominator is the 1000-token dynamic budget.
    result = plan(
        context_window=1500,
        system_prompt_tokens=500,
        history=[turn(estimate - MESSAGE_OVERHEAD_TOKENS)],
    )
    assert result.estimated_tokens == estimate
    assert result.utilization_pct == pytest.approx(estimate / 10)
    assert result.severity is severity
    assert result.fits and result.stages == []


def test_overage_severity_when_the_emergency_minimum_does_not_fit() -> None:
    result = plan(context_window=1000, history=[turn(1001)])
    assert result.estimated_tokens == 1005
    assert result.severity is BudgetSeverity.OVERAGE
    assert result.emergency_overage


def test_budget_status_feeds_the_compaction_monitor() -> None:
    result = plan(context_window=1000, history=[turn(896)])
    status = result.budget_status(turn_index=3)
    assert (status.total_tokens, status.available_budget, status.utilization_pct) == (
        900,
        1000,
        90.0,
    )
    monitor = ContextBudgetMonitor(CompactionConfig(enabled=True, cooldown_turns=1))
    monitor.record_turn(status)
    assert monitor.should_compact() is True
    monitor.mark_compaction_started()
    assert monitor.should_compact() is False


# --- filtering and section filling (before pruning) -------------------------------------


def test_decayed_superseded_and_redundant_summaries_are_filtered() -> None:
    result = plan(
        context_window=10_000,
        supporting={
            "known_facts": [item(decayed=True), item(superseded=True), item(id="kept")],
            "summaries": [item(redundant=True), item(id="summary")],
            "insights": [item(redundant=True, id="redundant-insight")],
        },
    )
    assert [i.id for i in result.supporting["known_facts"]] == ["kept"]
    assert [i.id for i in result.supporting["summaries"]] == ["summary"]
    assert [i.id for i in result.supporting["insights"]] == ["redundant-insight"]
    assert result.filtered["decayed"] == 1
    assert result.filtered["superseded"] == 1
    assert result.filtered["redundant_summary"] == 1


def test_redundant_summaries_kept_when_exclusion_is_off() -> None:
    config = parse_memory_config({"supporting_context": {"exclude_redundant_summaries": False}})
    result = plan(
        context_window=10_000, config=config, supporting={"summaries": [item(redundant=True)]}
    )
    assert len(result.supporting["summaries"]) == 1


def test_min_query_relevance_filters_scored_items_only() -> None:
    config = parse_memory_config({"supporting_context": {"min_query_relevance": 0.5}})
    items = [item(relevancy=0.49, id="low"), item(relevancy=0.5, id="edge"), item(id="unscored")]
    result = plan(context_window=10_000, config=config, supporting={"insights": items})
    assert [i.id for i in result.supporting["insights"]] == ["edge", "unscored"]
    assert result.filtered["below_min_query_relevance"] == 1


def test_history_is_limited_to_max_history_turns() -> None:
    history = [turn(1) for _ in range(20)]
    result = plan(context_window=10_000, history=history)
    assert len(result.history) == 15
    assert result.filtered["history_over_max_turns"] == 5


def test_sections_fill_in_priority_order_within_the_supporting_budget() -> None:
    # Supporting budget 50. Three 10-token facts cost 6 + 3 * (10 + 2) = 42, leaving 8:
    # a 5-token passage (6 + 5 + 2 = 13) is skipped, an empty one (6 + 0 + 2 = 8) fits.
    result = plan(
        context_window=100,
        budget_ratio=0.5,
        supporting={
            "passages": [item(5, term="short", id="big"), item(0, term="short", id="tiny")],
            "known_facts": [item(10), item(10), item(10)],
        },
    )
    assert result.supporting_context_budget == 50
    assert len(result.supporting["known_facts"]) == 3
    assert [p.id for p in result.supporting["passages"]] == ["tiny"]
    assert result.filtered["over_supporting_budget"] == 1
    assert result.stages == []


def test_max_items_caps_each_section() -> None:
    passages = [item(1, term="short") for _ in range(7)]
    result = plan_layout(LayoutRequest(supporting={"passages": passages}))
    assert len(result.supporting["passages"]) == 5
    assert result.filtered["over_max_items"] == 2


def test_sections_missing_from_section_priority_are_unused_and_warned() -> None:
    result = plan_layout(LayoutRequest(supporting={"entities": [item(), item()]}))
    assert "entities" not in result.supporting
    assert result.filtered["not_in_section_priority"] == 2
    assert any("entities" in w and "section_priority" in w for w in result.warnings)


# --- the nine-stage cascade, stage by stage ---------------------------------------------

TURN_TOKENS = 1000
ITEM_TOKENS = 5


def cascade_request_parts() -> dict[str, Any]:
    """A payload in which every stage removes something, so each estimate is lower."""

    def passage(term: str, relevancy: float) -> SupportingItem:
        return item(ITEM_TOKENS, term=term, relevancy=relevancy, id=f"{term}-{relevancy}")

    def many(section: str, count: int) -> list[SupportingItem]:
        return [item(ITEM_TOKENS, id=f"{section}-{i}") for i in range(count)]

    passages = [
        passage("long", 0.2),  # stage 3
        passage("long", 0.4),  # stage 4
        passage("short", 0.45),  # stage 4
        passage("short", 0.6),  # stage 6: lowest of four short ones
        passage("short", 0.95),
        passage("short", 0.7),
        passage("short", 0.9),
        passage("long", 0.8),
        passage("long", 0.55),  # stage 6: lowest of three long ones
        passage("long", 0.99),
    ]
    return {
        "prior_session_history": [turn(TURN_TOKENS) for _ in range(2)],
        "history": [turn(TURN_TOKENS) for _ in range(12)],
        "supporting": {
            "passages": passages,
            "insights": many("insights", 4),
            "summaries": many("summaries", 4),
            "entities": many("entities", 6),
            "known_facts": many("known_facts", 6),
            "tools": many("tools", 1),
            "state": many("state", 1),
        },
        "config": ALL_SECTIONS_UNCAPPED,
    }


def expected_estimate(prior: int, turns: int, sections: Mapping[str, int]) -> int:
    """The documented formula, computed independently of the planner."""
    turn_cost = TURN_TOKENS + MESSAGE_OVERHEAD_TOKENS
    prior_cost = prior * turn_cost + (SECTION_HEADER_TOKENS if prior else 0)
    item_cost = ITEM_TOKENS + ITEM_OVERHEAD_TOKENS
    supporting = sum(SECTION_HEADER_TOKENS + n * item_cost for n in sections.values() if n)
    return prior_cost + turns * turn_cost + supporting


INITIAL = {
    "passages": 10,
    "insights": 4,
    "summaries": 4,
    "entities": 6,
    "known_facts": 6,
    "tools": 1,
    "state": 1,
}
# (prior turns, current turns, section counts) after each stage, and what it removes.
AFTER_STAGE: dict[int, tuple[int, int, dict[str, int], dict[str, int]]] = {
    1: (0, 12, INITIAL, {"prior_session_turns": 2}),
    2: (0, 10, INITIAL, {"turns": 2}),
    3: (0, 10, {**INITIAL, "passages": 9}, {"long_passages": 1}),
    4: (0, 10, {**INITIAL, "passages": 7}, {"long_passages": 1, "short_passages": 1}),
    5: (0, 5, {**INITIAL, "passages": 7}, {"turns": 5}),
    6: (0, 5, {**INITIAL, "passages": 5}, {"long_passages": 1, "short_passages": 1}),
    7: (
        0,
        5,
        {**INITIAL, "passages": 5, "insights": 3, "summaries": 3},
        {"insights": 1, "summaries": 1},
    ),
    8: (
        0,
        5,
        {**INITIAL, "passages": 5, "insights": 3, "summaries": 3, "entities": 5, "known_facts": 5},
        {"entities": 1, "known_facts": 1},
    ),
    9: (
        0,
        2,
        {"passages": 2},
        {
            "turns": 3,
            "short_passages": 1,
            "long_passages": 2,
            "insights": 3,
            "summaries": 3,
            "entities": 5,
            "known_facts": 5,
            "tools": 1,
            "state": 1,
        },
    ),
}


def test_cascade_scenario_does_not_fit_before_pruning() -> None:
    initial = expected_estimate(2, 12, INITIAL)
    result = plan(context_window=initial, **cascade_request_parts())
    assert result.stages == [] and result.estimated_tokens == initial
    result = plan(context_window=initial - 1, **cascade_request_parts())
    assert result.estimate_before_pruning == initial
    assert result.stages_run == [1]


@pytest.mark.parametrize("stage", range(1, 10))
def test_cascade_stops_at_the_first_stage_that_fits(stage: int) -> None:
    prior, turns, sections, _ = AFTER_STAGE[stage]
    window = expected_estimate(prior, turns, sections)
    result = plan(context_window=window, **cascade_request_parts())
    assert result.stages_run == list(range(1, stage + 1))
    assert [s.fits for s in result.stages] == [False] * (stage - 1) + [True]
    assert result.estimated_tokens == window
    assert result.fits and not result.emergency_overage
    assert len(result.history) == turns
    assert {name: len(items) for name, items in result.supporting.items()} == {
        name: n for name, n in sections.items() if n
    }
    # Earlier stages' estimates match the formula too.
    for report in result.stages:
        p, t, s, removed = AFTER_STAGE[report.number]
        assert report.estimate_after == expected_estimate(p, t, s)
        assert report.removed == removed
        assert report.name == PRUNING_STAGES[report.number - 1].name


def test_prior_session_history_goes_first_and_current_history_is_untouched() -> None:
    prior, turns, sections, _ = AFTER_STAGE[1]
    result = plan(
        context_window=expected_estimate(prior, turns, sections), **cascade_request_parts()
    )
    assert result.stages_run == [1]
    assert result.prior_session_history == []
    assert len(result.history) == 12


def test_passages_are_capped_by_relevance_and_keep_their_order() -> None:
    prior, turns, sections, _ = AFTER_STAGE[6]
    result = plan(
        context_window=expected_estimate(prior, turns, sections), **cascade_request_parts()
    )
    kept = [(p.term, p.relevancy) for p in result.supporting["passages"]]
    assert kept == [
        ("short", 0.95),
        ("short", 0.7),
        ("short", 0.9),
        ("long", 0.8),
        ("long", 0.99),
    ]


def test_emergency_minimum_keeps_two_turns_and_two_short_passages_and_warns() -> None:
    prior, turns, sections, _ = AFTER_STAGE[9]
    result = plan(
        context_window=expected_estimate(prior, turns, sections), **cascade_request_parts()
    )
    assert result.stages_run == list(range(1, 10))
    assert result.fits and not result.emergency_overage
    assert [p.relevancy for p in result.supporting["passages"]] == [0.95, 0.9]
    assert set(result.supporting) == {"passages"}
    assert any("emergency minimum" in w for w in result.warnings)
    assert not any("emergency overage" in w for w in result.warnings)


def test_emergency_overage_is_flagged_not_hidden() -> None:
    prior, turns, sections, _ = AFTER_STAGE[9]
    minimum = expected_estimate(prior, turns, sections)
    result = plan(context_window=minimum - 1, **cascade_request_parts())
    assert result.stages_run == list(range(1, 10))
    assert not result.fits and result.emergency_overage
    assert result.estimated_tokens == minimum
    assert result.stages[-1].fits is False
    overage = [w for w in result.warnings if "emergency overage" in w]
    assert len(overage) == 1 and "1 over" in overage[0]


def test_a_query_larger_than_the_window_is_an_emergency_overage() -> None:
    result = plan(context_window=100, query=text(500))
    assert result.emergency_overage
    assert result.query_tokens == 500


def test_unscored_passages_count_as_below_the_relevance_thresholds() -> None:
    result = plan(
        context_window=20,
        history=[turn(0)],
        supporting={"passages": [item(0, term="long", id="unscored-long"), item(0, term="short")]},
    )
    # 4 (turn) + 6 (header) + 2 * 2 (items) = 14 fits 20, so nothing is pruned...
    assert result.stages == []
    result = plan(
        context_window=13,
        history=[turn(0)],
        supporting={"passages": [item(0, term="long", id="unscored-long"), item(0, term="short")]},
    )
    # ...but at 13 stage 3 drops the unscored long-term passage first.
    assert result.stages_run == [1, 2, 3]
    assert result.stages[-1].removed == {"long_passages": 1}


# --- configuration ----------------------------------------------------------------------


def test_defaults_are_the_seed_chat_fragment() -> None:
    assert parse_memory_config(SEED_CHAT_FRAGMENT) == LayoutConfig()
    config = LayoutConfig()
    assert (config.context_window, config.output_buffer, config.max_history_turns) == (
        32000,
        2500,
        15,
    )
    assert config.supporting_context.budget_ratio == 0.30
    assert config.supporting_context.section_priority == (
        "known_facts",
        "passages",
        "insights",
        "summaries",
        "tools",
        "state",
    )
    assert dict(config.supporting_context.max_items) == {
        "passages": 5,
        "known_facts": 15,
        "insights": 10,
        "summaries": 5,
        "tools": 5,
    }
    assert config.priming == PrimingConfig(
        enabled=True,
        token_budget=4000,
        top_entities=20,
        max_insights=10,
        max_summaries=5,
        max_known_facts=20,
        previous_sessions=1,
        previous_session_turns=3,
    )
    assert config.compaction.enabled is False


def test_seed_compaction_fragment_parses_and_enables() -> None:
    config = parse_memory_config(SEED_COMPACTION_FRAGMENT)
    assert config.compaction == CompactionConfig(enabled=True)
    assert config.supporting_context == SupportingContextConfig()


def test_accepts_dict_without_the_memory_key_and_empty_input() -> None:
    assert parse_memory_config({"context_window": 8000}).context_window == 8000
    assert parse_memory_config({"memory": {"context_window": 8000}}).context_window == 8000
    assert parse_memory_config("") == LayoutConfig()
    assert parse_memory_config({}) == LayoutConfig()


def test_max_items_merge_over_defaults_and_null_uncaps() -> None:
    config = parse_memory_config(
        {"supporting_context": {"max_items": {"passages": 2, "tools": None}}}
    )
    caps = config.supporting_context.max_items
    assert (caps["passages"], caps["tools"], caps["known_facts"]) == (2, None, 15)


@pytest.mark.parametrize(
    ("data", "path", "hint"),
    [
        (
            {"supporting_context": {"budget_ration": 0.3}},
            "memory.supporting_context.budget_ration",
            "did you mean 'budget_ratio'",
        ),
        (
            {"supporting_context": {"section_priority": ["known_facts", "key_facts"]}},
            "memory.supporting_context.section_priority[1]",
            "use 'known_facts'",
        ),
        (
            {"supporting_context": {"max_items": {"key_facts": 3}}},
            "memory.supporting_context.max_items.key_facts",
            "use 'known_facts'",
        ),
        (
            {"supporting_context": {"max_items": {"pasages": 3}}},
            "memory.supporting_context.max_items.pasages",
            "did you mean 'passages'",
        ),
        ({"priming": {"top_entity": 3}}, "memory.priming.top_entity", "'top_entities'"),
        ({"compaction": {"cooldown": 3}}, "memory.compaction.cooldown", "'cooldown_turns'"),
        ({"context_windw": 3}, "memory.context_windw", "'context_window'"),
        ({"zzz": 1}, "memory.zzz", "expected one of"),
    ],
)
def test_unknown_keys_are_rejected_with_a_suggestion(
    data: dict[str, Any], path: str, hint: str
) -> None:
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config(data)
    assert list(caught.value.errors) == [path]
    assert hint in caught.value.errors[path]


def test_misspelled_key_in_yaml_with_memory_root() -> None:
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config("memory:\n  supporting_context:\n    budget_ration: 0.3\n")
    assert "memory.supporting_context.budget_ration" in caught.value.errors


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"supporting_context": {"budget_ratio": 1.5}}, "memory.supporting_context.budget_ratio"),
        ({"supporting_context": {"budget_ratio": "0.3"}}, "memory.supporting_context.budget_ratio"),
        ({"supporting_context": {"budget_ratio": True}}, "memory.supporting_context.budget_ratio"),
        ({"context_window": -1}, "memory.context_window"),
        ({"context_window": 3.5}, "memory.context_window"),
        ({"max_history_turns": True}, "memory.max_history_turns"),
        ({"priming": {"enabled": "yes"}}, "memory.priming.enabled"),
        ({"compaction": {"compaction_threshold": 85}}, "memory.compaction.compaction_threshold"),
        ({"compaction": {"llm_service": ""}}, "memory.compaction.llm_service"),
        (
            {"supporting_context": {"max_items": {"passages": -2}}},
            "memory.supporting_context.max_items.passages",
        ),
        (
            {"supporting_context": {"section_priority": "passages"}},
            "memory.supporting_context.section_priority",
        ),
        (
            {"supporting_context": {"section_priority": ["passages", "passages"]}},
            "memory.supporting_context.section_priority[1]",
        ),
        ({"priming": [1, 2]}, "memory.priming"),
    ],
)
def test_ill_typed_values_are_rejected(data: dict[str, Any], path: str) -> None:
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config(data)
    assert path in caught.value.errors


def test_all_errors_are_reported_together() -> None:
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config({"context_window": -1, "priming": {"x": 1}, "compaction": {"y": 2}})
    assert set(caught.value.errors) == {
        "memory.context_window",
        "memory.priming.x",
        "memory.compaction.y",
    }


def test_invalid_yaml_and_extra_top_level_keys_are_rejected() -> None:
    with pytest.raises(LayoutConfigError, match="invalid YAML"):
        parse_memory_config("memory: [unclosed")
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config({"memory": {}, "memroy": {}})
    assert "memroy" in caught.value.errors


def test_config_round_trips_through_dict_and_yaml() -> None:
    config = parse_memory_config(
        {
            "context_window": 128000,
            "supporting_context": {"section_priority": ["passages", "entities"]},
            "compaction": {"enabled": True, "compaction_threshold": 0.7},
        }
    )
    assert parse_memory_config(layout_config_to_dict(config)) == config
    assert parse_memory_config(yaml.safe_dump(layout_config_to_dict(config))) == config


def test_directly_built_invalid_config_is_rejected_by_the_planner() -> None:
    bad = LayoutConfig(supporting_context=SupportingContextConfig(section_priority=("key_facts",)))
    assert "memory.supporting_context.section_priority[0]" in layout_config_errors(bad)
    with pytest.raises(LayoutRequestError) as caught:
        plan_layout(LayoutRequest(config=bad))
    assert "config.supporting_context.section_priority[0]" in caught.value.errors


# --- request validation and JSON --------------------------------------------------------


def test_request_accepts_plain_dicts() -> None:
    result = plan(
        context_window=1000,
        history=[{"role": "user", "content": "hi"}],
        supporting={"passages": [{"content": "p", "term": "short", "relevancy": 0.9}]},
    )
    assert result.history == [Turn("user", "hi")]
    assert result.supporting["passages"][0].relevancy == 0.9


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"supporting": {"key_facts": []}}, "supporting.key_facts"),
        ({"supporting": {"passages": [SupportingItem("p")]}}, "supporting.passages[0]"),
        (
            {"supporting": {"insights": [{"content": "i", "relevance": 1}]}},
            "supporting.insights[0].relevance",
        ),
        ({"history": [{"role": "user", "text": "hi"}]}, "history[0].text"),
        ({"context_window": -5}, "context_window"),
        ({"budget_ratio": 2.0}, "budget_ratio"),
        ({"tool_schema_tokens": -1}, "tool_schema_tokens"),
    ],
)
def test_invalid_requests_are_rejected(kwargs: dict[str, Any], path: str) -> None:
    with pytest.raises(LayoutRequestError) as caught:
        plan_layout(LayoutRequest(**kwargs))
    assert path in caught.value.errors


def test_result_serialises_to_json() -> None:
    prior, turns, sections, _ = AFTER_STAGE[9]
    window = expected_estimate(prior, turns, sections) - 1
    data = layout_result_to_dict(plan(context_window=window, **cascade_request_parts()))
    decoded = json.loads(json.dumps(data))
    assert decoded["severity"] == "overage"
    assert decoded["stages_run"] == list(range(1, 10))
    assert decoded["stages"][0]["removed"] == {"prior_session_turns": 2}
    assert decoded["history"][0] == {"role": "user", "content": text(TURN_TOKENS)}
    assert decoded["emergency_overage"] is True


def test_zero_budget_utilization_serialises_as_null() -> None:
    data = layout_result_to_dict(plan(context_window=0, query="q"))
    assert data["utilization_pct"] is None
    assert data["severity"] == "overage"


# --- properties -------------------------------------------------------------------------


@st.composite
def supporting_items(draw: st.DrawFn, section: str) -> list[SupportingItem]:
    rare = st.sampled_from([False, False, False, True])
    return [
        SupportingItem(
            content="y" * draw(st.integers(0, 120)),
            relevancy=draw(st.none() | st.floats(0, 1)),
            term=draw(st.sampled_from(["short", "long"])) if section == "passages" else None,
            decayed=draw(rare),
            superseded=draw(rare),
            redundant=draw(rare),
        )
        for _ in range(draw(st.integers(0, 7)))
    ]


turns = st.integers(0, 400).map(lambda n: Turn("user", "w" * n))
turn_lists = st.lists(turns, max_size=14)


@st.composite
def layout_requests(draw: st.DrawFn) -> LayoutRequest:
    base = LayoutRequest(
        history=draw(turn_lists),
        prior_session_history=draw(st.lists(turns, max_size=4)),
        supporting={s: draw(supporting_items(s)) for s in KNOWN_SECTIONS},
        query="q" * draw(st.integers(0, 200)),
        system_prompt_tokens=draw(st.integers(0, 400)),
        tool_schema_tokens=draw(st.integers(0, 400)),
        output_buffer=draw(st.integers(0, 500)),
        budget_ratio=draw(st.floats(0, 1)),
        config=draw(st.sampled_from([LayoutConfig(), ALL_SECTIONS_UNCAPPED])),
    )
    # Size the window around the payload so every stage, not just the emergency one,
    # is reached: a dynamic budget anywhere from 0 to a little above the unpruned size.
    fixed = base.system_prompt_tokens + base.tool_schema_tokens + (base.output_buffer or 0)
    unpruned = plan_layout(replace(base, context_window=fixed + 10**6)).estimated_tokens
    return replace(base, context_window=fixed + draw(st.integers(0, unpruned + 50)))


PROPERTY_SETTINGS = settings(max_examples=examples(150), deadline=None)


@PROPERTY_SETTINGS
@given(layout_requests())
def test_cascade_never_increases_the_estimate(req: LayoutRequest) -> None:
    result = plan_layout(req)
    estimates = [result.estimate_before_pruning] + [s.estimate_after for s in result.stages]
    assert all(a >= b for a, b in zip(estimates, estimates[1:], strict=False))
    assert result.estimated_tokens == estimates[-1]


@PROPERTY_SETTINGS
@given(layout_requests())
def test_cascade_stops_at_the_first_fitting_stage(req: LayoutRequest) -> None:
    result = plan_layout(req)
    numbers = [s.number for s in result.stages]
    assert numbers == list(range(1, len(numbers) + 1))
    assert not any(s.fits for s in result.stages[:-1])
    if result.stages and not result.stages[-1].fits:
        assert numbers[-1] == 9
    fits_before = result.estimate_before_pruning <= result.dynamic_budget
    assert (result.stages == []) == fits_before


@PROPERTY_SETTINGS
@given(layout_requests())
def test_prior_session_history_is_dropped_first(req: LayoutRequest) -> None:
    result = plan_layout(req)
    if result.stages:
        assert result.stages[0].number == 1
        assert result.stages[0].name == "drop_prior_session_history"
        assert result.prior_session_history == []
        assert set(result.stages[0].removed) <= {"prior_session_turns"}


@PROPERTY_SETTINGS
@given(layout_requests())
def test_result_fits_unless_the_emergency_flag_is_set(req: LayoutRequest) -> None:
    result = plan_layout(req)
    assert result.fits == (result.estimated_tokens <= result.dynamic_budget)
    assert result.fits or result.emergency_overage
    assert result.fits != result.emergency_overage
    if result.emergency_overage:
        assert result.stages[-1].number == 9
        assert any("emergency overage" in w for w in result.warnings)


@PROPERTY_SETTINGS
@given(layout_requests())
def test_retained_content_comes_from_the_input_and_supporting_fits_its_budget(
    req: LayoutRequest,
) -> None:
    result = plan_layout(req)
    history = list(req.history)
    assert history[len(history) - len(result.history) :] == result.history
    sections = [items for items in result.supporting.values() if items]
    framing = len(sections) * SECTION_HEADER_TOKENS + sum(
        len(items) * ITEM_OVERHEAD_TOKENS for items in sections
    )
    assert result.supporting_tokens + framing <= result.supporting_context_budget
    for name, items in result.supporting.items():
        source = list(req.supporting[name])
        assert all(i in source and not (i.decayed or i.superseded) for i in items)


identifier = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=16)
LEVEL_KEYS: dict[str, tuple[str, ...]] = {
    "": (
        "context_window",
        "output_buffer",
        "max_history_turns",
        "supporting_context",
        "priming",
        "compaction",
    ),
    "supporting_context": (
        "budget_ratio",
        "section_priority",
        "max_items",
        "min_query_relevance",
        "exclude_redundant_summaries",
    ),
    "supporting_context.max_items": KNOWN_SECTIONS,
    "priming": tuple(PrimingConfig.__dataclass_fields__),
    "compaction": tuple(CompactionConfig.__dataclass_fields__),
}


def nest(level: str, key: str) -> dict[str, Any]:
    data: dict[str, Any] = {key: 1}
    for part in reversed([p for p in level.split(".") if p]):
        data = {part: data}
    return data


@settings(max_examples=examples(200))
@given(st.sampled_from(sorted(LEVEL_KEYS)), identifier, st.booleans())
def test_unknown_config_keys_are_always_rejected(level: str, key: str, rooted: bool) -> None:
    assume(key not in LEVEL_KEYS[level])
    data = nest(level, key)
    if rooted:
        data = {"memory": data}
    path = ".".join(p for p in ("memory", level, key) if p)
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config(data)
    assert path in caught.value.errors


@given(identifier)
def test_unknown_section_names_in_priority_are_always_rejected(name: str) -> None:
    assume(name not in KNOWN_SECTIONS)
    with pytest.raises(LayoutConfigError) as caught:
        parse_memory_config({"supporting_context": {"section_priority": ["passages", name]}})
    assert "memory.supporting_context.section_priority[1]" in caught.value.errors


ratios = st.floats(0, 1)
counts = st.integers(0, 100_000)
valid_configs = st.fixed_dictionaries(
    {},
    optional={
        "context_window": counts,
        "max_history_turns": counts,
        "supporting_context": st.fixed_dictionaries(
            {},
            optional={
                "budget_ratio": ratios,
                "min_query_relevance": ratios,
                "section_priority": st.permutations(KNOWN_SECTIONS).flatmap(
                    lambda p: st.integers(0, len(p)).map(lambda n: list(p[:n]))
                ),
                "max_items": st.dictionaries(st.sampled_from(KNOWN_SECTIONS), st.none() | counts),
            },
        ),
        "priming": st.fixed_dictionaries(
            {}, optional={"enabled": st.booleans(), "top_entities": counts}
        ),
        "compaction": st.fixed_dictionaries(
            {},
            optional={
                "enabled": st.booleans(),
                "compaction_threshold": ratios,
                "trend_window": counts,
            },
        ),
    },
)


@given(valid_configs)
def test_valid_configs_round_trip(data: dict[str, Any]) -> None:
    config = parse_memory_config(data)
    assert parse_memory_config(layout_config_to_dict(config)) == config
    assert layout_config_errors(config) == {}
