"""The sandbox's decisions grouped by outcome (``recall.page_selectors.decision_groups``):
pure, from an envelope's diagnostics, the policy it ran under and the filtered rows' values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from policies.algebra import default_floor
from recall.page_selectors import FILTER_AXES, decision_groups, failed_value

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
POLICY = {**default_floor(), "confidenceMin": 0.5, "maxAgeSeconds": 30 * 86_400}
# A filtered row's values, as memory_policy_fields reads them: below the confidence minimum.
LOW = {"confirmation_status": "observed", "confidence": 0.1, "segment_kind": "memory"}


def ranked(pk: str, code: str, kind: str = "memory", score: float = 0.3) -> dict[str, Any]:
    return {"id": pk, "code": code, "segmentKind": kind, "tokens": 10, "similarity": score,
            "score": score}  # fmt: skip


def envelope(decisions: list[dict[str, Any]], reasons: dict[str, int]) -> dict[str, Any]:
    entries = [
        {"id": d["id"], "content": f"content {d['id']}"}
        for d in decisions
        if d["code"] == "included"
    ]
    return {"entries": entries, "diagnostics": {"decisions": decisions, "reasons": reasons}}


class FailedValueTests:
    @pytest.mark.parametrize(
        ("code", "row", "words"),
        [
            ("confidence_below_min", {"confirmation_status": "inferred", "confidence": 0.38},
             "inferred, confidence 0.38 < 0.5"),
            ("sensitivity_above_ceiling", {"sensitivity": "restricted"},
             "sensitivity restricted > confidential"),
            ("older_than_max_age", {"created_at": NOW - timedelta(days=45, hours=3)},
             "age 45 days 3 hours > 30 days"),
            ("memory_type_not_allowed", {"memory_type": "episode"},
             "memory type episode; allowed: fact, preference"),
            ("consent_not_allowed", {"consent_policy": "legitimate_interest"},
             "consent legitimate interest; allowed: explicit"),
            ("segment_kind_forbidden", {"segment_kind": "tool_result"},
             "segment kind tool result is forbidden"),
        ],
    )  # fmt: skip
    def test_it_names_the_rows_value_and_the_policys(self, code, row, words):
        policy = {
            **POLICY,
            "memoryTypeAllowed": ["fact", "preference"],
            "consentPolicyAllowed": ["explicit"],
        }

        assert failed_value(code, row, policy, NOW) == words

    def test_every_filter_of_the_recall_query_names_its_axis(self):
        assert set(FILTER_AXES.values()) <= set(POLICY)


class DecisionGroupTests:
    def test_outcomes_come_in_order_and_empty_ones_are_left_out(self):
        decisions = [
            ranked("1", "included"),
            ranked("2", "budget_drop_order", "tool_result"),
            ranked("3", "segment_kind_forbidden", "retrieval"),
            {"id": "4", "code": "confidence_below_min"},
        ]
        reasons = {
            **{d["code"]: 1 for d in decisions},
            "lifecycle_excluded": 2,
            "below_top_k": 3,
        }

        result = decision_groups(
            envelope=envelope(decisions, reasons),
            policy=POLICY,
            fields={"4": {**LOW, "confidence": 0.2}},
            now=NOW,
        )

        assert [g.key for g in result.groups] == [
            "included",
            "budget",
            "segment_kind_forbidden",
            "confidence_below_min",
        ]
        included, budget, forbidden, low = result.groups
        assert included.rows[0].content == "content 1" and included.ranked
        assert budget.rows[0].why == "its kind is cut first under budget pressure (drop order)"
        assert forbidden.ranked and forbidden.rows[0].why == "segment kind retrieval is forbidden"
        assert not low.ranked and low.rows[0].why == "observed, confidence 0.2 < 0.5"
        assert low.rows[0].content is None  # a filtered memory's content is never shown
        assert [(c.code, c.n) for c in result.counted] == [
            ("below_top_k", 3),
            ("lifecycle_excluded", 2),
        ]

    def test_a_capped_report_counts_what_it_does_not_list(self):
        decisions = [{"id": str(n), "code": "confidence_below_min"} for n in range(8)]
        fields = {str(n): LOW for n in range(8)}

        (group,) = decision_groups(
            envelope=envelope(decisions, {"confidence_below_min": 300}),
            policy=POLICY,
            fields=fields,
            now=NOW,
        ).groups

        assert (group.count, len(group.rows), group.unlisted) == (300, 8, 292)
        assert (len(group.first), len(group.rest)) == (5, 3)

    def test_without_the_policy_or_the_row_no_value_is_guessed(self):
        decisions = [{"id": pk, "code": "confidence_below_min"} for pk in ("1", "2")]
        fields = {"1": LOW}  # 2 was deleted since

        known = decision_groups(
            envelope=envelope(decisions, {}), policy=POLICY, fields=fields, now=NOW
        )
        unknown = decision_groups(
            envelope=envelope(decisions, {}), policy=None, fields=fields, now=NOW
        )

        assert [r.why for r in known.groups[0].rows] == ["observed, confidence 0.1 < 0.5", ""]
        assert [r.why for r in unknown.groups[0].rows] == ["", ""]
        assert known.groups[0].count == 2  # no reasons given: the rows are the count
