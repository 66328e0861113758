"""A later floor and an older workload policy: the floor wins, the conflict is reported.

Pure: no database. Examples from the seed's budget shape (the default floor), and the
property of issue 10: for any floor and any workload policy valid when saved, after any later
floor change the effective policy is within the floor and honourable (the planner plans it).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import conflicts
from policies.algebra import (
    SEGMENT_KINDS,
    PolicyError,
    apply_override,
    check_workload,
    default_floor,
    effective_policy,
    floor_conflicts,
    narrow,
    narrow_settled,
    narrow_to_floor,
    normalize_document,
    normalize_floor,
    policy_hashes,
    validate_budget,
    validate_workload,
)
from policies.axes import AXES, BUDGET_AXES
from recall.planner import BudgetPolicy, Candidate, plan_budget
from tests.policies.test_algebra import floors, reshuffled, within
from tests.properties import examples

Policy = dict[str, Any]

LOTS = settings(max_examples=examples(300), deadline=None, database=None)


def later_floor(**axes: Any) -> Policy:
    """The default floor (the seed's budget) with ``axes`` changed, validated as a save would."""
    return normalize_floor({**default_floor(), **axes})[0]


def saved(floor: Policy, **axes: Any) -> Policy:
    """A workload policy as it was stored: valid against ``floor`` when saved."""
    return validate_workload(floor, axes)


def codes(found: list[conflicts.Conflict]) -> list[tuple[str, str, str | None]]:
    return [(c.code, c.axis, c.kind) for c in found]


def planned_honourably(policy: Policy) -> bool:
    """The budget planner keeps every reservation when each kind asks for exactly it."""
    budget = BudgetPolicy.from_policy(policy)
    candidates = [
        Candidate(f"c-{kind}", kind, budget.reservation(kind), 1.0)
        for kind in SEGMENT_KINDS
        if kind not in budget.forbidden
    ]
    plan = plan_budget(candidates, budget)
    floors_hold = all(
        plan.per_kind[kind].allocated >= budget.reservation(kind)
        for kind in SEGMENT_KINDS
        if kind not in budget.forbidden
    )
    return floors_hold and not plan.warnings and plan.used_tokens <= budget.total_token_budget


class FloorForbidsAPinnedKindTests:
    def test_the_kind_is_no_longer_pinned_and_the_conflict_says_so(self) -> None:
        workload = saved(default_floor(), pinned=["system_policy", "tool_result"])
        floor = later_floor(forbiddenSegmentKinds=["tool_result"])

        effective, found = narrow_settled(floor, workload)

        assert effective["pinned"] == ["system_policy"]
        assert effective["forbiddenSegmentKinds"] == ["tool_result"]
        assert found == [
            conflicts.Conflict(
                "FLOOR_FORBIDS_PINNED_KIND",
                "pinned",
                "tool_result",
                "pinned",
                "forbidden",
                "not pinned",
                "The floor forbids tool_result, which the workload policy pins: it is not pinned.",
            )
        ]
        validate_budget(effective)
        assert check_workload(floor, effective) == []

    def test_the_workload_looks_compliant_axis_by_axis_but_its_budget_as_written_is_not(
        self,
    ) -> None:
        workload = saved(default_floor(), pinned=["system_policy", "tool_result"])
        floor = later_floor(forbiddenSegmentKinds=["tool_result"])

        assert check_workload(floor, workload) == []
        with pytest.raises(PolicyError) as caught:
            validate_budget(narrow(floor, workload, as_written=True))
        assert caught.value.code == "BUDGET_NOT_HONOURABLE"


class FloorPinsAForbiddenKindTests:
    def test_the_kind_stays_pinned_and_is_no_longer_forbidden(self) -> None:
        workload = saved(default_floor(), forbiddenSegmentKinds=["tool_result"])
        floor = later_floor(pinned=["system_policy", "tool_result"])

        effective, found = narrow_settled(floor, workload)

        assert (effective["pinned"], effective["forbiddenSegmentKinds"]) == (
            ["system_policy", "tool_result"],
            [],
        )
        assert codes(found) == [
            ("FLOOR_PINS_FORBIDDEN_KIND", "forbiddenSegmentKinds", "tool_result")
        ]
        assert (found[0].workload, found[0].floor, found[0].effective) == (
            "forbidden",
            "pinned",
            "not forbidden",
        )


class WorkloadPinsAndForbidsAKindTests:
    def test_forbidden_wins_and_the_conflict_says_so(self) -> None:
        policy = {
            **default_floor(),
            "pinned": ["system_policy", "tool_result"],
            "forbiddenSegmentKinds": ["tool_result"],
        }

        found = conflicts.settle_pins(default_floor(), policy)

        assert (policy["pinned"], policy["forbiddenSegmentKinds"]) == (
            ["system_policy"],
            ["tool_result"],
        )
        assert codes(found) == [("WORKLOAD_PINS_FORBIDDEN_KIND", "pinned", "tool_result")]
        assert found[0].message == (
            "The workload policy both pins and forbids tool_result: forbidden wins."
        )


class FloorRaisesAPinnedReservationTests:
    def test_past_the_workloads_total_the_unpinned_reservations_are_cut_in_drop_order(
        self,
    ) -> None:
        # 500 + 800 + 900 + 300 = 2500 reserved of the workload's 2500.
        workload = saved(default_floor(), totalTokenBudget=2500)
        floor = later_floor(
            perSegmentReservation={
                "system_policy": 1500,
                "memory": 800,
                "retrieval": 900,
                "tool_result": 0,
            }
        )

        effective, found = narrow_settled(floor, workload)

        # dropOrder is tool_result (nothing left to cut), retrieval, memory.
        assert effective["perSegmentReservation"] == {
            "memory": 800,
            "retrieval": 200,
            "system_policy": 1500,
            "tool_result": 0,
        }
        assert effective["totalTokenBudget"] == 2500
        assert [(c.code, c.kind, c.workload, c.floor, c.effective) for c in found] == [
            ("RESERVATION_CUT_TO_FIT", "retrieval", 900, 900, 200)
        ]
        assert "3200" in found[0].message and "2500" in found[0].message
        assert planned_honourably(effective)

    def test_past_the_workloads_ceiling_the_ceiling_rises_to_the_floors_reservation(
        self,
    ) -> None:
        workload = saved(
            default_floor(),
            perSegmentCeiling={"memory": 1200, "retrieval": 1200, "system_policy": 600},
        )
        floor = later_floor(
            perSegmentReservation={"system_policy": 900, "memory": 800, "retrieval": 900}
        )

        effective, found = narrow_settled(floor, workload)

        assert effective["perSegmentCeiling"]["system_policy"] == 900
        assert effective["perSegmentReservation"]["system_policy"] == 900
        assert [(c.code, c.axis, c.kind, c.workload, c.floor, c.effective) for c in found] == [
            ("FLOOR_RESERVATION_ABOVE_CEILING", "perSegmentCeiling", "system_policy", 600, 900, 900)
        ]
        assert planned_honourably(effective)

    def test_past_what_the_workloads_total_can_hold_at_all_the_total_rises(self) -> None:
        workload = saved(
            default_floor(),
            totalTokenBudget=1000,
            perSegmentReservation={"system_policy": 500},
        )
        floor = later_floor(perSegmentReservation={"system_policy": 1500})

        effective, found = narrow_settled(floor, workload)

        assert effective["totalTokenBudget"] == 1500
        assert effective["perSegmentReservation"] == {"system_policy": 1500}
        assert codes(found) == [("FLOOR_RESERVATIONS_EXCEED_TOTAL", "totalTokenBudget", None)]
        assert (found[0].workload, found[0].floor, found[0].effective) == (1000, 1500, 1500)

    def test_a_floor_ceiling_below_the_workloads_pinned_reservation_lowers_the_reservation(
        self,
    ) -> None:
        workload = saved(
            default_floor(),
            perSegmentReservation={"system_policy": 900, "memory": 800, "retrieval": 900},
        )
        floor = later_floor(perSegmentCeiling={"memory": 1200, "retrieval": 1200,
                                               "system_policy": 700})  # fmt: skip

        effective, found = narrow_settled(floor, workload)

        assert effective["perSegmentReservation"]["system_policy"] == 700
        assert codes(found) == [
            ("RESERVATION_ABOVE_FLOOR_CEILING", "perSegmentReservation", "system_policy")
        ]


class ReservationFittingTests:
    def test_a_lower_floor_total_gives_back_the_workloads_raises_first(self) -> None:
        reservations = {"system_policy": 500, "memory": 1000, "retrieval": 900, "tool_result": 300}
        workload = saved(default_floor(), perSegmentReservation=reservations)
        # The floor's own 2500 fits 2600; the workload's 200 extra for memory does not.
        floor = later_floor(totalTokenBudget=2600)

        effective, found = narrow_settled(floor, workload)

        assert effective["perSegmentReservation"]["memory"] == 900
        assert [(c.code, c.kind, c.workload, c.floor, c.effective) for c in found] == [
            ("RESERVATION_RAISE_GIVEN_BACK", "memory", 1000, 800, 900)
        ]

    def test_the_cut_follows_the_effective_drop_order(self) -> None:
        workload = saved(default_floor(), totalTokenBudget=2500, dropOrder=["memory", "retrieval"])
        floor = later_floor(
            perSegmentReservation={"system_policy": 1000, "memory": 800, "retrieval": 900}
        )

        effective, found = narrow_settled(floor, workload)

        # 2700 reserved of 2500: memory is cut first, as the workload's dropOrder says.
        assert effective["perSegmentReservation"]["memory"] == 600
        assert effective["perSegmentReservation"]["retrieval"] == 900
        assert codes(found) == [("RESERVATION_CUT_TO_FIT", "perSegmentReservation", "memory")]


class NarrowToFloorTests:
    @pytest.mark.parametrize(
        ("workload_axes", "floor_axes"),
        [
            (
                {"pinned": ["system_policy", "tool_result"]},
                {"forbiddenSegmentKinds": ["tool_result"]},
            ),
            (
                {"totalTokenBudget": 2500},
                {"perSegmentReservation": {"system_policy": 1500, "memory": 800, "retrieval": 900}},
            ),
        ],
        ids=["forbidden-pin", "reservation-past-total"],
    )  # fmt: skip
    def test_it_gives_a_document_that_saves_and_applies_as_written(
        self, workload_axes: Policy, floor_axes: Policy
    ) -> None:
        workload = saved(default_floor(), **workload_axes)
        floor = later_floor(**floor_axes)

        document = narrow_to_floor(floor, workload)

        assert validate_workload(floor, document) == document
        assert floor_conflicts(floor, document) == []
        assert narrow(floor, document) == narrow(floor, workload)
        assert set(workload) <= set(document)

    def test_it_adds_the_reservations_a_conflict_changed_even_if_the_workload_left_them_out(
        self,
    ) -> None:
        workload = saved(default_floor(), totalTokenBudget=2500)
        floor = later_floor(perSegmentReservation={"system_policy": 1500, "memory": 800,
                                                   "retrieval": 900})  # fmt: skip

        document = narrow_to_floor(floor, workload)

        assert set(document) == {"totalTokenBudget", "perSegmentReservation"}


class OverrideOverAConflictTests:
    RELAXABLE = ["confidenceMin", "pinned", "totalTokenBudget"]

    def test_an_override_of_another_axis_is_applied_over_the_settled_policy(self) -> None:
        workload = saved(default_floor(), pinned=["system_policy", "tool_result"])
        floor = later_floor(forbiddenSegmentKinds=["tool_result"])

        result = apply_override(floor, workload, {"confidenceMin": 0.5}, self.RELAXABLE)

        assert result == {**narrow(floor, workload), "confidenceMin": 0.5}

    def test_an_override_that_itself_pins_a_forbidden_kind_is_refused(self) -> None:
        floor = later_floor(forbiddenSegmentKinds=["tool_result"])

        with pytest.raises(PolicyError) as caught:
            apply_override(floor, {}, {"pinned": ["system_policy", "tool_result"]}, self.RELAXABLE)

        assert caught.value.code == "BUDGET_NOT_HONOURABLE"
        assert "tool_result" in caught.value.details["fields"]["pinned"]

    def test_an_override_total_below_the_floors_reservations_is_refused_not_cut(self) -> None:
        with pytest.raises(PolicyError) as caught:
            apply_override(default_floor(), {}, {"totalTokenBudget": 1000}, self.RELAXABLE)

        assert caught.value.code == "BUDGET_NOT_HONOURABLE"


class ConflictShapeTests:
    def test_it_reads_in_camel_case_on_the_wire(self) -> None:
        workload = saved(default_floor(), pinned=["system_policy", "tool_result"])
        (found,) = floor_conflicts(later_floor(forbiddenSegmentKinds=["tool_result"]), workload)

        assert found.as_json() == {
            "code": "FLOOR_FORBIDS_PINNED_KIND",
            "axis": "pinned",
            "kind": "tool_result",
            "workloadValue": "pinned",
            "floorValue": "forbidden",
            "effectiveValue": "not pinned",
            "message": found.message,
        }

    def test_every_code_is_listed_with_a_summary(self) -> None:
        assert len(set(conflicts.CODES)) == len(conflicts.CODES) == 8
        assert set(conflicts.SUMMARIES) == set(conflicts.CODES)


# --- properties ----------------------------------------------------------------------------


@st.composite
def saved_workloads(draw: st.DrawFn, floor: Policy) -> Policy:
    """A workload policy valid against ``floor`` when saved: some axes of a narrower document.

    Leaving axes out lets the floor's values through (a total without the reservations that
    fit it may not be saveable); the whole narrower document always is.
    """
    full = draw(within(floor))
    names = draw(st.sets(st.sampled_from(list(AXES))))
    partial = {name: full[name] for name in AXES if name in names}
    try:
        return validate_workload(floor, partial)
    except PolicyError:
        return validate_workload(floor, full)


@st.composite
def floor_changes(draw: st.DrawFn, earlier: Policy) -> Policy:
    """Any later floor: another one, or ``earlier`` with a few budget axes changed (recall
    axes never conflict) if that is still a valid floor."""
    other = draw(floors())
    if draw(st.booleans()):
        return other
    names = draw(st.sets(st.sampled_from(BUDGET_AXES), min_size=1, max_size=3))
    try:
        return normalize_floor({**earlier, **{name: other[name] for name in names}})[0]
    except PolicyError:
        return other


class FloorChangePropertyTests:
    @LOTS
    @given(st.data())
    def test_after_any_floor_change_the_effective_policy_is_within_the_floor_and_honourable(
        self, data: st.DataObject
    ) -> None:
        earlier = data.draw(floors(), label="earlier floor")
        workload = data.draw(saved_workloads(earlier), label="workload policy")
        floor = data.draw(floor_changes(earlier), label="later floor")

        effective = effective_policy(floor, workload, None, [])

        assert normalize_document(effective, partial=False) == effective
        assert check_workload(floor, effective) == []
        validate_budget(effective)
        assert planned_honourably(effective)

    @LOTS
    @given(st.data())
    def test_narrow_to_floor_saves_and_applies_exactly_the_effective_policy(
        self, data: st.DataObject
    ) -> None:
        earlier = data.draw(floors())
        workload = data.draw(saved_workloads(earlier))
        floor = data.draw(floor_changes(earlier))

        document = narrow_to_floor(floor, workload)

        assert validate_workload(floor, document) == document
        assert floor_conflicts(floor, document) == []
        assert check_workload(floor, document) == []
        assert narrow(floor, document) == narrow(floor, workload)

    @LOTS
    @given(st.data())
    def test_there_is_a_conflict_exactly_when_the_budget_as_written_cannot_be_honoured(
        self, data: st.DataObject
    ) -> None:
        earlier = data.draw(floors())
        workload = data.draw(saved_workloads(earlier))
        floor = data.draw(floor_changes(earlier))

        try:
            validate_budget(narrow(floor, workload, as_written=True))
        except PolicyError:
            honourable_as_written = False
        else:
            honourable_as_written = True

        assert (floor_conflicts(floor, workload) == []) == honourable_as_written

    @LOTS
    @given(st.data())
    def test_a_workload_still_valid_under_the_new_floor_has_no_conflict(
        self, data: st.DataObject
    ) -> None:
        floor = data.draw(floors())
        workload = data.draw(saved_workloads(floor))

        assert floor_conflicts(floor, workload) == []
        assert narrow(floor, workload) == narrow(floor, workload, as_written=True)

    @LOTS
    @given(floors(), floors(), st.randoms(use_true_random=False))
    def test_settling_does_not_depend_on_key_or_set_order(
        self, earlier: Policy, floor: Policy, rng: random.Random
    ) -> None:
        workload = {name: earlier[name] for name in ("pinned", "totalTokenBudget")}
        policy, found = narrow_settled(floor, workload)

        again, found_again = narrow_settled(reshuffled(floor, rng), reshuffled(workload, rng))

        assert found_again == found
        assert policy_hashes(again) == policy_hashes(policy)
