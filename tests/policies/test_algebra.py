"""Tests for the plain-Python policy algebra (no Django needed)."""

from __future__ import annotations

import copy
import hashlib
import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.algebra import (
    SEGMENT_KINDS,
    SENSITIVITY_ORDER,
    VERBOSITY_ORDER,
    VOCABULARIES,
    PolicyError,
    apply_override,
    canonical_json,
    check_workload,
    default_floor,
    diff_documents,
    effective_policy,
    floor_document,
    narrow,
    narrow_settled,
    normalize_document,
    normalize_floor,
    policy_hashes,
    sha256_hex,
    validate_budget,
    validate_workload,
)
from policies.axes import AXES, BUDGET_AXES, RECALL_AXES, Axis, PolicyDocument, is_complete
from tests.properties import examples

Policy = dict[str, Any]

# No example database: tests must not leave a .hypothesis directory behind.
PROPERTY = settings(max_examples=examples(120), deadline=None, database=None)


def a_floor() -> Policy:
    """A floor with room on both sides of every axis, so narrower and wider both exist."""
    return normalize_floor(
        {
            "memoryTypeAllowed": ["fact", "preference", "decision"],
            "sourceKindAllowed": ["user", "tool"],
            "confirmationStatusAllowed": ["user_confirmed", "observed"],
            "consentPolicyAllowed": ["explicit", "implied"],
            "confidenceMin": 0.5,
            "sensitivityCeiling": "internal",
            "maxAgeSeconds": 86400,
            "similarityMin": 0.3,
            "totalTokenBudget": 3200,
            "perSegmentCeiling": {"memory": 1200, "retrieval": 1200},
            "perSegmentReservation": {
                "system_policy": 500,
                "memory": 800,
                "retrieval": 900,
                "tool_result": 300,
            },
            "forbiddenSegmentKinds": ["tool_result"],
            "pinned": ["system_policy"],
            "dropOrder": ["tool_result", "retrieval", "memory"],
            "diagnosticsVerbosity": "summary",
        }
    )[0]


def raised(func: Any, *args: Any, **kwargs: Any) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        func(*args, **kwargs)
    return info.value


def fields_of(error: PolicyError) -> dict[str, str]:
    return error.details["fields"]


# (axis, narrower, equal, wider) against a_floor().
AXIS_CASES: list[tuple[str, Any, Any, Any]] = [
    ("memoryTypeAllowed", ["fact"], ["decision", "fact", "preference"], ["episode", "fact"]),
    ("sourceKindAllowed", ["user"], ["tool", "user"], ["system", "user"]),
    ("confirmationStatusAllowed", [], ["observed", "user_confirmed"], ["inferred"]),
    ("consentPolicyAllowed", ["explicit"], ["explicit", "implied"], ["withdrawn"]),
    ("confidenceMin", 0.9, 0.5, 0.4),
    ("sensitivityCeiling", "public", "internal", "confidential"),
    ("maxAgeSeconds", 3600, 86400, None),
    ("similarityMin", 0.5, 0.3, 0.2),
    ("totalTokenBudget", 3000, 3200, 3201),
    (
        "perSegmentCeiling",
        {"memory": 1000, "retrieval": 1200, "tool_result": 100},
        {"memory": 1200, "retrieval": 1200},
        {"memory": 1300, "retrieval": 1200},
    ),
    (
        "perSegmentReservation",
        {"system_policy": 600, "memory": 100},
        {"system_policy": 500, "memory": 800, "retrieval": 900, "tool_result": 300},
        {"system_policy": 400, "memory": 800},
    ),
    ("forbiddenSegmentKinds", ["retrieval", "tool_result"], ["tool_result"], []),
    ("pinned", ["memory", "system_policy"], ["system_policy"], []),
    ("diagnosticsVerbosity", "none", "summary", "full"),
]
CASE_IDS = [case[0] for case in AXIS_CASES]


class AxisRegistryTests:
    def test_it_lists_the_axes_in_the_table_order(self) -> None:
        assert list(AXES) == [
            "memoryTypeAllowed",
            "sourceKindAllowed",
            "confirmationStatusAllowed",
            "consentPolicyAllowed",
            "confidenceMin",
            "sensitivityCeiling",
            "maxAgeSeconds",
            "similarityMin",
            "totalTokenBudget",
            "perSegmentCeiling",
            "perSegmentReservation",
            "forbiddenSegmentKinds",
            "pinned",
            "dropOrder",
            "diagnosticsVerbosity",
        ]

    def test_the_policy_document_type_has_one_key_per_axis_in_registry_order(self) -> None:
        assert list(PolicyDocument.__annotations__) == list(AXES)
        assert PolicyDocument.__required_keys__ == frozenset(AXES)

    def test_a_document_is_complete_with_every_axis_in_order_and_nothing_else(self) -> None:
        floor = default_floor()
        assert is_complete(floor)
        assert not is_complete({k: v for k, v in floor.items() if k != "pinned"})
        assert not is_complete({**floor, "relaxableAxes": []})
        assert not is_complete(dict(reversed(floor.items())))

    def test_it_splits_the_axes_into_recall_and_budget_groups(self) -> None:
        assert RECALL_AXES + BUDGET_AXES == tuple(AXES)
        assert all(AXES[name].group == "recall" for name in RECALL_AXES)
        assert all(AXES[name].group == "budget" for name in BUDGET_AXES)

    def test_every_axis_has_a_one_line_description_and_a_known_vocabulary(self) -> None:
        for axis in AXES.values():
            assert isinstance(axis, Axis)
            assert axis.description and "\n" not in axis.description
            assert axis.vocabulary is None or axis.vocabulary in VOCABULARIES

    def test_the_ordered_vocabularies_run_from_narrowest_to_widest(self) -> None:
        assert VOCABULARIES["sensitivity"] == SENSITIVITY_ORDER
        assert SENSITIVITY_ORDER == ("public", "internal", "confidential", "restricted")
        assert (
            VOCABULARIES["diagnosticsVerbosity"] == VERBOSITY_ORDER == ("none", "summary", "full")
        )


class NormalizeDocumentTests:
    def test_it_turns_sets_into_sorted_lists_of_unique_labels(self) -> None:
        doc = normalize_document({"memoryTypeAllowed": ["fact", "decision", "fact"]}, partial=True)
        assert doc == {"memoryTypeAllowed": ["decision", "fact"]}

    def test_it_keeps_the_order_of_drop_order(self) -> None:
        order = ["retrieval", "tool_result", "memory"]
        assert normalize_document({"dropOrder": order}, partial=True)["dropOrder"] == order

    def test_it_returns_confidence_as_a_float(self) -> None:
        doc = normalize_document({"confidenceMin": 1}, partial=True)
        assert doc["confidenceMin"] == 1.0 and isinstance(doc["confidenceMin"], float)

    def test_it_accepts_null_max_age_as_no_bound(self) -> None:
        assert normalize_document({"maxAgeSeconds": None}, partial=True) == {"maxAgeSeconds": None}

    def test_it_accepts_an_empty_partial_document(self) -> None:
        assert normalize_document({}, partial=True) == {}

    def test_it_does_not_mutate_its_input(self) -> None:
        doc = {"pinned": ["system_policy", "memory"], "perSegmentCeiling": {"memory": 3}}
        before = copy.deepcopy(doc)
        normalize_document(doc, partial=True)
        assert doc == before

    @pytest.mark.parametrize("doc", [None, [], "policy", 3])
    def test_it_rejects_a_document_that_is_not_an_object(self, doc: object) -> None:
        error = raised(normalize_document, doc, partial=True)
        assert error.code == "INVALID_POLICY"
        assert "document" in fields_of(error)

    def test_it_names_an_unknown_axis(self) -> None:
        error = raised(normalize_document, {"colour": "blue"}, partial=True)
        assert fields_of(error) == {"colour": "Unknown axis."}

    def test_it_treats_relaxable_axes_as_unknown_outside_a_floor(self) -> None:
        error = raised(normalize_document, {"relaxableAxes": []}, partial=True)
        assert "relaxableAxes" in fields_of(error)

    @pytest.mark.parametrize(
        ("axis", "value"),
        [
            ("confidenceMin", "0.5"),
            ("confidenceMin", True),
            ("confidenceMin", -0.01),
            ("confidenceMin", 1.01),
            ("confidenceMin", math.nan),
            ("confidenceMin", math.inf),
            ("confidenceMin", None),
            ("totalTokenBudget", True),
            ("totalTokenBudget", 0),
            ("totalTokenBudget", -100),
            ("totalTokenBudget", 100.0),
            ("totalTokenBudget", "3200"),
            ("maxAgeSeconds", True),
            ("maxAgeSeconds", 0),
            ("maxAgeSeconds", -1),
            ("maxAgeSeconds", 3600.5),
            ("similarityMin", "0.5"),
            ("similarityMin", True),
            ("similarityMin", -0.01),
            ("similarityMin", 1.01),
            ("similarityMin", math.nan),
            ("similarityMin", math.inf),
            ("perSegmentCeiling", {"memory": True}),
            ("perSegmentCeiling", {"memory": -1}),
            ("perSegmentCeiling", {"memory": 1.5}),
            ("perSegmentCeiling", {"planet": 10}),
            ("perSegmentCeiling", ["memory"]),
            ("perSegmentReservation", {"memory": False}),
            ("perSegmentReservation", {"memory": -5}),
            ("perSegmentReservation", "memory"),
            ("memoryTypeAllowed", ["fact", "rumour"]),
            ("memoryTypeAllowed", "fact"),
            ("memoryTypeAllowed", [1]),
            ("sourceKindAllowed", ["stranger"]),
            ("confirmationStatusAllowed", ["maybe"]),
            ("consentPolicyAllowed", ["coerced"]),
            ("sensitivityCeiling", "secret"),
            ("sensitivityCeiling", 2),
            ("diagnosticsVerbosity", "verbose"),
            ("forbiddenSegmentKinds", ["planet"]),
            ("pinned", "system_policy"),
            ("dropOrder", ["memory", "memory"]),
            ("dropOrder", ["planet"]),
            ("dropOrder", {"memory"}),
        ],
    )
    def test_it_rejects_a_bad_value_naming_its_axis(self, axis: str, value: object) -> None:
        error = raised(normalize_document, {axis: value}, partial=True)
        assert error.code == "INVALID_POLICY"
        assert list(fields_of(error)) == [axis]
        assert fields_of(error)[axis]

    def test_it_names_the_repeated_kind_in_drop_order(self) -> None:
        error = raised(
            normalize_document, {"dropOrder": ["memory", "retrieval", "memory"]}, partial=True
        )
        assert "memory" in fields_of(error)["dropOrder"]

    def test_it_collects_every_field_error_at_once(self) -> None:
        error = raised(
            normalize_document,
            {"confidenceMin": "high", "totalTokenBudget": True, "pinned": ["x"], "colour": 1},
            partial=True,
        )
        assert set(fields_of(error)) == {"confidenceMin", "totalTokenBudget", "pinned", "colour"}

    def test_a_full_document_requires_every_axis(self) -> None:
        doc = default_floor()
        del doc["pinned"], doc["confidenceMin"]
        error = raised(normalize_document, doc, partial=False)
        assert fields_of(error) == {
            "confidenceMin": "This axis is required.",
            "pinned": "This axis is required.",
        }

    def test_a_normalized_document_normalizes_to_itself(self) -> None:
        floor = default_floor()
        assert normalize_document(floor, partial=False) == floor


class NormalizeFloorTests:
    def test_it_splits_off_the_sorted_relaxable_axes(self) -> None:
        doc = {**default_floor(), "relaxableAxes": ["maxAgeSeconds", "confidenceMin"]}
        floor, relaxable = normalize_floor(doc)
        assert relaxable == ["confidenceMin", "maxAgeSeconds"]
        assert "relaxableAxes" not in floor and floor == default_floor()

    def test_it_treats_missing_relaxable_axes_as_none(self) -> None:
        assert normalize_floor(default_floor())[1] == []

    @pytest.mark.parametrize("relaxable", [["colour"], "confidenceMin", [3]])
    def test_it_rejects_bad_relaxable_axes(self, relaxable: object) -> None:
        error = raised(normalize_floor, {**default_floor(), "relaxableAxes": relaxable})
        assert error.code == "INVALID_POLICY"
        assert list(fields_of(error)) == ["relaxableAxes"]

    def test_it_reports_axis_and_relaxable_errors_together(self) -> None:
        doc = {**default_floor(), "relaxableAxes": ["colour"], "confidenceMin": 2}
        assert set(fields_of(raised(normalize_floor, doc))) == {"relaxableAxes", "confidenceMin"}

    def test_it_requires_every_axis_but_the_optional_similarity_floor(self) -> None:
        error = raised(normalize_floor, {"relaxableAxes": []})
        assert set(fields_of(error)) == set(AXES) - {"similarityMin"}

    def test_it_rejects_a_floor_that_is_not_an_object(self) -> None:
        assert "document" in fields_of(raised(normalize_floor, ["x"]))

    def test_it_rejects_a_floor_whose_budget_cannot_be_honoured(self) -> None:
        error = raised(normalize_floor, {**default_floor(), "totalTokenBudget": 1000})
        assert error.code == "BUDGET_NOT_HONOURABLE"


class ValidateBudgetTests:
    def test_it_accepts_the_default_floor(self) -> None:
        validate_budget(default_floor())

    def test_it_rejects_reservations_summing_past_the_total(self) -> None:
        error = raised(validate_budget, {**default_floor(), "totalTokenBudget": 2499})
        assert error.code == "BUDGET_NOT_HONOURABLE"
        assert "2500" in fields_of(error)["perSegmentReservation"]

    def test_it_accepts_reservations_summing_exactly_to_the_total(self) -> None:
        validate_budget({**default_floor(), "totalTokenBudget": 2500})

    def test_it_does_not_count_reservations_of_forbidden_kinds(self) -> None:
        policy = {
            **default_floor(),
            "totalTokenBudget": 2200,
            "forbiddenSegmentKinds": ["tool_result"],
        }
        validate_budget(policy)

    def test_it_rejects_a_reservation_above_its_kinds_ceiling(self) -> None:
        policy = {**default_floor(), "perSegmentCeiling": {"memory": 700}}
        error = raised(validate_budget, policy)
        assert "memory" in fields_of(error)["perSegmentReservation"]

    def test_it_accepts_a_reservation_equal_to_its_ceiling(self) -> None:
        validate_budget({**default_floor(), "perSegmentCeiling": {"memory": 800}})

    def test_it_rejects_a_kind_both_pinned_and_forbidden(self) -> None:
        policy = {**default_floor(), "forbiddenSegmentKinds": ["system_policy"]}
        error = raised(validate_budget, policy)
        assert "system_policy" in fields_of(error)["pinned"]
        assert "forbiddenSegmentKinds" in fields_of(error)

    def test_it_reports_every_problem_at_once(self) -> None:
        policy = {
            **default_floor(),
            "totalTokenBudget": 100,
            "perSegmentCeiling": {"memory": 10},
            "forbiddenSegmentKinds": ["system_policy"],
        }
        fields = fields_of(raised(validate_budget, policy))
        assert set(fields) == {"pinned", "forbiddenSegmentKinds", "perSegmentReservation"}
        assert "ceiling" in fields["perSegmentReservation"]
        assert "totalTokenBudget" in fields["perSegmentReservation"]


class CheckWorkloadTests:
    @pytest.mark.parametrize(("axis", "narrower", "equal", "wider"), AXIS_CASES, ids=CASE_IDS)
    def test_it_accepts_a_narrower_value(
        self, axis: str, narrower: Any, equal: Any, wider: Any
    ) -> None:
        assert check_workload(a_floor(), normalize_document({axis: narrower}, partial=True)) == []

    @pytest.mark.parametrize(("axis", "narrower", "equal", "wider"), AXIS_CASES, ids=CASE_IDS)
    def test_it_accepts_an_equal_value(
        self, axis: str, narrower: Any, equal: Any, wider: Any
    ) -> None:
        assert check_workload(a_floor(), normalize_document({axis: equal}, partial=True)) == []

    @pytest.mark.parametrize(("axis", "narrower", "equal", "wider"), AXIS_CASES, ids=CASE_IDS)
    def test_it_rejects_a_wider_value(
        self, axis: str, narrower: Any, equal: Any, wider: Any
    ) -> None:
        assert check_workload(a_floor(), normalize_document({axis: wider}, partial=True)) == [axis]

    def test_it_accepts_an_empty_workload(self) -> None:
        assert check_workload(a_floor(), {}) == []

    def test_it_lists_relaxed_axes_in_registry_order(self) -> None:
        workload = {"diagnosticsVerbosity": "full", "pinned": [], "confidenceMin": 0.0}
        assert check_workload(a_floor(), workload) == [
            "confidenceMin",
            "pinned",
            "diagnosticsVerbosity",
        ]

    @pytest.mark.parametrize(
        "order", [[], ["memory"], ["system_policy", "memory", "retrieval", "tool_result"]]
    )
    def test_drop_order_never_relaxes(self, order: list[str]) -> None:
        assert check_workload(a_floor(), {"dropOrder": order}) == []

    @pytest.mark.parametrize(("floor_value", "value"), [(0.0, 0.0), (0.0, 1.0), (1.0, 1.0)])
    def test_confidence_bounds_zero_and_one_are_within(
        self, floor_value: float, value: float
    ) -> None:
        floor = {**a_floor(), "confidenceMin": floor_value}
        assert check_workload(floor, {"confidenceMin": value}) == []

    def test_confidence_below_a_floor_of_one_relaxes(self) -> None:
        floor = {**a_floor(), "confidenceMin": 1.0}
        assert check_workload(floor, {"confidenceMin": 0.999}) == ["confidenceMin"]

    @pytest.mark.parametrize("level", SENSITIVITY_ORDER)
    def test_an_equal_sensitivity_is_within(self, level: str) -> None:
        floor = {**a_floor(), "sensitivityCeiling": level}
        assert check_workload(floor, {"sensitivityCeiling": level}) == []

    @pytest.mark.parametrize("value", [None, 1, 10**9])
    def test_an_unbounded_max_age_floor_accepts_anything(self, value: int | None) -> None:
        floor = {**a_floor(), "maxAgeSeconds": None}
        assert check_workload(floor, {"maxAgeSeconds": value}) == []

    def test_a_max_age_one_second_past_the_floor_relaxes(self) -> None:
        assert check_workload(a_floor(), {"maxAgeSeconds": 86401}) == ["maxAgeSeconds"]

    def test_a_ceiling_missing_on_the_floor_may_be_set_to_anything(self) -> None:
        caps = {"memory": 1200, "retrieval": 1200, "system_policy": 10**6}
        assert check_workload(a_floor(), {"perSegmentCeiling": caps}) == []

    def test_removing_a_ceiling_the_floor_has_relaxes(self) -> None:
        workload = {"perSegmentCeiling": {"retrieval": 1200}}
        assert check_workload(a_floor(), workload) == ["perSegmentCeiling"]

    def test_a_pinned_kind_may_reserve_more_but_not_less(self) -> None:
        floor = a_floor()
        assert check_workload(floor, {"perSegmentReservation": {"system_policy": 501}}) == []
        relaxed = check_workload(floor, {"perSegmentReservation": {"system_policy": 499}})
        assert relaxed == ["perSegmentReservation"]

    def test_leaving_out_a_pinned_kinds_reservation_relaxes(self) -> None:
        workload = {"perSegmentReservation": {"memory": 800}}
        assert check_workload(a_floor(), workload) == ["perSegmentReservation"]

    def test_a_non_pinned_kind_may_reserve_anything_up_to_the_floor_ceiling(self) -> None:
        floor = a_floor()
        for memory in (0, 1, 1200):
            reservations = {"system_policy": 500, "memory": memory}
            assert check_workload(floor, {"perSegmentReservation": reservations}) == []
        reservations = {"system_policy": 500, "memory": 1201}
        assert check_workload(floor, {"perSegmentReservation": reservations}) == [
            "perSegmentReservation"
        ]

    def test_a_non_pinned_kind_without_any_ceiling_may_reserve_more_than_the_floor(self) -> None:
        reservations = {"system_policy": 500, "tool_result": 5000}
        assert check_workload(a_floor(), {"perSegmentReservation": reservations}) == []

    def test_a_non_pinned_reservation_must_fit_the_workloads_own_ceiling(self) -> None:
        workload = {
            "perSegmentCeiling": {"memory": 500, "retrieval": 1200},
            "perSegmentReservation": {"system_policy": 500, "memory": 600},
        }
        assert check_workload(a_floor(), workload) == ["perSegmentReservation"]

    def test_a_kind_pinned_only_by_the_workload_may_reserve_less_than_the_floor(self) -> None:
        workload = {
            "pinned": ["memory", "system_policy"],
            "perSegmentReservation": {"system_policy": 500, "memory": 100},
        }
        assert check_workload(a_floor(), workload) == []


class ValidateWorkloadTests:
    def test_it_returns_the_normalized_workload_when_it_narrows(self) -> None:
        workload = validate_workload(a_floor(), {"pinned": ["system_policy", "memory", "memory"]})
        assert workload == {"pinned": ["memory", "system_policy"]}

    def test_it_rejects_a_workload_that_relaxes_the_floor(self) -> None:
        error = raised(
            validate_workload,
            a_floor(),
            {"sensitivityCeiling": "restricted", "totalTokenBudget": 5000, "pinned": ["memory"]},
        )
        assert error.code == "WORKLOAD_RELAXES_OPERATOR_FLOOR"
        assert error.details["axes"] == ["sensitivityCeiling", "totalTokenBudget", "pinned"]
        assert error.details["floor"] == {
            "sensitivityCeiling": "internal",
            "totalTokenBudget": 3200,
            "pinned": ["system_policy"],
        }

    def test_it_rejects_a_malformed_workload(self) -> None:
        error = raised(validate_workload, a_floor(), {"confidenceMin": "high"})
        assert error.code == "INVALID_POLICY"

    def test_it_rejects_a_narrowing_whose_budget_cannot_be_honoured(self) -> None:
        error = raised(validate_workload, a_floor(), {"totalTokenBudget": 1000})
        assert error.code == "BUDGET_NOT_HONOURABLE"


class NarrowTests:
    def test_it_returns_the_floor_for_an_empty_workload(self) -> None:
        floor = a_floor()
        assert narrow(floor, {}) == floor

    def test_it_returns_a_full_document_in_registry_order(self) -> None:
        assert list(narrow(a_floor(), {"pinned": ["memory"]})) == list(AXES)

    def test_it_does_not_share_or_mutate_its_inputs(self) -> None:
        floor, workload = a_floor(), {"perSegmentCeiling": {"memory": 10}}
        before = copy.deepcopy((floor, workload))
        result = narrow(floor, workload)
        result["memoryTypeAllowed"].append("entity")
        result["perSegmentCeiling"]["memory"] = 0
        assert (floor, workload) == before

    def test_it_intersects_sets_so_a_wider_set_is_clamped(self) -> None:
        result = narrow(a_floor(), {"memoryTypeAllowed": ["episode", "fact"]})
        assert result["memoryTypeAllowed"] == ["fact"]

    def test_it_keeps_the_higher_confidence(self) -> None:
        assert narrow(a_floor(), {"confidenceMin": 0.2})["confidenceMin"] == 0.5
        assert narrow(a_floor(), {"confidenceMin": 0.7})["confidenceMin"] == 0.7

    def test_it_keeps_the_lower_sensitivity_and_verbosity(self) -> None:
        wider = narrow(
            a_floor(), {"sensitivityCeiling": "restricted", "diagnosticsVerbosity": "full"}
        )
        assert (wider["sensitivityCeiling"], wider["diagnosticsVerbosity"]) == (
            "internal",
            "summary",
        )
        tighter = narrow(
            a_floor(), {"sensitivityCeiling": "public", "diagnosticsVerbosity": "none"}
        )
        assert (tighter["sensitivityCeiling"], tighter["diagnosticsVerbosity"]) == (
            "public",
            "none",
        )

    def test_it_keeps_the_smaller_non_null_max_age(self) -> None:
        assert narrow(a_floor(), {"maxAgeSeconds": None})["maxAgeSeconds"] == 86400
        assert narrow(a_floor(), {"maxAgeSeconds": 60})["maxAgeSeconds"] == 60
        unbounded = {**a_floor(), "maxAgeSeconds": None}
        assert narrow(unbounded, {"maxAgeSeconds": 60})["maxAgeSeconds"] == 60
        assert narrow(unbounded, {"maxAgeSeconds": None})["maxAgeSeconds"] is None

    def test_it_keeps_the_smaller_total(self) -> None:
        assert narrow(a_floor(), {"totalTokenBudget": 9000})["totalTokenBudget"] == 3200
        assert narrow(a_floor(), {"totalTokenBudget": 2500})["totalTokenBudget"] == 2500

    def test_it_takes_per_kind_minimum_ceilings_and_keeps_the_floor_caps(self) -> None:
        result = narrow(a_floor(), {"perSegmentCeiling": {"memory": 1500, "tool_result": 50}})
        assert result["perSegmentCeiling"] == {"memory": 1200, "retrieval": 1200, "tool_result": 50}

    def test_it_unions_forbidden_and_pinned_kinds(self) -> None:
        result = narrow(a_floor(), {"forbiddenSegmentKinds": ["retrieval"], "pinned": ["memory"]})
        assert result["forbiddenSegmentKinds"] == ["retrieval", "tool_result"]
        assert result["pinned"] == ["memory", "system_policy"]

    def test_it_takes_the_workloads_drop_order(self) -> None:
        assert narrow(a_floor(), {"dropOrder": ["memory"]})["dropOrder"] == ["memory"]

    def test_it_never_lowers_a_pinned_reservation_below_the_floor(self) -> None:
        result = narrow(a_floor(), {"perSegmentReservation": {"system_policy": 100, "memory": 50}})
        assert result["perSegmentReservation"] == {"system_policy": 500, "memory": 50}

    def test_it_clamps_non_pinned_reservations_to_the_effective_ceiling(self) -> None:
        result = narrow(a_floor(), {"perSegmentCeiling": {"memory": 300}})
        assert result["perSegmentReservation"]["memory"] == 300
        result = narrow(
            a_floor(), {"perSegmentReservation": {"system_policy": 500, "memory": 5000}}
        )
        assert result["perSegmentReservation"]["memory"] == 1200

    def test_it_clamps_a_stale_workload_after_the_floor_was_narrowed(self) -> None:
        workload = {"confidenceMin": 0.6, "sensitivityCeiling": "internal", "maxAgeSeconds": 86400}
        floor = a_floor()
        assert check_workload(floor, workload) == []
        later = {**floor, "confidenceMin": 0.8, "sensitivityCeiling": "public", "maxAgeSeconds": 60}
        result = narrow(later, workload)
        assert (result["confidenceMin"], result["sensitivityCeiling"], result["maxAgeSeconds"]) == (
            0.8,
            "public",
            60,
        )
        assert check_workload(later, result) == []


class ApplyOverrideTests:
    RELAXABLE = ["confidenceMin", "maxAgeSeconds", "memoryTypeAllowed"]

    def test_it_applies_an_allowed_override(self) -> None:
        result = apply_override(a_floor(), {}, {"confidenceMin": 0.75}, self.RELAXABLE)
        assert result["confidenceMin"] == 0.75

    def test_an_override_may_be_wider_than_the_workload_but_within_the_floor(self) -> None:
        workload = {"confidenceMin": 0.9, "memoryTypeAllowed": ["fact"]}
        override = {"confidenceMin": 0.5, "memoryTypeAllowed": ["fact", "decision"]}
        result = apply_override(a_floor(), workload, override, self.RELAXABLE)
        assert result["confidenceMin"] == 0.5
        assert result["memoryTypeAllowed"] == ["decision", "fact"]

    def test_it_keeps_workload_axes_the_override_does_not_touch(self) -> None:
        workload = {"sensitivityCeiling": "public"}
        result = apply_override(a_floor(), workload, {"maxAgeSeconds": 60}, self.RELAXABLE)
        assert (result["sensitivityCeiling"], result["maxAgeSeconds"]) == ("public", 60)

    def test_it_rejects_axes_that_are_not_relaxable(self) -> None:
        override = {"totalTokenBudget": 100, "confidenceMin": 0.9, "sensitivityCeiling": "public"}
        error = raised(apply_override, a_floor(), {}, override, self.RELAXABLE)
        assert error.code == "USER_OVERRIDE_NOT_PERMITTED"
        assert error.details == {"axes": ["sensitivityCeiling", "totalTokenBudget"]}

    def test_it_rejects_an_override_past_the_floor(self) -> None:
        override = {"confidenceMin": 0.1, "maxAgeSeconds": None, "memoryTypeAllowed": ["fact"]}
        error = raised(apply_override, a_floor(), {}, override, self.RELAXABLE)
        assert error.code == "USER_OVERRIDE_NOT_PERMITTED"
        assert error.details == {"axes": ["confidenceMin", "maxAgeSeconds"]}

    def test_it_rejects_a_malformed_override(self) -> None:
        error = raised(apply_override, a_floor(), {}, {"confidenceMin": "low"}, self.RELAXABLE)
        assert error.code == "INVALID_POLICY"
        assert "confidenceMin" in fields_of(error)

    def test_it_rejects_an_override_whose_budget_cannot_be_honoured(self) -> None:
        error = raised(
            apply_override, a_floor(), {}, {"totalTokenBudget": 1000}, ["totalTokenBudget"]
        )
        assert error.code == "BUDGET_NOT_HONOURABLE"

    def test_a_reservation_override_is_judged_against_the_workloads_ceiling(self) -> None:
        workload = {"perSegmentCeiling": {"memory": 300, "retrieval": 1200}}
        override = {"perSegmentReservation": {"system_policy": 500, "memory": 400}}
        error = raised(apply_override, a_floor(), workload, override, ["perSegmentReservation"])
        assert error.details == {"axes": ["perSegmentReservation"]}

    def test_an_override_whose_reservations_overcommit_is_refused_not_fitted(self) -> None:
        # Each kind within its ceiling (system_policy has none), 3400 in all past the 3200.
        reservations = {"memory": 1200, "retrieval": 1200, "system_policy": 1000}
        error = raised(
            apply_override, a_floor(), {}, {"perSegmentReservation": reservations},
            ["perSegmentReservation"],
        )  # fmt: skip
        assert error.code == "BUDGET_NOT_HONOURABLE"
        assert "3400" in fields_of(error)["perSegmentReservation"]

    def test_a_lower_total_still_fits_the_workloads_older_reservations(self) -> None:
        """What the override did not write is fitted, as on any read (see narrow)."""
        floor = a_floor()
        workload = {"perSegmentReservation": {**floor["perSegmentReservation"], "memory": 1000}}
        # 2200: what the floor's counted reservations take (tool_result is forbidden).
        result = apply_override(floor, workload, {"totalTokenBudget": 2200}, ["totalTokenBudget"])
        assert result["perSegmentReservation"] == floor["perSegmentReservation"]


class EffectivePolicyTests:
    def test_without_workload_or_override_it_is_the_floor(self) -> None:
        assert effective_policy(a_floor(), None, None, []) == a_floor()

    def test_an_empty_override_changes_nothing(self) -> None:
        workload = {"confidenceMin": 0.8}
        assert effective_policy(a_floor(), workload, {}, []) == narrow(a_floor(), workload)

    def test_it_applies_the_workload_then_the_override(self) -> None:
        result = effective_policy(
            a_floor(),
            {"confidenceMin": 0.8, "pinned": ["memory"]},
            {"confidenceMin": 0.6},
            ["confidenceMin"],
        )
        assert result["confidenceMin"] == 0.6
        assert result["pinned"] == ["memory", "system_policy"]

    def test_without_an_override_the_floor_wins_a_budget_conflict_instead_of_failing(self) -> None:
        # The floor pins system_policy; a workload forbidding it could only be an older one.
        result = effective_policy(a_floor(), {"forbiddenSegmentKinds": ["system_policy"]}, None, [])
        assert result["pinned"] == ["system_policy"]
        assert result["forbiddenSegmentKinds"] == ["tool_result"]
        validate_budget(result)


class CanonicalFormTests:
    def test_it_sorts_keys_and_drops_whitespace(self) -> None:
        assert canonical_json({"b": 1, "a": [2, 1], "c": {"y": None, "x": True}}) == (
            '{"a":[2,1],"b":1,"c":{"x":true,"y":null}}'
        )

    def test_it_writes_unicode_as_is(self) -> None:
        assert canonical_json({"name": "Zoë"}) == '{"name":"Zoë"}'

    def test_it_sorts_python_sets(self) -> None:
        assert canonical_json({"s": {"b", "a"}}) == '{"s":["a","b"]}'

    def test_it_refuses_nan(self) -> None:
        with pytest.raises(ValueError):
            canonical_json({"x": math.nan})

    def test_sha256_hex_hashes_the_canonical_utf8_text(self) -> None:
        expected = hashlib.sha256('{"a":"é","b":1}'.encode()).hexdigest()
        assert sha256_hex({"b": 1, "a": "é"}) == expected

    def test_policy_hashes_cover_recall_and_budget_separately(self) -> None:
        floor = a_floor()
        recall_hash, budget_hash = policy_hashes(floor)
        assert recall_hash == sha256_hex({name: floor[name] for name in RECALL_AXES})
        assert budget_hash == sha256_hex({name: floor[name] for name in BUDGET_AXES})
        recall_changed = policy_hashes({**floor, "confidenceMin": 0.9})
        assert recall_changed[0] != recall_hash and recall_changed[1] == budget_hash
        budget_changed = policy_hashes({**floor, "totalTokenBudget": 3000})
        assert budget_changed[0] == recall_hash and budget_changed[1] != budget_hash

    def test_set_order_does_not_change_the_hash_but_drop_order_does(self) -> None:
        floor = a_floor()
        shuffled = {**floor, "memoryTypeAllowed": ["preference", "fact", "decision"]}
        assert policy_hashes(shuffled) == policy_hashes(floor)
        reordered = {**floor, "dropOrder": list(reversed(floor["dropOrder"]))}
        assert policy_hashes(reordered)[1] != policy_hashes(floor)[1]

    def test_an_integral_confidence_hashes_like_its_float(self) -> None:
        floor = {**a_floor(), "confidenceMin": 1.0}
        assert policy_hashes({**floor, "confidenceMin": 1}) == policy_hashes(floor)


class DiffDocumentsTests:
    def test_a_first_version_lists_every_key_as_new(self) -> None:
        floor = a_floor()
        diff = diff_documents(None, floor)
        assert list(diff) == list(AXES)
        assert diff["maxAgeSeconds"] == {"before": None, "after": 86400}

    def test_it_lists_only_changed_axes(self) -> None:
        before = a_floor()
        after = {**before, "confidenceMin": 0.7, "maxAgeSeconds": None}
        assert diff_documents(before, after) == {
            "confidenceMin": {"before": 0.5, "after": 0.7},
            "maxAgeSeconds": {"before": 86400, "after": None},
        }

    def test_it_ignores_set_order_but_not_drop_order(self) -> None:
        before = a_floor()
        after = {
            **before,
            "pinned": list(reversed(before["pinned"] + ["memory"]))[::-1],
            "sourceKindAllowed": ["user", "tool"],
            "dropOrder": ["memory", "retrieval", "tool_result"],
        }
        assert list(diff_documents(before, after)) == ["pinned", "dropOrder"]

    def test_it_reports_added_and_removed_axes_and_relaxable_axes(self) -> None:
        before = {"confidenceMin": 0.5, "relaxableAxes": []}
        after = {"maxAgeSeconds": None, "relaxableAxes": ["maxAgeSeconds"]}
        assert diff_documents(before, after) == {
            "confidenceMin": {"before": 0.5, "after": None},
            "maxAgeSeconds": {"before": None, "after": None},
            "relaxableAxes": {"before": [], "after": ["maxAgeSeconds"]},
        }


class DefaultFloorTests:
    def test_it_is_a_valid_full_floor(self) -> None:
        floor, relaxable = normalize_floor(default_floor())
        assert floor == default_floor() and relaxable == []

    def test_it_allows_every_consent_basis_except_withdrawn(self) -> None:
        consent = default_floor()["consentPolicyAllowed"]
        assert "withdrawn" not in consent
        assert set(consent) == set(VOCABULARIES["consentPolicy"]) - {"withdrawn"}

    def test_it_carries_the_seed_budget(self) -> None:
        floor = default_floor()
        assert floor["totalTokenBudget"] == 3200
        assert sum(floor["perSegmentReservation"].values()) == 2500
        assert floor["pinned"] == ["system_policy"]
        assert floor["dropOrder"] == ["tool_result", "retrieval", "memory"]
        assert (floor["sensitivityCeiling"], floor["diagnosticsVerbosity"]) == (
            "confidential",
            "summary",
        )

    def test_it_returns_a_fresh_copy_each_time(self) -> None:
        default_floor()["pinned"].append("memory")
        assert default_floor()["pinned"] == ["system_policy"]


# --- strategies ----------------------------------------------------------------------------------


def labels(vocabulary: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(VOCABULARIES[vocabulary]), unique=True).map(sorted)


def subset(values: list[str]) -> st.SearchStrategy[list[str]]:
    # Works for an empty list too, where sampled_from would not.
    size = len(values)
    masks = st.lists(st.booleans(), min_size=size, max_size=size)
    return masks.map(lambda mask: [v for v, keep in zip(values, mask, strict=True) if keep])


TOKENS = st.integers(0, 3000)
KIND_MAPS = st.dictionaries(st.sampled_from(SEGMENT_KINDS), TOKENS)
DROP_ORDERS = st.lists(st.sampled_from(SEGMENT_KINDS), unique=True)
AGES = st.none() | st.integers(1, 10**7)
SIMILARITIES = st.none() | st.floats(0.0, 1.0)

# Any valid value of each axis, narrower or wider than whatever floor it meets.
ANY_VALUE: dict[str, st.SearchStrategy[Any]] = {
    "memoryTypeAllowed": labels("memoryType"),
    "sourceKindAllowed": labels("sourceKind"),
    "confirmationStatusAllowed": labels("confirmationStatus"),
    "consentPolicyAllowed": labels("consentPolicy"),
    "confidenceMin": st.floats(0.0, 1.0),
    "sensitivityCeiling": st.sampled_from(SENSITIVITY_ORDER),
    "maxAgeSeconds": AGES,
    "similarityMin": SIMILARITIES,
    "totalTokenBudget": st.integers(1, 10000),
    "perSegmentCeiling": KIND_MAPS,
    "perSegmentReservation": KIND_MAPS,
    "forbiddenSegmentKinds": labels("segmentKind"),
    "pinned": labels("segmentKind"),
    "dropOrder": DROP_ORDERS,
    "diagnosticsVerbosity": st.sampled_from(VERBOSITY_ORDER),
}
workloads = st.fixed_dictionaries({}, optional=ANY_VALUE)


@st.composite
def budgets(draw: st.DrawFn) -> Policy:
    """Budget axes that can always be honoured."""
    pinned = draw(labels("segmentKind"))
    forbidden = draw(subset([k for k in SEGMENT_KINDS if k not in pinned]))
    ceilings = draw(KIND_MAPS)
    reservations = {
        kind: draw(st.integers(0, ceilings.get(kind, 2000)))
        for kind in draw(subset(list(SEGMENT_KINDS)))
    }
    counted = sum(v for k, v in reservations.items() if k not in forbidden)
    return {
        "totalTokenBudget": max(1, counted + draw(st.integers(0, 2000))),
        "perSegmentCeiling": ceilings,
        "perSegmentReservation": reservations,
        "forbiddenSegmentKinds": forbidden,
        "pinned": pinned,
        "dropOrder": draw(DROP_ORDERS),
        "diagnosticsVerbosity": draw(st.sampled_from(VERBOSITY_ORDER)),
    }


@st.composite
def floors(draw: st.DrawFn) -> Policy:
    recall = {name: draw(ANY_VALUE[name]) for name in RECALL_AXES}
    return normalize_floor({**recall, **draw(budgets())})[0]


@st.composite
def within(draw: st.DrawFn, outer: Policy) -> Policy:
    """A full, honourable document that is narrower than or equal to ``outer``."""
    sensitivity = SENSITIVITY_ORDER.index(outer["sensitivityCeiling"])
    verbosity = VERBOSITY_ORDER.index(outer["diagnosticsVerbosity"])
    age = outer["maxAgeSeconds"]
    doc: Policy = {
        name: draw(subset(outer[name])) for name in RECALL_AXES if AXES[name].kind == "set"
    }
    doc["confidenceMin"] = draw(st.floats(outer["confidenceMin"], 1.0))
    doc["sensitivityCeiling"] = draw(st.sampled_from(SENSITIVITY_ORDER[: sensitivity + 1]))
    doc["maxAgeSeconds"] = draw(AGES if age is None else st.integers(1, age))
    similarity = outer["similarityMin"]
    doc["similarityMin"] = draw(SIMILARITIES if similarity is None else st.floats(similarity, 1.0))
    doc["diagnosticsVerbosity"] = draw(st.sampled_from(VERBOSITY_ORDER[: verbosity + 1]))
    doc["dropOrder"] = draw(DROP_ORDERS)
    doc.update(draw(narrower_budget(outer)))
    return normalize_document(doc, partial=False)


@st.composite
def narrower_budget(draw: st.DrawFn, outer: Policy) -> Policy:
    outer_pinned, outer_forbidden = set(outer["pinned"]), set(outer["forbiddenSegmentKinds"])
    outer_caps, outer_reserved = outer["perSegmentCeiling"], outer["perSegmentReservation"]
    pinned = outer_pinned | set(
        draw(subset([k for k in SEGMENT_KINDS if k not in outer_forbidden]))
    )
    forbidden = outer_forbidden | set(draw(subset([k for k in SEGMENT_KINDS if k not in pinned])))
    caps: dict[str, int] = {}
    reserved: dict[str, int] = {}
    for kind in SEGMENT_KINDS:
        # A cap below a floor-pinned reservation could never be honoured.
        lowest = outer_reserved.get(kind, 0) if kind in outer_pinned else 0
        if kind in outer_caps:
            caps[kind] = draw(st.integers(lowest, outer_caps[kind]))
        elif draw(st.booleans()):
            caps[kind] = draw(st.integers(lowest, 3000))
        if kind in outer_pinned:
            reserved[kind] = draw(st.integers(lowest, caps.get(kind, lowest + 500)))
        elif draw(st.booleans()):
            reserved[kind] = draw(st.integers(0, caps.get(kind, 2000)))
    counted = sum(v for k, v in reserved.items() if k not in forbidden)
    if counted > outer["totalTokenBudget"]:
        # Fall back to exactly what the outer document pins, which it could already afford.
        reserved = {k: v for k, v in outer_reserved.items() if k in outer_pinned}
        counted = sum(reserved.values())
    return {
        "totalTokenBudget": draw(st.integers(max(1, counted), outer["totalTokenBudget"])),
        "perSegmentCeiling": caps,
        "perSegmentReservation": reserved,
        "forbiddenSegmentKinds": sorted(forbidden),
        "pinned": sorted(pinned),
    }


def reshuffled(policy: Policy, rng: random.Random) -> Policy:
    """The same policy with its keys and set labels in another order."""
    items = list(policy.items())
    rng.shuffle(items)
    result: Policy = {}
    for name, value in items:
        if AXES[name].kind in ("set", "superset"):
            value = rng.sample(value, len(value))
        elif isinstance(value, dict):
            value = dict(rng.sample(list(value.items()), len(value)))
        result[name] = value
    return result


def narrow_reservations_unfitted(floor: Policy, workload: Policy) -> dict[str, int]:
    return narrow(floor, workload, as_written=True)["perSegmentReservation"]


class AlgebraPropertyTests:
    @PROPERTY
    @given(floors(), workloads)
    def test_the_effective_policy_is_always_within_the_floor(
        self, floor: Policy, workload: Policy
    ) -> None:
        effective = narrow(floor, workload)
        assert check_workload(floor, effective) == []
        assert normalize_document(effective, partial=False) == effective

    @PROPERTY
    @given(floors())
    def test_narrowing_is_reflexive(self, floor: Policy) -> None:
        assert check_workload(floor, floor) == []

    @PROPERTY
    @given(st.data())
    def test_narrowing_is_transitive(self, data: st.DataObject) -> None:
        a = data.draw(floors())
        b = data.draw(within(a))
        c = data.draw(within(b))
        validate_budget(b)
        validate_budget(c)
        assert check_workload(a, b) == []
        assert check_workload(b, c) == []
        assert check_workload(a, c) == []

    @PROPERTY
    @given(floors())
    def test_a_workload_equal_to_the_floor_is_accepted(self, floor: Policy) -> None:
        assert validate_workload(floor, floor) == floor
        assert narrow(floor, floor) == floor

    @PROPERTY
    @given(floors())
    def test_an_empty_workload_leaves_the_floor_unchanged(self, floor: Policy) -> None:
        assert narrow(floor, {}) == floor

    @PROPERTY
    @given(floors(), st.randoms(use_true_random=False))
    def test_hashes_do_not_depend_on_key_or_set_order(
        self, floor: Policy, rng: random.Random
    ) -> None:
        assert policy_hashes(reshuffled(floor, rng)) == policy_hashes(floor)

    @PROPERTY
    @given(floors(), workloads)
    def test_an_axis_that_does_not_relax_the_floor_survives_narrowing_unchanged(
        self, floor: Policy, workload: Policy
    ) -> None:
        # Clamping only ever touches the axes check_workload reports and the axes a reported
        # conflict names (where the floor wins over axes that fit it one by one).
        effective, found = narrow_settled(floor, workload)
        kept = set(workload) - set(check_workload(floor, workload))
        kept -= {conflict.axis for conflict in found}
        if effective["perSegmentReservation"] != narrow_reservations_unfitted(floor, workload):
            assert "perSegmentReservation" not in kept
        for name in kept:
            assert canonical_json(effective[name]) == canonical_json(workload[name])


class BoundsTests:
    def test_a_max_age_past_a_century_is_refused(self):
        with pytest.raises(PolicyError) as caught:
            normalize_document({"maxAgeSeconds": 10**11}, partial=True)
        assert "maxAgeSeconds" in caught.value.details["fields"]

    def test_token_counts_past_a_billion_are_refused(self):
        for doc in ({"totalTokenBudget": 10**12}, {"perSegmentCeiling": {"memory": 10**12}}):
            with pytest.raises(PolicyError) as caught:
                normalize_document(doc, partial=True)
            assert set(caught.value.details["fields"]) == set(doc)


# --- the similarity floor (an optional axis) -------------------------------------------------


def without_similarity(policy: Policy) -> Policy:
    """The policy as stored before ``similarityMin`` existed: the key left out."""
    return {name: value for name, value in policy.items() if name != "similarityMin"}


class SimilarityFloorTests:
    def test_a_floor_that_leaves_it_out_has_no_similarity_floor(self) -> None:
        floor, _ = normalize_floor(without_similarity(default_floor()))
        assert floor["similarityMin"] is None
        assert list(floor) == list(AXES)

    def test_null_and_numbers_from_zero_to_one_are_values(self) -> None:
        for value in (None, 0, 0.35, 1):
            doc = normalize_document({"similarityMin": value}, partial=True)
            assert doc == {"similarityMin": None if value is None else float(value)}

    def test_a_stored_floor_without_it_narrows_as_a_floor_at_null(self) -> None:
        stored = without_similarity(a_floor())
        assert narrow(stored, {})["similarityMin"] is None
        assert narrow(stored, {"similarityMin": 0.4})["similarityMin"] == 0.4
        assert check_workload(stored, {"similarityMin": None}) == []

    def test_narrowing_raises_it_and_null_is_the_widest(self) -> None:
        assert narrow(a_floor(), {"similarityMin": 0.5})["similarityMin"] == 0.5
        assert narrow(a_floor(), {"similarityMin": 0.1})["similarityMin"] == 0.3
        assert narrow(a_floor(), {"similarityMin": None})["similarityMin"] == 0.3
        assert check_workload(a_floor(), {"similarityMin": None}) == ["similarityMin"]

    def test_a_relaxable_override_may_lower_the_workloads_floor_down_to_the_operators(
        self,
    ) -> None:
        workload = {"similarityMin": 0.6}
        result = apply_override(a_floor(), workload, {"similarityMin": 0.3}, ["similarityMin"])
        assert result["similarityMin"] == 0.3
        for past in (0.29, None):
            error = raised(apply_override, a_floor(), workload, {"similarityMin": past}, [])
            assert error.details == {"axes": ["similarityMin"]}
            error = raised(
                apply_override, a_floor(), workload, {"similarityMin": past}, ["similarityMin"]
            )
            assert (error.code, error.details) == (
                "USER_OVERRIDE_NOT_PERMITTED",
                {"axes": ["similarityMin"]},
            )

    def test_a_later_floor_above_the_workloads_value_wins_with_no_conflict(self) -> None:
        workload = validate_workload(a_floor(), {"similarityMin": 0.4})
        later = {**a_floor(), "similarityMin": 0.6}
        effective, found = narrow_settled(later, workload)
        assert effective["similarityMin"] == 0.6
        assert check_workload(later, workload) == ["similarityMin"]
        assert found == []  # one axis clamped: reported as relaxing, not as a conflict

    def test_without_a_floor_every_policy_hashes_as_before_the_axis_existed(self) -> None:
        floor = default_floor()
        assert policy_hashes(floor) == policy_hashes(without_similarity(floor))
        assert policy_hashes(floor)[0] == (
            "7915d201704135ec2d86db8a26e83d17dfd43c15c5995505f422fb1ef1f4d187"
        )
        with_floor = policy_hashes({**floor, "similarityMin": 0.35})
        assert with_floor[0] != policy_hashes(floor)[0]
        assert with_floor[1] == policy_hashes(floor)[1]

    def test_a_floor_saved_before_the_axis_existed_diffs_as_one_at_null(self) -> None:
        old = floor_document(without_similarity(default_floor()), [])
        assert old["similarityMin"] is None
        assert diff_documents(old, floor_document(default_floor(), [])) == {}
        raised_floor = floor_document({**default_floor(), "similarityMin": 0.3}, [])
        assert diff_documents(old, raised_floor) == {
            "similarityMin": {"before": None, "after": 0.3}
        }

    def test_in_a_workload_null_is_no_floor_not_inherit(self) -> None:
        assert diff_documents({}, {"similarityMin": None}) == {
            "similarityMin": {"before": None, "after": None}
        }


def bound(value: float | None) -> float:
    return -math.inf if value is None else value


class SimilarityFloorPropertyTests:
    @PROPERTY
    @given(floors(), SIMILARITIES)
    def test_the_effective_floor_is_the_highest_of_the_floors_and_the_workloads(
        self, floor: Policy, value: float | None
    ) -> None:
        effective = narrow(floor, {"similarityMin": value})["similarityMin"]
        bounds = [v for v in (floor["similarityMin"], value) if v is not None]
        assert effective == (max(bounds) if bounds else None)
        relaxes = bound(value) < bound(floor["similarityMin"])
        assert check_workload(floor, {"similarityMin": value}) == (
            ["similarityMin"] if relaxes else []
        )

    @PROPERTY
    @given(floors(), SIMILARITIES, SIMILARITIES)
    def test_a_relaxable_override_replaces_the_workloads_value_within_the_floor_only(
        self, floor: Policy, workload_value: float | None, override: float | None
    ) -> None:
        workload = {"similarityMin": workload_value}
        if bound(override) < bound(floor["similarityMin"]):
            error = raised(
                apply_override, floor, workload, {"similarityMin": override}, ["similarityMin"]
            )
            assert error.details == {"axes": ["similarityMin"]}
        else:
            result = apply_override(floor, workload, {"similarityMin": override}, ["similarityMin"])
            assert result["similarityMin"] == override
            assert check_workload(floor, result) == []

    @PROPERTY
    @given(floors(), floors(), SIMILARITIES)
    def test_after_a_floor_change_the_floor_wins_and_no_budget_conflict_comes_of_it(
        self, earlier: Policy, later: Policy, value: float | None
    ) -> None:
        if bound(value) < bound(earlier["similarityMin"]):
            value = earlier["similarityMin"]
        workload = {"similarityMin": value}
        effective, found = narrow_settled(later, workload)
        assert bound(effective["similarityMin"]) >= bound(later["similarityMin"])
        assert found == []
