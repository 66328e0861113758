"""The budget planner: the seed's budget shape as examples, SPEC §5's invariants as properties."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recall.planner import (
    SEGMENT_KINDS,
    BudgetPlan,
    BudgetPolicy,
    Candidate,
    DecisionCode,
    cut_order,
    plan_budget,
)
from tests.properties import examples

SEED_POLICY = {
    "totalTokenBudget": 3200,
    "perSegmentReservation": {
        "system_policy": 500,
        "memory": 800,
        "retrieval": 900,
        "tool_result": 300,
    },
    "perSegmentCeiling": {"memory": 1200, "retrieval": 1200},
    "dropOrder": ["tool_result", "retrieval", "memory"],
    "forbiddenSegmentKinds": [],
    "pinned": ["system_policy"],
    "diagnosticsVerbosity": "summary",
}

PRESSURE_CODES = {DecisionCode.BUDGET_FLOOR_HIT, DecisionCode.BUDGET_DROP_ORDER}
DROP_CODES = PRESSURE_CODES | {DecisionCode.BUDGET_CEILING_HIT}


def seed_policy(**changes: object) -> BudgetPolicy:
    return BudgetPolicy.from_policy({**SEED_POLICY, **changes})


def items(kind: str, *sizes: int) -> list[Candidate]:
    prefix = kind.split("_")[0][:3]
    return [Candidate(f"{prefix}{i}", kind, size, 1.0 - i / 100) for i, size in enumerate(sizes)]


def codes(plan: BudgetPlan) -> dict[str, str]:
    return {d.id: d.code.value for d in plan.decisions}


def allocations(plan: BudgetPlan) -> dict[str, int]:
    return {kind: plan.per_kind[kind].allocated for kind in SEGMENT_KINDS}


# --- policy parsing ----------------------------------------------------------------------


def test_from_policy_reads_the_seed_budget_shape() -> None:
    policy = seed_policy()
    assert policy.total_token_budget == 3200
    assert dict(policy.per_segment_reservation) == SEED_POLICY["perSegmentReservation"]
    assert policy.ceiling("memory") == 1200
    assert policy.ceiling("system_policy") is None
    assert policy.drop_order == ("tool_result", "retrieval", "memory")
    assert policy.pinned == frozenset({"system_policy"})
    assert policy.forbidden == frozenset()


def test_from_policy_defaults_missing_axes_and_treats_null_ceiling_as_no_cap() -> None:
    policy = BudgetPolicy.from_policy(
        {"totalTokenBudget": 100, "perSegmentCeiling": {"memory": None, "retrieval": 5}}
    )
    assert policy.ceiling("memory") is None
    assert policy.ceiling("retrieval") == 5
    assert policy.reservation("memory") == 0
    assert (policy.drop_order, policy.pinned, policy.forbidden) == ((), frozenset(), frozenset())


@pytest.mark.parametrize(
    "change",
    [
        {"dropOrder": ["memory", "chat_history"]},
        {"pinned": ["prompt"]},
        {"perSegmentReservation": {"memory": -1}},
        {"totalTokenBudget": -5},
    ],
)
def test_policy_refuses_unknown_kinds_and_negative_numbers(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        seed_policy(**change)


def test_candidates_with_unknown_kind_or_negative_tokens_are_refused() -> None:
    with pytest.raises(ValueError):
        plan_budget([Candidate("x", "chat", 10, 1.0)], seed_policy())
    with pytest.raises(ValueError):
        plan_budget([Candidate("x", "memory", -1, 1.0)], seed_policy())


# --- examples with the seed's budget shape -----------------------------------------------


def test_seed_shape_without_pressure_includes_everything() -> None:
    candidates = [
        *items("system_policy", 400),
        *items("memory", 300, 400),
        *items("retrieval", 500, 400),
        *items("tool_result", 200),
    ]
    plan = plan_budget(candidates, seed_policy())
    assert not plan.pressure
    assert plan.included_ids == [c.id for c in candidates]
    assert allocations(plan) == {
        "system_policy": 400,
        "memory": 700,
        "retrieval": 900,
        "tool_result": 200,
    }
    assert plan.used_tokens == 2200
    assert plan.per_kind["memory"].reserved == 800
    assert plan.per_kind["memory"].ceiling == 1200
    assert not plan.pinned_overflow and plan.warnings == []


def test_seed_shape_under_pressure_cuts_in_drop_order_down_to_floors() -> None:
    # demand 900 + 1200 + 1200 + 600 = 3900: 700 over the 3200 budget.
    candidates = [
        *items("system_policy", 900),
        *items("memory", 600, 600),
        *items("retrieval", 600, 600),
        *items("tool_result", 300, 300),
    ]
    plan = plan_budget(candidates, seed_policy(), allow_truncated_refs=False)
    assert plan.pressure
    # tool_result first (600 → floor 300), then retrieval (1200 → floor 900),
    # then memory takes the last 100; the pinned system policy is untouched.
    assert allocations(plan) == {
        "system_policy": 900,
        "memory": 1100,
        "retrieval": 900,
        "tool_result": 300,
    }
    assert codes(plan) == {
        "sys0": "included",
        "mem0": "included",
        "mem1": "budget_drop_order",  # memory cut, but still above its floor
        "ret0": "included",
        "ret1": "budget_floor_hit",
        "too0": "included",
        "too1": "budget_floor_hit",
    }
    assert plan.used_tokens == 900 + 600 + 600 + 300
    assert not plan.pinned_overflow


def test_pressure_fully_absorbed_by_the_first_kind_in_drop_order() -> None:
    # demand 500 + 1200 + 1200 + 600 = 3500: tool_result alone absorbs the 300 excess.
    candidates = [
        *items("system_policy", 500),
        *items("memory", 1500),
        *items("retrieval", 700, 800),
        *items("tool_result", 300, 300),
    ]
    plan = plan_budget(candidates, seed_policy(), allow_truncated_refs=False)
    assert allocations(plan) == {
        "system_policy": 500,
        "memory": 1200,
        "retrieval": 1200,
        "tool_result": 300,
    }
    assert codes(plan)["too1"] == "budget_floor_hit"
    assert codes(plan)["mem0"] == "budget_ceiling_hit"  # 1500 never fits the 1200 ceiling
    assert codes(plan)["ret1"] == "budget_ceiling_hit"  # 700 + 800 > 1200


def test_pinned_overflow_is_reported_not_hidden() -> None:
    candidates = [
        *items("system_policy", 1000, 1000, 1000),
        *items("memory", 900),
        *items("retrieval", 1000),
        *items("tool_result", 400),
    ]
    plan = plan_budget(candidates, seed_policy(), allow_truncated_refs=False)
    # Every other kind is held at its floor; the pinned kind gets what is left.
    assert allocations(plan) == {
        "system_policy": 1200,
        "memory": 800,
        "retrieval": 900,
        "tool_result": 300,
    }
    assert plan.used_tokens <= 3200
    assert plan.pinned_overflow
    assert codes(plan)["sys0"] == "included"
    assert codes(plan)["sys1"] == "budget_drop_order"
    assert any("system_policy" in warning for warning in plan.warnings)


def test_pinned_kind_over_its_own_ceiling_is_reported_too() -> None:
    policy = seed_policy(perSegmentCeiling={"system_policy": 500})
    plan = plan_budget(items("system_policy", 400, 400), policy, allow_truncated_refs=False)
    assert codes(plan) == {"sys0": "included", "sys1": "budget_ceiling_hit"}
    assert plan.pinned_overflow
    assert "ceiling" in plan.warnings[0]


def test_forbidden_kind_gets_nothing_and_its_reservation_is_released() -> None:
    policy = seed_policy(forbiddenSegmentKinds=["tool_result"])
    candidates = [*items("tool_result", 10, 20), *items("memory", 100)]
    plan = plan_budget(candidates, policy)
    assert plan.per_kind["tool_result"] == plan.per_kind["tool_result"].__class__(0, 0, 0, 0, 0)
    assert codes(plan) == {
        "too0": "segment_kind_forbidden",
        "too1": "segment_kind_forbidden",
        "mem0": "included",
    }
    assert [d.tokens for d in plan.decisions] == [0, 0, 100]


def test_forbidden_wins_over_pinned() -> None:
    policy = seed_policy(forbiddenSegmentKinds=["system_policy"])
    plan = plan_budget(items("system_policy", 10), policy)
    assert codes(plan) == {"sys0": "segment_kind_forbidden"}
    assert plan.per_kind["system_policy"].allocated == 0
    assert any("forbidden wins" in warning for warning in plan.warnings)


def test_ceiling_caps_a_kind_without_pressure() -> None:
    plan = plan_budget(items("retrieval", 700, 700, 400), seed_policy())
    assert not plan.pressure
    assert plan.per_kind["retrieval"].demand == 1200
    assert allocations(plan)["retrieval"] == 1200
    # Greedy in rank order, skipping what does not fit: 700, skip 700, then 400.
    assert codes(plan) == {"ret0": "included", "ret1": "truncated", "ret2": "included"}
    assert plan.per_kind["retrieval"].used == 1100
    strict = plan_budget(
        items("retrieval", 700, 700, 400), seed_policy(), allow_truncated_refs=False
    )
    assert codes(strict)["ret1"] == "budget_ceiling_hit"


def test_zero_candidates() -> None:
    plan = plan_budget([], seed_policy())
    assert plan.decisions == [] and plan.included_ids == [] and plan.truncated_ids == []
    assert plan.used_tokens == 0 and not plan.pressure and not plan.pinned_overflow
    assert all(plan.per_kind[kind].allocated == 0 for kind in SEGMENT_KINDS)
    assert plan.per_kind["system_policy"].reserved == 500


def test_single_huge_memory_is_kept_as_a_truncated_ref() -> None:
    huge = items("memory", 50_000)
    plan = plan_budget(huge, seed_policy())
    assert plan.per_kind["memory"].demand == 1200
    assert codes(plan) == {"mem0": "truncated"}
    assert plan.truncated_ids == ["mem0"] and plan.included_ids == []
    assert plan.used_tokens == 0

    priced = plan_budget(huge, seed_policy(), truncated_ref_tokens=40)
    assert priced.decisions[0].tokens == 40 and priced.used_tokens == 40

    dropped = plan_budget(huge, seed_policy(), allow_truncated_refs=False)
    assert codes(dropped) == {"mem0": "budget_ceiling_hit"}
    assert dropped.used_tokens == 0


def test_single_huge_item_without_any_ceiling_is_cut_to_the_total() -> None:
    policy = BudgetPolicy(total_token_budget=1000)
    plan = plan_budget(items("tool_result", 5000), policy, allow_truncated_refs=False)
    assert plan.pressure
    assert allocations(plan)["tool_result"] == 1000
    assert codes(plan) == {"too0": "budget_drop_order"}


def test_no_truncated_ref_when_the_ref_does_not_fit_the_leftover() -> None:
    plan = plan_budget(items("memory", 1100, 500), seed_policy(), truncated_ref_tokens=150)
    # 1100 fits the 1200 ceiling, leaving 100: the 150-token ref does not fit.
    assert codes(plan) == {"mem0": "included", "mem1": "budget_ceiling_hit"}


def test_only_the_highest_ranked_dropped_item_becomes_a_truncated_ref() -> None:
    plan = plan_budget(items("memory", 1000, 900, 800), seed_policy())
    assert codes(plan) == {"mem0": "included", "mem1": "truncated", "mem2": "budget_ceiling_hit"}


def test_kinds_missing_from_drop_order_are_cut_after_it_in_reverse_kind_order() -> None:
    policy = seed_policy(dropOrder=["memory"])
    assert cut_order(policy) == ("memory", "tool_result", "retrieval", "system_policy")
    pinned_first = seed_policy(dropOrder=["system_policy", "retrieval"])
    assert cut_order(pinned_first) == ("retrieval", "tool_result", "memory", "system_policy")

    candidates = [*items("memory", 1200), *items("retrieval", 1200), *items("tool_result", 1000)]
    plan = plan_budget(candidates, policy, allow_truncated_refs=False)
    # 3400 over 3200: memory absorbs it all (1200 → 1000) although tool_result has no ceiling.
    assert allocations(plan)["memory"] == 1000
    assert allocations(plan)["tool_result"] == 1000


def test_reservations_above_the_total_still_respect_the_total() -> None:
    # Validation should reject this policy; the planner must still never overspend.
    policy = BudgetPolicy(
        total_token_budget=1000,
        per_segment_reservation={"memory": 800, "retrieval": 800},
        drop_order=("retrieval",),
    )
    candidates = [*items("memory", 800), *items("retrieval", 800)]
    plan = plan_budget(candidates, policy, allow_truncated_refs=False)
    assert sum(allocations(plan).values()) == 1000
    assert allocations(plan) == {
        "system_policy": 0,
        "memory": 800,
        "retrieval": 200,
        "tool_result": 0,
    }
    assert codes(plan)["ret0"] == "budget_drop_order"
    assert any("reservations" in warning for warning in plan.warnings)


def test_reason_counts() -> None:
    plan = plan_budget(items("memory", 1000, 900, 800), seed_policy())
    assert plan.reason_counts() == {"included": 1, "truncated": 1, "budget_ceiling_hit": 1}


def test_same_inputs_give_the_same_plan() -> None:
    candidates = [*items("memory", 700, 700), *items("tool_result", 2000)]
    reordered = BudgetPolicy.from_policy(
        {
            **SEED_POLICY,
            "perSegmentReservation": dict(reversed(SEED_POLICY["perSegmentReservation"].items())),
            "pinned": ["system_policy"],
        }
    )
    assert plan_budget(candidates, seed_policy()) == plan_budget(candidates, seed_policy())
    assert plan_budget(candidates, seed_policy()) == plan_budget(candidates, reordered)


# --- properties over random candidates and random valid policies -------------------------


@st.composite
def valid_policies(draw: st.DrawFn) -> BudgetPolicy:
    """Policies validation would accept: Σ reservations ≤ total (forbidden excluded),
    reservation ≤ ceiling, pinned ∩ forbidden = ∅. Maps are built in a random key order."""
    total = draw(st.integers(0, 6000))
    forbidden = draw(st.frozensets(st.sampled_from(SEGMENT_KINDS)))
    allowed = [kind for kind in SEGMENT_KINDS if kind not in forbidden]
    pinned = draw(st.frozensets(st.sampled_from(allowed))) if allowed else frozenset()
    ceilings = {
        kind: draw(st.integers(0, 3000))
        for kind in draw(st.permutations(SEGMENT_KINDS))
        if draw(st.booleans())
    }
    reservations: dict[str, int] = {}
    room = total
    for kind in draw(st.permutations(SEGMENT_KINDS)):
        if not draw(st.booleans()):
            continue
        if kind in forbidden:
            reservations[kind] = draw(st.integers(0, 2000))  # ignored: the kind gets nothing
            continue
        most = min(room, ceilings.get(kind, room))
        reservations[kind] = draw(st.integers(0, most))
        room -= reservations[kind]
    listed = draw(st.permutations(SEGMENT_KINDS))
    drop_order = tuple(listed[: draw(st.integers(0, len(listed)))])
    return BudgetPolicy(total, reservations, ceilings, drop_order, forbidden, pinned)


@st.composite
def candidate_lists(draw: st.DrawFn) -> list[Candidate]:
    specs = draw(
        st.lists(
            st.tuples(st.sampled_from(SEGMENT_KINDS), st.integers(0, 300) | st.integers(0, 1500)),
            max_size=14,
        )
    )
    return [Candidate(f"c{i}", kind, tokens, 1.0) for i, (kind, tokens) in enumerate(specs)]


plan_inputs = st.tuples(
    candidate_lists(),
    valid_policies(),
    st.booleans(),
    st.sampled_from([0, 0, 10, 100]),
)
PROPERTY_SETTINGS = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def floor_of(plan: BudgetPlan, kind: str) -> int:
    allocation = plan.per_kind[kind]
    return min(allocation.reserved, allocation.demand)


def kinds_of(candidates: Sequence[Candidate], kind: str) -> list[Candidate]:
    return [c for c in candidates if c.segment_kind == kind]


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_budget_and_ceilings_are_never_exceeded(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    assert plan.used_tokens <= policy.total_token_budget
    assert sum(allocations(plan).values()) <= policy.total_token_budget
    if plan.pressure:  # nothing is left idle while some kind still wants more
        assert sum(allocations(plan).values()) == policy.total_token_budget
    assert plan.used_tokens == sum(plan.per_kind[k].used for k in SEGMENT_KINDS)
    assert plan.used_tokens == sum(d.tokens for d in plan.decisions)
    for kind in SEGMENT_KINDS:
        allocation = plan.per_kind[kind]
        assert 0 <= allocation.used <= allocation.allocated <= allocation.demand
        if allocation.ceiling is not None:
            assert allocation.used <= allocation.ceiling
            assert allocation.demand <= allocation.ceiling


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_demand_is_candidate_tokens_capped_by_ceiling(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    for kind in SEGMENT_KINDS:
        raw = sum(c.tokens for c in kinds_of(candidates, kind))
        cap = policy.ceiling(kind)
        expected = 0 if kind in policy.forbidden else raw if cap is None else min(raw, cap)
        assert plan.per_kind[kind].demand == expected
    total_demand = sum(plan.per_kind[k].demand for k in SEGMENT_KINDS)
    assert plan.pressure == (total_demand > policy.total_token_budget)


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_forbidden_kinds_get_nothing(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    for kind in policy.forbidden:
        assert plan.per_kind[kind].allocated == 0 and plan.per_kind[kind].used == 0
    for decision in plan.decisions:
        forbidden_code = decision.code is DecisionCode.SEGMENT_KIND_FORBIDDEN
        assert forbidden_code == (decision.segment_kind in policy.forbidden)


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_floors_hold(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    for kind in SEGMENT_KINDS:
        allocation = plan.per_kind[kind]
        if kind not in policy.forbidden and allocation.demand >= allocation.reserved:
            assert allocation.allocated >= allocation.reserved
        assert allocation.allocated >= floor_of(plan, kind)
    assert plan.warnings == [] or plan.pinned_overflow or policy.pinned & policy.forbidden


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_kinds_are_cut_in_drop_order_one_at_a_time(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    order = cut_order(policy)
    # The cut order starts with dropOrder (pinned and forbidden kinds left out) and ends
    # with the pinned kinds.
    listed = [k for k in policy.drop_order if k not in policy.pinned | policy.forbidden]
    assert list(order[: len(listed)]) == listed
    assert set(order[len(order) - len(policy.pinned - policy.forbidden) :]) == (
        policy.pinned - policy.forbidden
    )
    for position, kind in enumerate(order):
        if plan.per_kind[kind].allocated < plan.per_kind[kind].demand:
            for earlier in order[:position]:
                assert plan.per_kind[earlier].allocated == floor_of(plan, earlier)
    if not plan.pressure:
        assert all(plan.per_kind[k].allocated == plan.per_kind[k].demand for k in SEGMENT_KINDS)
        assert not any(d.code in PRESSURE_CODES for d in plan.decisions)


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_pinned_kinds_are_cut_only_when_pinned_content_alone_cannot_fit(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    others = [k for k in SEGMENT_KINDS if k not in policy.pinned and k not in policy.forbidden]
    for kind in policy.pinned:
        if plan.per_kind[kind].allocated < plan.per_kind[kind].demand:
            assert all(plan.per_kind[k].allocated == floor_of(plan, k) for k in others)
            assert plan.pinned_overflow
    whole = all(
        d.code is DecisionCode.INCLUDED for d in plan.decisions if d.segment_kind in policy.pinned
    )
    assert plan.pinned_overflow == (not whole)
    if plan.pinned_overflow:
        assert plan.warnings


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_items_are_packed_greedily_in_rank_order(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    assert [d.id for d in plan.decisions] == [c.id for c in candidates]
    by_id = {d.id: d for d in plan.decisions}
    for kind in SEGMENT_KINDS:
        if kind in policy.forbidden:
            continue
        allocation = plan.per_kind[kind]
        taken = 0
        for candidate in kinds_of(candidates, kind):
            decision = by_id[candidate.id]
            fits = taken + candidate.tokens <= allocation.allocated
            assert (decision.code is DecisionCode.INCLUDED) == fits
            if fits:
                taken += candidate.tokens
                assert decision.tokens == candidate.tokens


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_drop_codes_name_the_cause(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    for decision in plan.decisions:
        allocation = plan.per_kind[decision.segment_kind]
        cut = allocation.allocated < allocation.demand
        if decision.code in DROP_CODES:
            assert decision.tokens == 0
            assert (decision.code in PRESSURE_CODES) == cut
        if decision.code is DecisionCode.BUDGET_FLOOR_HIT:
            assert allocation.allocated == allocation.reserved > 0
        if decision.code is DecisionCode.BUDGET_CEILING_HIT:
            raw = sum(c.tokens for c in kinds_of(candidates, decision.segment_kind))
            assert allocation.ceiling is not None and raw > allocation.ceiling


@PROPERTY_SETTINGS
@given(plan_inputs)
def test_truncated_refs_follow_the_documented_rule(inputs: tuple) -> None:
    candidates, policy, allow, ref_tokens = inputs
    plan = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    if not allow:
        assert plan.truncated_ids == []
    for kind in SEGMENT_KINDS:
        ranked = [d for d in plan.decisions if d.segment_kind == kind]
        truncated = [d for d in ranked if d.code is DecisionCode.TRUNCATED]
        dropped = [d for d in ranked if d.code in DROP_CODES]
        assert len(truncated) <= 1
        whole = sum(d.tokens for d in ranked if d.code is DecisionCode.INCLUDED)
        leftover = plan.per_kind[kind].allocated - whole
        could_truncate = allow and 0 < leftover and ref_tokens <= leftover
        if truncated:
            assert could_truncate and truncated[0].tokens == ref_tokens
            # it is the highest-ranked item the kind could not keep whole
            first_not_whole = next(d for d in ranked if d.code is not DecisionCode.INCLUDED)
            assert first_not_whole is truncated[0]
        elif dropped:
            assert not could_truncate


@PROPERTY_SETTINGS
@given(plan_inputs, st.randoms(use_true_random=False))
def test_plan_is_deterministic_and_ignores_map_order(inputs: tuple, rng: object) -> None:
    candidates, policy, allow, ref_tokens = inputs

    def shuffled(mapping: dict[str, int]) -> dict[str, int]:
        keys = list(mapping)
        rng.shuffle(keys)  # type: ignore[attr-defined]
        return {key: mapping[key] for key in keys}

    same_policy = BudgetPolicy(
        policy.total_token_budget,
        shuffled(dict(policy.per_segment_reservation)),
        shuffled(dict(policy.per_segment_ceiling)),
        list(policy.drop_order),
        frozenset(sorted(policy.forbidden, reverse=True)),
        frozenset(sorted(policy.pinned, reverse=True)),
    )
    first = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    again = plan_budget(
        candidates, policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    other = plan_budget(
        candidates, same_policy, allow_truncated_refs=allow, truncated_ref_tokens=ref_tokens
    )
    assert first == again == other
