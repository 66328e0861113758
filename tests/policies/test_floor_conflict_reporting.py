"""Conflicts between a later floor and an older workload policy, as the portal and API report
them: the compliance table and dashboard, "narrow to floor", the floor's impact preview and
``GET /v1/workloads/{id}/effective-policy``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from policies.algebra import default_floor
from policies.models import Workload, WorkloadPolicyVersion
from policies.selectors import workload_compliance, workspace_policy_current
from policies.services import workload_policy_save, workspace_policy_save
from portal.models import Workspace
from tests.helpers import post_recall
from tests.module_personas import module_scoped
from tests.policies.test_pages import HTMX, floor_post
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer", "workload_a"
)

FORBID_TOOLS = {"forbiddenSegmentKinds": ["tool_result"]}
RAISE_SYSTEM = {"perSegmentReservation": {"system_policy": 1500, "memory": 800, "retrieval": 900}}


def set_floor(workspace: Workspace, **axes: Any) -> None:
    workspace_policy_save(
        workspace=workspace,
        document={**default_floor(), **axes},
        author="user:olga",
        comment="Test floor",
    )


def pin_tools(workload: Workload, environment: str = "prod") -> None:
    """A workload policy valid under the default floor: it pins tool results too."""
    workload_policy_save(
        workload=workload,
        environment=environment,
        document={"pinned": ["system_policy", "tool_result"]},
        author="user:eddie",
    )


def client_for(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


def effective(persona: Any, workload: Workload, environment: str = "prod") -> Any:
    return persona.api().get(
        f"/v1/workloads/{workload.id}/effective-policy?environment={environment}"
    )


@pytest.mark.django_db
class ComplianceTableTests:
    def test_a_workload_the_floor_overrules_is_adjusted_not_compliant(
        self, workspace_a, workload_a
    ):
        pin_tools(workload_a)
        set_floor(workspace_a, **FORBID_TOOLS)
        floor = workspace_policy_current(workspace=workspace_a).document

        _, rows = workload_compliance(workspace=workspace_a, floor=floor)

        (row,) = rows
        prod = next(cell for cell in row.cells if cell.environment == "prod")
        assert (prod.status, prod.compliant, prod.relaxing_axes) == ("adjusted", False, [])
        assert [(c.code, c.axis, c.kind) for c in prod.conflicts] == [
            ("FLOOR_FORBIDS_PINNED_KIND", "pinned", "tool_result")
        ]
        assert row.status == "adjusted"
        dev = next(cell for cell in row.cells if cell.environment == "dev")
        assert dev.status == "compliant"  # no policy of its own there: the floor as is

    def test_the_floor_page_shows_the_conflict_and_offers_narrow_to_floor(
        self, operator, workspace_a, workload_a
    ):
        pin_tools(workload_a)
        set_floor(workspace_a, **FORBID_TOOLS)

        html = client_for(operator).get(reverse("policies:floor", args=["team-a"])).content
        html = html.decode()

        assert "adjusted by the floor" in html
        assert 'data-code="FLOOR_FORBIDS_PINNED_KIND"' in html
        assert "forbidden by the floor, pinned → not pinned" in html
        assert "Narrow to floor" in html

    def test_the_dashboard_counts_adjusted_workloads_apart_from_non_compliant_ones(
        self, viewer, workspace_a, workload_a
    ):
        pin_tools(workload_a)
        set_floor(workspace_a, **FORBID_TOOLS)

        html = client_for(viewer).get(reverse("dashboard", args=["team-a"])).content
        html = html.decode()

        assert "1 workload adjusted by the floor" in html
        assert "non-compliant</span>" not in html
        assert "all workloads compliant" not in html


@pytest.mark.django_db
class NarrowToFloorTests:
    @pytest.mark.parametrize(
        ("document", "floor_axes", "saved"),
        [
            (
                {"pinned": ["system_policy", "tool_result"]},
                FORBID_TOOLS,
                {"pinned": ["system_policy"]},
            ),
            (
                {"totalTokenBudget": 2500},
                RAISE_SYSTEM,
                {
                    "totalTokenBudget": 2500,
                    # dropOrder tool_result, retrieval, memory: retrieval gives up 700.
                    "perSegmentReservation": {
                        "memory": 800,
                        "retrieval": 200,
                        "system_policy": 1500,
                    },
                },
            ),
        ],
        ids=["forbidden-pin", "reservation-past-total"],
    )
    def test_it_saves_the_policy_as_recall_applies_it_and_that_is_compliant(
        self, editor, workspace_a, workload_a, document, floor_axes, saved
    ):
        workload_policy_save(
            workload=workload_a, environment="prod", document=document, author="user:eddie"
        )
        set_floor(workspace_a, **floor_axes)
        before = effective(editor, workload_a).json()
        assert before["conflicts"] and before["compliant"] is False

        url = reverse("policies:workload-narrow", args=["team-a", workload_a.pk])
        response = client_for(editor).post(url, {"environment": "prod", "next": "/w/team-a/"})

        assert response.status_code == 302
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a).order_by("-version")[0]
        assert (latest.version, latest.document) == (2, saved)
        after = effective(editor, workload_a).json()
        assert (after["compliant"], after["conflicts"], after["relaxingAxes"]) == (True, [], [])
        assert after["effectiveBudgetHash"] == before["effectiveBudgetHash"]
        factories.actor(editor.workspace)  # a recall names an actor the workspace has
        assert post_recall(editor, workload_a, query="notes", topK=5).status_code == 200


@pytest.mark.django_db
class ImpactPreviewTests:
    def test_it_lists_what_a_proposed_floor_would_overrule_before_anything_is_saved(
        self, operator, workspace_a, workload_a
    ):
        pin_tools(workload_a)
        proposed = {**workspace_policy_current(workspace=workspace_a).document, **FORBID_TOOLS}

        response = client_for(operator).post(
            reverse("policies:floor", args=["team-a"]),
            floor_post(proposed, action="preview"),
            **HTMX,
        )

        assert response.status_code == 200
        rows = {
            (r.workload.name if r.workload else None, r.environment): r
            for r in response.context["impact_rows"]
        }
        prod = rows[("support-bot", "prod")]
        assert [(c.code, c.kind, c.workload, c.floor, c.effective) for c in prod.conflicts] == [
            ("FLOOR_FORBIDS_PINNED_KIND", "tool_result", "pinned", "forbidden", "not pinned")
        ]
        assert prod.relaxing_axes == []
        assert rows[("support-bot", "dev")].conflicts == []
        html = response.content.decode()
        assert "adjusted by the floor" in html
        assert "The floor forbids tool_result, which the workload policy pins" in html
        assert workspace_a.policy_versions.count() == 1

    def test_it_also_names_the_axes_a_proposed_floor_would_clamp(
        self, operator, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential"},
            author="user:eddie",
        )
        proposed = {
            **workspace_policy_current(workspace=workspace_a).document,
            "sensitivityCeiling": "internal",
        }

        response = client_for(operator).post(
            reverse("policies:floor", args=["team-a"]),
            floor_post(proposed, action="preview"),
            **HTMX,
        )

        prod = next(
            r for r in response.context["impact_rows"] if r.workload and r.environment == "prod"
        )
        assert (prod.relaxing_axes, prod.conflicts) == (["sensitivityCeiling"], [])
        assert 'would relax: <span title="sensitivityCeiling">Sensitivity ceiling</span>' in (
            response.content.decode()
        )


@pytest.mark.django_db
class EffectivePolicyEndpointTests:
    def test_it_lists_each_conflict_with_both_values_and_what_is_used_instead(
        self, viewer, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"totalTokenBudget": 2500},
            author="user:eddie",
        )
        set_floor(workspace_a, **RAISE_SYSTEM)

        response = effective(viewer, workload_a)

        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["compliant"], body["relaxingAxes"]) == (False, [])
        assert body["conflicts"] == [
            {
                "code": "RESERVATION_CUT_TO_FIT",
                "axis": "perSegmentReservation",
                "kind": "retrieval",
                "workloadValue": 900,
                "floorValue": 900,
                "effectiveValue": 200,
                "message": "Reservations add up to 3200 tokens, more than the totalTokenBudget"
                " of 2500: the reservation for retrieval is cut from 900 to 200.",
            }
        ]
        assert body["policy"]["perSegmentReservation"]["retrieval"] == 200
        assert body["policy"]["perSegmentReservation"]["system_policy"] == 1500

    def test_a_workload_that_still_fits_its_floor_has_none(self, viewer, workload_a):
        pin_tools(workload_a)

        body = effective(viewer, workload_a).json()

        assert (body["compliant"], body["conflicts"]) == (True, [])

    def test_an_outsider_cannot_read_it(self, outsider, workspace_a, workload_a):
        pin_tools(workload_a)
        set_floor(workspace_a, **FORBID_TOOLS)

        response = effective(outsider, workload_a)

        assert response.status_code == 404
        assert "conflicts" not in response.json()

    def test_the_schema_declares_the_conflicts(self, viewer):
        schema = viewer.api().get("/v1/schema/", {"format": "json"}).json()

        components = schema["components"]["schemas"]
        conflicts = components["EffectivePolicy"]["properties"]["conflicts"]
        assert conflicts["type"] == "array"
        item = components[conflicts["items"]["$ref"].rsplit("/", 1)[1]]
        assert set(item["properties"]) == {
            "code",
            "axis",
            "kind",
            "workloadValue",
            "floorValue",
            "effectiveValue",
            "message",
        }
        assert "conflicts" in components["EffectivePolicy"]["required"]


@pytest.mark.django_db
class SandboxTests:
    def test_the_saved_policy_line_says_what_the_floor_adjusted(
        self, viewer, workspace_a, workload_a
    ):
        pin_tools(workload_a)
        set_floor(workspace_a, **FORBID_TOOLS)

        response = client_for(viewer).get(
            reverse("recall:sandbox", args=["team-a"]),
            {"workload": str(workload_a.pk), "environment": "prod"},
        )

        assert response.status_code == 200
        html = response.content.decode()
        assert "adjusted by the floor: The floor forbids tool_result" in html
        assert "relaxes the floor" not in html
