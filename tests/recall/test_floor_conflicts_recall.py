"""A floor change after a workload policy was saved never breaks that workload's recall.

The two cases of issue 10: a later floor forbids a kind the workload pins, and a later floor
raises a pinned kind's reservation past what the workload's budget can hold. Both used to
answer every recall with 400 BUDGET_NOT_HONOURABLE.
"""

from __future__ import annotations

from typing import Any

from policies.algebra import default_floor
from policies.models import Workload
from policies.services import workload_policy_save, workspace_policy_save
from tests.helpers import post_recall
from tests.recall import factories


def set_floor(workspace: Any, **axes: Any) -> None:
    workspace_policy_save(
        workspace=workspace,
        document={**default_floor(), **axes},
        author="system:test",
        comment="Test floor",
    )


def set_workload(workload: Workload, **axes: Any) -> None:
    workload_policy_save(workload=workload, environment="prod", document=axes, author="system:test")


class FloorConflictRecallTests:
    def test_a_floor_that_forbids_a_kind_the_workload_pins_still_recalls(
        self, editor, workspace_a, workload_a
    ):
        factories.memories(
            workspace_a,
            {"content": "a memory note", "segment_kind": "memory"},
            {"content": "a tool note", "segment_kind": "tool_result"},
        )
        set_workload(workload_a, pinned=["system_policy", "tool_result"])
        set_floor(workspace_a, forbiddenSegmentKinds=["tool_result"])

        response = post_recall(editor, workload_a, query="notes")

        assert response.status_code == 200, response.content
        envelope = response.json()
        assert {e["segmentKind"] for e in envelope["entries"]} == {"memory"}
        assert envelope["budget"]["perKind"]["tool_result"]["allocated"] == 0
        # The policy recall applied is the one the effective-policy endpoint reports.
        effective = editor.api().get(
            f"/v1/workloads/{workload_a.id}/effective-policy?environment=prod"
        )
        assert effective.json()["effectiveBudgetHash"] == envelope["effectiveBudgetHash"]
        assert effective.json()["policy"]["pinned"] == ["system_policy"]

    def test_a_floor_that_raises_a_pinned_reservation_past_the_workloads_total_still_recalls(
        self, editor, workspace_a, workload_a
    ):
        factories.memories(workspace_a, {"content": "a memory note", "segment_kind": "memory"})
        # 500 + 800 + 900 + 300 = 2500 reserved of the workload's 2500.
        set_workload(workload_a, totalTokenBudget=2500)
        reservations = {"system_policy": 1500, "memory": 800, "retrieval": 900, "tool_result": 0}
        set_floor(workspace_a, perSegmentReservation=reservations)

        response = post_recall(editor, workload_a, query="notes")

        assert response.status_code == 200, response.content
        budget = response.json()["budget"]
        assert budget["totalTokenBudget"] == 2500  # the workload's own, within the floor's
        assert budget["perKind"]["system_policy"]["reserved"] >= 1500
        reserved = sum(kind["reserved"] for kind in budget["perKind"].values())
        assert reserved <= budget["totalTokenBudget"]

    def test_a_floor_that_raises_a_pinned_reservation_past_the_workloads_ceiling_still_recalls(
        self, editor, workspace_a, workload_a
    ):
        factories.memories(workspace_a, {"content": "a memory note", "segment_kind": "memory"})
        set_workload(workload_a, perSegmentCeiling={"memory": 1200, "retrieval": 1200,
                                                    "system_policy": 600})  # fmt: skip
        set_floor(
            workspace_a,
            perSegmentReservation={"system_policy": 900, "memory": 800, "retrieval": 900},
        )

        response = post_recall(editor, workload_a, query="notes")

        assert response.status_code == 200, response.content
        system = response.json()["budget"]["perKind"]["system_policy"]
        assert system["reserved"] == 900
        assert system["ceiling"] >= system["reserved"]
