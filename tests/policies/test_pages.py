"""Policy pages: the operator floor, workload policies, history, narrowing, impact preview."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent, EventType
from policies.axes import AXES
from policies.models import Workload, WorkloadPolicyVersion, WorkspacePolicyVersion
from policies.selectors import workspace_policy_current
from policies.services import workload_create, workload_policy_save, workspace_policy_save
from portal.models import Workspace
from recall.models import Actor, MemoryRecord
from recall.runtime import embedder_model
from tests.module_personas import module_scoped
from tests.recall.factories import memories

# The personas the tests here act as, made once per module (a workload is made per test:
# the impact preview's tests count the workspace's workloads).
workspace_a, operator, editor, viewer, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer"
)

HTMX = {"HTTP_HX_REQUEST": "true"}
SAVE_ON = (
    '<button type="submit" class="primary" id="save-policy" data-keep>Save workload policy</button>'
)


# --- helpers: a policy document as the form would post it -------------------------------------


def _axis_fields(name: str, value: Any) -> dict[str, Any]:
    kind = AXES[name].kind
    key = f"ax-{name}"
    if kind in {"set", "superset"}:
        return {key: list(value)}
    if kind in {"ceiling_map", "reservation_map"}:
        return {f"{key}-{k}": str(v) for k, v in value.items()}
    if kind == "ordered_list":
        return {f"{key}-{i}": v for i, v in enumerate(value)}
    return {key: "" if value is None else str(value)}


def floor_post(document: dict[str, Any], relaxable: list[str] = (), **extra: Any) -> dict:
    # The floor's change comment is required: a test that is not about it sends one.
    data: dict[str, Any] = {
        "action": "save",
        "comment": "Test change",
        "relaxable": list(relaxable),
    }
    for name, value in document.items():
        data.update(_axis_fields(name, value))
    data.update(extra)
    return data


def workload_post(document: dict[str, Any], **extra: Any) -> dict:
    data: dict[str, Any] = {"comment": ""}
    for name in AXES:
        data[f"mode-{name}"] = "set" if name in document else "inherit"
    for name, value in document.items():
        data.update(_axis_fields(name, value))
    data.update(extra)
    return data


def axis_error_slot(html: str, axis: str) -> str:
    """An axis's error slot (policies/_axis_error.html), as HTML."""
    start = html.index(f'<div class="field-error" id="err-{axis}"')
    depth, at = 0, start
    for tag in re.finditer(r"<(/?)div\b", html[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            at = start + tag.end()
            break
    return html[start : html.index(">", at) + 1]


def axis_error(html: str, axis: str) -> str:
    """An axis's error slot as text: its words, its code, its button."""
    slot = re.sub(r"<template.*?</template>", "", axis_error_slot(html, axis), flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", slot).split())


def client_for(persona: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(persona.user)
    return client


def floor_url(slug: str = "team-a") -> str:
    return reverse("policies:floor", args=[slug])


def workload_url(workload: Workload, environment: str = "", slug: str = "team-a") -> str:
    url = reverse("policies:workload-policy", args=[slug, workload.pk])
    return f"{url}?environment={environment}" if environment else url


def versions_of(workspace: Workspace) -> int:
    return WorkspacePolicyVersion.objects.filter(workspace=workspace).count()


def narrowed_floor(workspace: Workspace, **changes: Any) -> None:
    current = workspace_policy_current(workspace=workspace)
    workspace_policy_save(
        workspace=workspace,
        document={**current.document, **changes, "relaxableAxes": current.relaxable_axes},
        author="user:olga",
        comment="narrow",
    )


# --- the operator floor -----------------------------------------------------------------------


@pytest.mark.django_db
class FloorPageTests:
    def test_every_member_reads_the_floor_but_only_the_operator_gets_the_form(
        self, operator, editor, viewer
    ):
        for persona, editable in ((operator, True), (editor, False), (viewer, False)):
            response = client_for(persona).get(floor_url())
            assert response.status_code == 200
            html = response.content.decode()
            assert ("Save floor" in html) is editable
            assert ('name="ax-sensitivityCeiling"' in html) is editable
            assert "sensitivityCeiling" in html

    def test_every_axis_is_rendered_by_kind_with_a_relaxable_checkbox(self, operator):
        html = client_for(operator).get(floor_url()).content.decode()
        for name in AXES:
            assert f'id="axis-{name}"' in html
            assert f'name="relaxable" value="{name}"' in html
        assert 'type="checkbox" name="ax-memoryTypeAllowed" value="fact" checked' in html
        assert '<select id="id_ax-sensitivityCeiling"' in html
        assert 'name="ax-perSegmentCeiling-memory"' in html
        assert 'name="ax-dropOrder-0"' in html
        assert '<label for="id_ax-totalTokenBudget"' in html

    def test_an_outsider_gets_404_on_every_policy_page(self, outsider, workload_a):
        client = client_for(outsider)
        for url in (
            floor_url(),
            reverse("policies:floor-history", args=["team-a"]),
            workload_url(workload_a),
            reverse("policies:workload-history", args=["team-a", workload_a.pk]),
        ):
            assert client.get(url).status_code == 404
        assert client.post(floor_url(), {}).status_code == 404

    def test_a_post_without_csrf_token_is_refused(self, operator, workspace_a):
        before = versions_of(workspace_a)
        floor = workspace_policy_current(workspace=workspace_a).document
        response = client_for(operator, csrf=True).post(floor_url(), floor_post(floor))
        assert response.status_code == 403
        assert versions_of(workspace_a) == before

    def test_an_operator_saves_a_floor_change_with_a_comment(self, operator, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post(
            {**floor, "sensitivityCeiling": "internal", "maxAgeSeconds": 86400},
            relaxable=["diagnosticsVerbosity"],
            comment="Tighten for audit",
        )
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 302
        saved = workspace_policy_current(workspace=workspace_a)
        assert saved.version == 2
        assert saved.document["sensitivityCeiling"] == "internal"
        assert saved.document["maxAgeSeconds"] == 86400
        assert saved.document["dropOrder"] == floor["dropOrder"]
        assert saved.relaxable_axes == ["diagnosticsVerbosity"]
        assert saved.comment == "Tighten for audit"
        assert saved.author == "user:olga"

    def test_an_overlong_comment_is_shown_on_the_form_and_saves_nothing(
        self, operator, workspace_a
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "sensitivityCeiling": "internal"}, comment="c" * 501)
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code in (400, 422)
        assert "Keep the comment under 500 characters." in response.content.decode()
        assert versions_of(workspace_a) == 1

    def test_an_editor_cannot_change_the_floor(self, editor, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "sensitivityCeiling": "public"})
        assert client_for(editor).post(floor_url(), data).status_code == 403
        assert versions_of(workspace_a) == 1

    def test_a_viewer_post_is_forbidden_and_saves_nothing(self, viewer, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "sensitivityCeiling": "public"})
        assert client_for(viewer).post(floor_url(), data).status_code == 403
        assert versions_of(workspace_a) == 1

    def test_a_bad_value_is_shown_next_to_its_field_and_nothing_is_saved(
        self, operator, workspace_a
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "confidenceMin": 2, "totalTokenBudget": "lots"})
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 422
        html = response.content.decode()
        assert axis_error(html, "totalTokenBudget") == "Enter a whole number."
        data = floor_post({**floor, "confidenceMin": 2})
        html = client_for(operator).post(floor_url(), data).content.decode()
        assert axis_error(html, "confidenceMin") == "Must be between 0 and 1, got 2.0."
        assert 'value="2"' in html  # the submitted value is kept for correction
        assert versions_of(workspace_a) == 1

    def test_reservations_past_the_budget_are_reported_on_the_reservation_field(
        self, operator, workspace_a
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "totalTokenBudget": 1000})
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 422
        html = response.content.decode()
        assert axis_error(html, "perSegmentReservation").startswith(
            "Reservations add up to 2500 tokens"
        )
        assert versions_of(workspace_a) == 1

    def test_the_impact_preview_counts_memories_that_would_stop_being_recallable(
        self, operator, workspace_a, workload_a
    ):
        actor = Actor.objects.create(workspace=workspace_a, kind="user", name="ada")
        now = timezone.now()
        for sensitivity, n in (("public", 2), ("internal", 3), ("confidential", 4)):
            for _ in range(n):
                MemoryRecord.objects.create(
                    workspace=workspace_a,
                    actor=actor,
                    content="x",
                    memory_type="fact",
                    source_kind="user",
                    sensitivity=sensitivity,
                    consent_policy="explicit",
                    created_at=now,
                    embedding_model=embedder_model(),  # as the embedding job leaves it
                )
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "internal"},
            author="user:eddie",
        )
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "sensitivityCeiling": "public"}, action="preview")
        response = client_for(operator).post(floor_url(), data, **HTMX)
        assert response.status_code == 200
        html = response.content.decode()
        assert "<html" not in html
        rows = response.context["impact_rows"]
        by_target = {(r.workload.name if r.workload else None, r.environment): r for r in rows}
        assert (by_target[(None, "")].recallable_now, by_target[(None, "")].would_stop) == (9, 7)
        dev = by_target[("support-bot", "dev")]
        assert (dev.recallable_now, dev.would_stop) == (9, 7)
        prod = by_target[("support-bot", "prod")]
        assert (prod.recallable_now, prod.would_stop) == (5, 3)
        assert versions_of(workspace_a) == 1

    def test_a_floor_saved_without_a_comment_is_refused_on_the_comment(self, operator, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "confidenceMin": 0.6}, comment="   ")
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 422
        html = response.content.decode()
        assert "The floor was not saved: fix Change comment (marked below)." in html
        err = html[html.index('<p class="field-error" id="err-comment">') :]
        assert err[: err.index("</p>")].endswith(
            "a change comment (comment) is required, kept with the version and in the audit trail."
        )
        assert 'name="comment" maxlength="500" value="   " required' in html
        assert 'value="0.6"' in html  # the change is kept for the comment to be added
        assert versions_of(workspace_a) == 1
        data["comment"] = "Raise the confidence floor"
        assert client_for(operator).post(floor_url(), data).status_code == 302
        assert workspace_policy_current(workspace=workspace_a).comment == (
            "Raise the confidence floor"
        )

    def test_the_impact_preview_needs_no_comment_and_says_when_it_is_out_of_date(
        self, operator, workspace_a
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "confidenceMin": 0.6}, comment="", action="preview")
        response = client_for(operator).post(floor_url(), data, **HTMX)
        assert response.status_code == 200
        assert response.context["impact_rows"] is not None
        html = response.content.decode()
        # portal.js fills the marker once the form changes (the comment does not count).
        assert '<section class="impact preview"' in html
        assert '<p class="stale-note" role="status" data-text="Out of date:' in html
        page = client_for(operator).get(floor_url()).content.decode()
        assert 'data-preview="impact"' in page
        assert 'placeholder="Why this change?" data-preview-ignore>' in page

    def test_the_impact_preview_is_a_single_counting_query(
        self, operator, workspace_a, django_assert_max_num_queries
    ):
        for i in range(4):
            workload_create(workspace=workspace_a, name=f"bot-{i}", author="system:test")
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "sensitivityCeiling": "public"}, action="preview")
        client = client_for(operator)
        client.get(floor_url())  # warm the session
        with django_assert_max_num_queries(9) as captured:
            response = client.post(floor_url(), data, **HTMX)
        assert response.status_code == 200
        assert len(response.context["impact_rows"]) == 1 + 4 * 3
        counting = [q for q in captured.captured_queries if "FILTER (WHERE" in q["sql"]]
        assert len(counting) == 1

    def test_the_impact_preview_handles_hundreds_of_workloads_in_one_counting_query(
        self, operator, workspace_a, django_assert_max_num_queries
    ):
        # 300 workloads × 3 environments: two count columns per pair would pass PostgreSQL's
        # 1664 target-list entries; each prod policy is distinct, so 600 distinct policies.
        workloads = Workload.objects.bulk_create(
            Workload(workspace=workspace_a, name=f"bot-{i:03}") for i in range(300)
        )
        WorkloadPolicyVersion.objects.bulk_create(
            WorkloadPolicyVersion(
                workload=w,
                environment="prod",
                version=1,
                document={"confidenceMin": 0.5 + i / 1000},
                author="t",
            )
            for i, w in enumerate(workloads)
        )
        actor = Actor.objects.create(workspace=workspace_a, kind="user", name="ada")
        now = timezone.now()
        for sensitivity, confidence, n in (
            ("public", 0.95, 2),
            ("internal", 0.95, 3),
            ("internal", 0.7, 1),
            ("confidential", 0.2, 4),
        ):
            MemoryRecord.objects.bulk_create(
                MemoryRecord(
                    workspace=workspace_a,
                    actor=actor,
                    content="x",
                    memory_type="fact",
                    source_kind="user",
                    confirmation_status="inferred",  # held to the confidence minimum
                    sensitivity=sensitivity,
                    confidence=confidence,
                    consent_policy="explicit",
                    created_at=now,
                    embedding_model=embedder_model(),  # as the embedding job leaves it
                )
                for _ in range(n)
            )
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "sensitivityCeiling": "public"}, action="preview")
        client = client_for(operator)
        client.get(floor_url())  # warm the session
        with django_assert_max_num_queries(9) as captured:
            response = client.post(floor_url(), data, **HTMX)
        assert response.status_code == 200
        counting = [q for q in captured.captured_queries if "FILTER (WHERE" in q["sql"]]
        assert len(counting) == 1
        rows = response.context["impact_rows"]
        assert len(rows) == 1 + 300 * 3
        by_target = {(r.workload.name if r.workload else None, r.environment): r for r in rows}
        counts = {key: (r.recallable_now, r.would_stop) for key, r in by_target.items()}
        assert counts[(None, "")] == (10, 8)
        assert counts[("bot-000", "dev")] == counts[("bot-299", "staging")] == (10, 8)
        assert counts[("bot-000", "prod")] == (6, 4)  # confidence ≥ 0.5
        assert counts[("bot-250", "prod")] == (5, 3)  # confidence ≥ 0.75
        assert counts[("bot-299", "prod")] == (5, 3)
        assert "bot-299" in response.content.decode()

    def test_the_impact_preview_without_javascript_renders_the_whole_page(
        self, operator, workspace_a
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "confidenceMin": 0.5}, action="preview")
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 200
        html = response.content.decode()
        assert "<html" in html and "Impact preview" in html
        assert 'name="ax-confidenceMin" type="number" inputmode="decimal" value="0.5"' in html
        assert versions_of(workspace_a) == 1

    def test_the_floor_page_query_count_does_not_grow_with_workloads(
        self, operator, workspace_a, django_assert_num_queries
    ):
        client = client_for(operator)
        client.get(floor_url())
        # 9 with the row-level security scope of the signed-in user's requests
        with django_assert_num_queries(9):
            client.get(floor_url())
        for i in range(5):
            workload = workload_create(workspace=workspace_a, name=f"bot-{i}", author="t")
            workload_policy_save(
                workload=workload, environment="prod", document={"confidenceMin": 0.5}, author="t"
            )
        with django_assert_num_queries(9):
            assert client.get(floor_url()).status_code == 200


# --- compliance and narrowing -------------------------------------------------------------------


@pytest.mark.django_db
class NarrowToFloorTests:
    def test_a_workload_that_relaxes_a_narrowed_floor_is_shown_non_compliant(
        self, operator, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential", "confidenceMin": 0.2},
            author="user:eddie",
        )
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        html = client_for(operator).get(floor_url()).content.decode()
        assert "non-compliant" in html
        assert 'relaxes: <span title="sensitivityCeiling">Sensitivity ceiling</span>' in html
        assert "Narrow to floor" in html
        assert f'href="/w/team-a/workloads/{workload_a.pk}/policy/?environment=prod"' in html

    def test_narrow_to_floor_saves_the_clamped_axes_the_workload_sets(
        self, editor, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential", "confidenceMin": 0.2},
            author="user:eddie",
        )
        narrowed_floor(workspace_a, sensitivityCeiling="internal", confidenceMin=0.5)
        url = reverse("policies:workload-narrow", args=["team-a", workload_a.pk])
        response = client_for(editor).post(url, {"environment": "prod", "next": "/w/team-a/"})
        assert response.status_code == 302 and response["Location"] == "/w/team-a/"
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a).first()
        assert latest.version == 2
        assert latest.document == {"sensitivityCeiling": "internal", "confidenceMin": 0.5}
        assert latest.comment == "Narrowed to floor"

    def test_a_viewer_cannot_narrow(self, viewer, workspace_a, workload_a):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential"},
            author="user:eddie",
        )
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        url = reverse("policies:workload-narrow", args=["team-a", workload_a.pk])
        assert client_for(viewer).post(url, {"environment": "prod"}).status_code == 403
        assert WorkloadPolicyVersion.objects.filter(workload=workload_a).count() == 1

    def test_narrowing_in_an_unknown_environment_is_a_bad_request(
        self, editor, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a, environment="", document={"confidenceMin": 0.1}, author="t"
        )
        url = reverse("policies:workload-narrow", args=["team-a", workload_a.pk])
        response = client_for(editor).post(url, {"environment": "nowhere", "next": "/w/team-a/"})
        assert response.status_code == 400
        html = response.content.decode()
        assert (
            "There is no environment &#x27;nowhere&#x27; in this workspace;"
            " it has: dev, prod, staging." in html
        )
        assert '<a href="/w/team-a/">' in html
        assert WorkloadPolicyVersion.objects.filter(workload=workload_a).count() == 1

    def test_an_unsafe_next_url_is_ignored(self, editor, workspace_a, workload_a):
        workload_policy_save(
            workload=workload_a, environment="", document={"confidenceMin": 0.1}, author="t"
        )
        url = reverse("policies:workload-narrow", args=["team-a", workload_a.pk])
        response = client_for(editor).post(url, {"next": "https://evil.example/"})
        assert response["Location"] == floor_url()


# --- workload policies ----------------------------------------------------------------------------


@pytest.mark.django_db
class WorkloadPolicyPageTests:
    def test_every_member_reads_it_and_editors_get_the_form(
        self, operator, editor, viewer, workload_a
    ):
        for persona, editable in ((operator, True), (editor, True), (viewer, False)):
            response = client_for(persona).get(workload_url(workload_a, "prod"))
            assert response.status_code == 200
            html = response.content.decode()
            assert ("Save workload policy" in html) is editable
            assert ('name="mode-sensitivityCeiling"' in html) is editable
            assert 'Floor: <span class="floor-value">confidential</span>' in html or not editable

    def test_without_any_policy_it_opens_on_all_environments(self, editor, workload_a):
        response = client_for(editor).get(workload_url(workload_a))
        assert response.context["environment"] == ""
        assert not response.context["opened_on_latest"]
        tabs = [(t.environment, t.selected, t.latest) for t in response.context["environment_tabs"]]
        assert tabs == [
            ("", True, None),
            ("dev", False, None),
            ("prod", False, None),
            ("staging", False, None),
        ]

    def test_an_htmx_environment_switch_returns_only_the_policy_body(self, editor, workload_a):
        response = client_for(editor).get(workload_url(workload_a, "dev"), **HTMX)
        html = response.content.decode()
        assert "<html" not in html and "Environment <code>dev</code>" in html

    def test_the_effective_policy_of_an_environment_without_its_own_follows_the_default(
        self, viewer, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="",
            document={"diagnosticsVerbosity": "none"},
            author="user:eddie",
        )
        response = client_for(viewer).get(workload_url(workload_a, "prod"))
        assert response.status_code == 200
        assert ("diagnosticsVerbosity", "none") in response.context["effective"]
        html = response.content.decode()
        assert "floor narrowed by the all-environments default (v1)" in html
        assert (
            '<tr><th scope="row">Diagnostics detail <code class="api-name">diagnosticsVerbosity'
            "</code>\n</th><td>none</td></tr>" in html
        )

    def test_the_effective_policy_is_clamped_to_the_floor(self, viewer, workspace_a, workload_a):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential"},
            author="user:eddie",
        )
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        response = client_for(viewer).get(workload_url(workload_a, "prod"))
        assert ("sensitivityCeiling", "internal") in response.context["effective"]
        assert "floor narrowed by this policy" in response.content.decode()

    def test_an_effective_policy_the_floor_overrules_is_explained(
        self, viewer, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="",
            document={"pinned": ["system_policy", "memory"]},
            author="user:eddie",
        )
        narrowed_floor(workspace_a, forbiddenSegmentKinds=["memory"])
        response = client_for(viewer).get(workload_url(workload_a, "dev"))
        assert response.status_code == 200
        # The floor wins: memory is forbidden and no longer pinned, and the page says why.
        assert ("pinned", "system policy") in response.context["effective"]
        assert [c.code for c in response.context["effective_conflicts"]] == [
            "FLOOR_FORBIDS_PINNED_KIND"
        ]
        html = response.content.decode()
        assert "Recall cannot apply" not in html
        assert "The floor forbids memory, which the workload policy pins" in html

    def test_an_unknown_environment_is_404(self, editor, workload_a):
        assert client_for(editor).get(workload_url(workload_a, "nowhere")).status_code == 404

    def test_another_workspaces_workload_is_404_even_for_a_member(self, operator, workload_b):
        assert client_for(operator).get(workload_url(workload_b)).status_code == 404

    def test_an_editor_saves_a_narrower_policy_with_an_audit_event(self, editor, workload_a):
        data = workload_post({"sensitivityCeiling": "internal"}, comment="Support sees less")
        response = client_for(editor).post(workload_url(workload_a, "prod"), data)
        assert response.status_code == 302
        assert response["Location"] == workload_url(workload_a, "prod")
        saved = WorkloadPolicyVersion.objects.get(workload=workload_a)
        assert (saved.environment, saved.document) == ("prod", {"sensitivityCeiling": "internal"})
        assert saved.comment == "Support sees less"
        event = AuditEvent.objects.filter(type=EventType.WORKLOAD_POLICY_SET).get()
        assert event.author == "user:eddie" and event.environment == "prod"

    def test_saving_a_policy_that_relaxes_the_floor_is_refused_next_to_the_axis(
        self, editor, workload_a
    ):
        data = workload_post({"sensitivityCeiling": "restricted", "confidenceMin": 0.3})
        response = client_for(editor).post(workload_url(workload_a, "prod"), data)
        assert response.status_code == 422
        html = response.content.decode()
        # The words first, then the code, and a button that sets the axis to the floor's value.
        slot = axis_error_slot(html, "sensitivityCeiling")
        assert axis_error(html, "sensitivityCeiling") == (
            "Wider than the operator floor (floor: confidential)."
            " WORKLOAD_RELAXES_OPERATOR_FLOOR Set to the floor's value"
        )
        assert '<code class="api-name">WORKLOAD_RELAXES_OPERATOR_FLOOR</code>' in slot
        assert 'data-floor-axis="sensitivityCeiling"' in slot
        template = slot[slot.index('<template id="floor-value-sensitivityCeiling">') :]
        assert '<option value="confidential" selected>' in template
        assert '<div class="field-error" id="err-confidenceMin"></div>' in html
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()

    def test_live_validation_marks_a_relaxing_axis_without_saving(self, editor, workload_a):
        data = workload_post({"sensitivityCeiling": "restricted"}, _validate="1")
        response = client_for(editor).post(workload_url(workload_a, "prod"), data, **HTMX)
        assert response.status_code == 200
        html = response.content.decode()
        slot = axis_error_slot(html, "sensitivityCeiling")
        assert 'hx-swap-oob="true"><span class="words">Wider than the operator floor' in slot
        assert "(floor: confidential)" in slot and "WORKLOAD_RELAXES_OPERATOR_FLOOR" in slot
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a).exists()
        ok = workload_post({"sensitivityCeiling": "public"}, _validate="1")
        html = client_for(editor).post(workload_url(workload_a), ok, **HTMX).content.decode()
        assert "No problems found" in html
        assert not WorkloadPolicyVersion.objects.exists()

    def test_live_validation_counts_what_the_policy_would_take_out_of_recall(
        self, editor, workspace_a, workload_a
    ):
        memories(
            workspace_a,
            *({"content": f"fact {i}", "memory_type": "fact"} for i in range(4)),
            *({"content": f"episode {i}", "memory_type": "episode"} for i in range(3)),
        )
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"memoryTypeAllowed": ["fact"]},
            author="user:eddie",
        )
        # prod: 4 facts now; episodes only would stop those 4 and let the 3 episodes in.
        data = workload_post({"memoryTypeAllowed": ["episode"]}, _validate="1")
        response = client_for(editor).post(workload_url(workload_a, "prod"), data, **HTMX)
        [prod] = response.context["impact"]
        assert (prod.environment, prod.recallable_now, prod.recallable_after) == ("prod", 4, 3)
        assert (prod.would_stop, prod.would_start) == (4, 3)
        html = response.content.decode()
        assert (
            '<section class="impact preview" id="impact" aria-labelledby="impact-h"'
            ' hx-swap-oob="true">' in html
        )
        assert '<strong class="error">4</strong>' in html
        assert not WorkloadPolicyVersion.objects.filter(workload=workload_a, version=2).exists()
        # The default applies where an environment has no policy of its own: not prod.
        data = workload_post({"memoryTypeAllowed": ["episode"]}, _validate="1")
        response = client_for(editor).post(workload_url(workload_a, ""), data, **HTMX)
        assert [r.environment for r in response.context["impact"]] == ["dev", "staging"]
        assert [(r.recallable_now, r.recallable_after) for r in response.context["impact"]] == [
            (7, 3),
            (7, 3),
        ]

    def test_a_policy_wider_than_the_floor_is_counted_as_recall_clamps_it(
        self, editor, workspace_a, workload_a
    ):
        memories(workspace_a, {"content": "one"}, {"content": "two", "sensitivity": "restricted"})
        data = workload_post({"sensitivityCeiling": "restricted"}, _validate="1")
        response = client_for(editor).post(workload_url(workload_a, "prod"), data, **HTMX)
        [prod] = response.context["impact"]
        assert (prod.recallable_now, prod.recallable_after) == (1, 1)
        assert prod.relaxing_axes == ["sensitivityCeiling"]

    def test_the_workload_page_waits_for_a_change_before_counting(self, editor, workload_a):
        html = client_for(editor).get(workload_url(workload_a, "prod")).content.decode()
        impact = html[html.index('<section class="impact preview" id="impact"') :]
        assert "Change an axis: what this policy would take out of recall" in impact
        assert 'data-preview="impact"' in html

    def test_live_validation_reports_malformed_values(self, editor, workload_a):
        data = workload_post({"totalTokenBudget": "-5"}, _validate="1")
        html = client_for(editor).post(workload_url(workload_a), data, **HTMX).content.decode()
        assert axis_error(html, "totalTokenBudget").startswith(
            "Expected a whole number of tokens from 1"
        )
        assert 'id="err-totalTokenBudget" hx-swap-oob="true">' in html

    def test_inherited_axes_are_left_out_of_the_saved_document(self, editor, workload_a):
        data = workload_post({"dropOrder": ["memory", "retrieval"]})
        data["ax-sensitivityCeiling"] = "restricted"  # ignored: the axis inherits the floor
        assert client_for(editor).post(workload_url(workload_a), data).status_code == 302
        saved = WorkloadPolicyVersion.objects.get(workload=workload_a)
        assert saved.document == {"dropOrder": ["memory", "retrieval"]}

    def test_a_viewer_post_is_forbidden_and_saves_nothing(self, viewer, workload_a):
        data = workload_post({"sensitivityCeiling": "internal"})
        assert client_for(viewer).post(workload_url(workload_a), data).status_code == 403
        assert not WorkloadPolicyVersion.objects.exists()

    def test_a_post_without_csrf_token_is_refused(self, editor, workload_a):
        data = workload_post({"sensitivityCeiling": "internal"})
        response = client_for(editor, csrf=True).post(workload_url(workload_a), data)
        assert response.status_code == 403
        assert not WorkloadPolicyVersion.objects.exists()

    def test_an_outsider_cannot_post(self, outsider, workload_a):
        data = workload_post({"sensitivityCeiling": "internal"})
        assert client_for(outsider).post(workload_url(workload_a), data).status_code == 404


# --- version history ------------------------------------------------------------------------------


@pytest.mark.django_db
class HistoryPageTests:
    def history_url(self, **params: Any) -> str:
        url = reverse("policies:floor-history", args=["team-a"])
        return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")

    def test_it_lists_floor_versions_and_diffs_the_latest_two(
        self, operator, editor, viewer, workspace_a
    ):
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        for persona, restorable in ((operator, True), (editor, False), (viewer, False)):
            response = client_for(persona).get(self.history_url())
            assert response.status_code == 200
            html = response.content.decode()
            assert "Initial operator floor" in html and "system:test" in html
            assert ("Restore this version" in html) is restorable
        diff = response.context["diff"]
        assert [(r.axis, r.before, r.after) for r in diff] == [
            ("sensitivityCeiling", "confidential", "internal")
        ]

    def test_any_two_versions_can_be_compared_and_htmx_gets_the_diff_only(
        self, viewer, workspace_a
    ):
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        narrowed_floor(workspace_a, confidenceMin=0.4)
        response = client_for(viewer).get(self.history_url(a=1, b=3), **HTMX)
        html = response.content.decode()
        assert "<html" not in html
        assert "Changes from v1 to v3" in html
        assert 'Sensitivity ceiling <code class="api-name">sensitivityCeiling</code>' in html
        assert 'Minimum confidence <code class="api-name">confidenceMin</code>' in html

    def test_restoring_a_floor_version_is_a_new_save(self, operator, workspace_a):
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        response = client_for(operator).post(self.history_url(), {"version": "1"})
        assert response.status_code == 302
        latest = workspace_policy_current(workspace=workspace_a)
        assert latest.version == 3
        assert latest.document["sensitivityCeiling"] == "confidential"
        assert latest.comment == "Restored version 1"

    def test_viewers_and_editors_cannot_restore_the_floor(self, editor, viewer, workspace_a):
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        for persona in (editor, viewer):
            assert client_for(persona).post(self.history_url(), {"version": "1"}).status_code == 403
        assert versions_of(workspace_a) == 2

    def test_restoring_a_workload_version_is_revalidated(self, editor, workspace_a, workload_a):
        for ceiling in ("confidential", "public"):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"sensitivityCeiling": ceiling},
                author="user:eddie",
            )
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        url = reverse("policies:workload-history", args=["team-a", workload_a.pk])
        response = client_for(editor).post(url + "?environment=prod", {"version": "1"})
        assert response.status_code == 422
        html = response.content.decode()
        assert (
            "<li>Sensitivity ceiling (sensitivityCeiling): Wider than the operator floor"
            " (floor: internal). (WORKLOAD_RELAXES_OPERATOR_FLOOR)</li>" in html
        )
        assert WorkloadPolicyVersion.objects.filter(workload=workload_a).count() == 2

    def test_a_workload_version_restores_within_the_floor(self, editor, workload_a):
        for ceiling in ("internal", "public"):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"sensitivityCeiling": ceiling},
                author="user:eddie",
            )
        url = reverse("policies:workload-history", args=["team-a", workload_a.pk])
        response = client_for(editor).post(url + "?environment=prod", {"version": "1"})
        assert response.status_code == 302
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a).first()
        assert (latest.version, latest.document) == (3, {"sensitivityCeiling": "internal"})

    def test_a_version_to_compare_that_does_not_exist_is_a_bad_request(self, viewer, workspace_a):
        narrowed_floor(workspace_a, sensitivityCeiling="internal")
        client = client_for(viewer)
        for params, raw in (({"a": "abc"}, "abc"), ({"a": 1, "b": 7}, "7"), ({"b": "0"}, "0")):
            response = client.get(self.history_url(**params))
            assert response.status_code == 400
            html = response.content.decode()
            assert (
                f'<p class="form-errors card" role="alert">There is no version {raw} of this'
                " policy to compare: pick two from the list.</p>" in html
            )
            assert "Changes from" not in html
            assert "Initial operator floor" in html  # the version list is still there
        assert client.get(self.history_url(a=2, b=1)).status_code == 200

    def test_restoring_a_version_that_does_not_exist_is_a_bad_request(self, operator, workspace_a):
        response = client_for(operator).post(self.history_url(), {"version": "9"})
        assert response.status_code == 400
        assert "There is no version 9 to restore; nothing was restored." in (
            response.content.decode()
        )
        assert versions_of(workspace_a) == 1

    def test_an_unknown_environment_in_a_workload_history_is_a_bad_request(
        self, editor, workload_a
    ):
        url = reverse("policies:workload-history", args=["team-a", workload_a.pk])
        client = client_for(editor)
        for response in (
            client.get(url + "?environment=nowhere"),
            client.post(url + "?environment=nowhere", {"version": "1"}),
        ):
            assert response.status_code == 400
            html = response.content.decode()
            assert (
                "There is no environment &#x27;nowhere&#x27; in this workspace;"
                " it has: dev, prod, staging." in html
            )
            assert f'<a href="{url}">' in html
        assert not WorkloadPolicyVersion.objects.exists()

    def test_the_history_query_count_does_not_grow_with_versions(
        self, viewer, workspace_a, workload_a, django_assert_num_queries
    ):
        client = client_for(viewer)
        url = reverse("policies:workload-history", args=["team-a", workload_a.pk])
        client.get(self.history_url())
        for _ in range(2):
            narrowed_floor(workspace_a, confidenceMin=0.1)
            workload_policy_save(
                workload=workload_a, environment="", document={"confidenceMin": 0.2}, author="t"
            )
        # each with the row-level security scope of the signed-in user's requests
        with django_assert_num_queries(6):
            client.get(self.history_url())
        with django_assert_num_queries(8):
            client.get(url)
        for _ in range(5):
            narrowed_floor(workspace_a, confidenceMin=0.1)
            workload_policy_save(
                workload=workload_a, environment="", document={"confidenceMin": 0.2}, author="t"
            )
        with django_assert_num_queries(6):
            assert client.get(self.history_url()).status_code == 200
        with django_assert_num_queries(8):
            assert client.get(url).status_code == 200


# --- words, durations, environments (issue 11) ----------------------------------------------------


@pytest.mark.django_db
class DurationInputTests:
    @pytest.mark.parametrize(
        ("amount", "unit", "seconds"),
        [
            ("30", "day", 30 * 86_400),
            ("1.5", "hour", 5_400),
            ("90", "minute", 5_400),
            ("45", "second", 45),
            ("", "day", None),
        ],
    )
    def test_an_amount_and_a_unit_are_saved_as_seconds(
        self, operator, workspace_a, amount, unit, seconds
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post(floor, **{"ax-maxAgeSeconds": amount, "ax-maxAgeSeconds-unit": unit})
        data["comment"] = "age"
        data["ax-totalTokenBudget"] = "3100"  # so that even "no limit" is a change to save
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 302, response.content.decode()
        assert workspace_policy_current(workspace=workspace_a).document["maxAgeSeconds"] == seconds

    @pytest.mark.parametrize(
        ("amount", "unit", "message"),
        [
            ("soon", "day", "Enter a number of days, or leave it empty for no limit."),
            ("0", "hour", "Enter a duration above zero, or leave it empty for no limit."),
            ("-3", "day", "Enter a duration above zero, or leave it empty for no limit."),
            ("1.5", "second", "1.5 seconds is not a whole number of seconds: use a smaller unit."),
            ("1e9999", "day", "At most a century (36600 days)."),
            ("3", "fortnight", "Choose days, hours, minutes or seconds."),
        ],
    )
    def test_a_bad_duration_is_refused_on_its_field_and_the_summary_names_it(
        self, operator, workspace_a, amount, unit, message
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post(floor, **{"ax-maxAgeSeconds": amount, "ax-maxAgeSeconds-unit": unit})
        response = client_for(operator).post(floor_url(), data)
        assert response.status_code == 422
        html = response.content.decode()
        assert axis_error(html, "maxAgeSeconds") == message
        assert "The floor was not saved: fix Maximum age (marked below)." in html
        assert versions_of(workspace_a) == 1

    def test_a_stored_age_opens_in_the_largest_unit_that_holds_it(self, editor, workload_a):
        for seconds, amount, unit in (
            (14 * 86_400, "14", "day"),
            (36 * 3_600, "36", "hour"),
            (61, "61", "second"),
        ):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"maxAgeSeconds": seconds},
                author="t",
            )
            html = client_for(editor).get(workload_url(workload_a, "prod")).content.decode()
            assert (
                f'name="ax-maxAgeSeconds" type="number" inputmode="decimal" value="{amount}"'
                in (html)
            )
            assert f'<option value="{unit}" selected>{unit}s</option>' in html

    def test_a_form_without_a_unit_means_seconds_as_the_api_does(self, operator, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        response = client_for(operator).post(
            floor_url(), floor_post({**floor, "maxAgeSeconds": 600})
        )
        assert response.status_code == 302
        assert workspace_policy_current(workspace=workspace_a).document["maxAgeSeconds"] == 600

    def test_a_relaxed_age_names_the_floor_as_a_duration(self, editor, workspace_a, workload_a):
        narrowed_floor(workspace_a, maxAgeSeconds=30 * 86_400)
        data = workload_post({}, **{"mode-maxAgeSeconds": "set", "ax-maxAgeSeconds": "60"})
        data["ax-maxAgeSeconds-unit"] = "day"
        response = client_for(editor).post(workload_url(workload_a, "prod"), data)
        assert response.status_code == 422
        html = response.content.decode()
        assert "Wider than the operator floor (floor: 30 days)." in html
        assert "relaxes the operator floor</strong> on Maximum age" in html


@pytest.mark.django_db
class PolicyWordsTests:
    def test_axes_are_labelled_with_their_api_name_as_a_hint(self, operator, viewer):
        html = client_for(operator).get(floor_url()).content.decode()
        assert "<legend>Consent bases allowed</legend>" in html
        assert (
            '<code class="api-name axis-api" title="Its name in the API">consentPolicyAllowed'
            in (html)
        )
        assert '<label for="id_ax-perSegmentCeiling-system_policy">system policy</label>' in html
        assert "<legend>consentPolicyAllowed</legend>" not in html
        viewer_html = client_for(viewer).get(floor_url()).content.decode()
        assert "explicit, contractual, legitimate interest, implied, unknown" in viewer_html
        assert "legitimate_interest" not in viewer_html.split("<main", 1)[1].replace(
            'value="legitimate_interest"', ""
        )

    def test_the_impact_preview_names_the_fields_it_cannot_read(self, operator, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "totalTokenBudget": "lots"}, action="preview")
        html = client_for(operator).post(floor_url(), data, **HTMX).content.decode()
        assert (
            '<li>Total token budget <code class="api-name">totalTokenBudget</code>\n: '
            "Enter a whole number.</li>" in html
        )

    def test_diffs_show_values_in_words(self, viewer, workspace_a):
        narrowed_floor(workspace_a, maxAgeSeconds=7 * 86_400, consentPolicyAllowed=["explicit"])
        response = client_for(viewer).get(reverse("policies:floor-history", args=["team-a"]))
        rows = {r.axis: (r.before, r.after) for r in response.context["diff"]}
        assert rows["maxAgeSeconds"] == ("no limit", "7 days")
        assert rows["consentPolicyAllowed"] == (
            "explicit, contractual, legitimate interest, implied, unknown",
            "explicit",
        )


@pytest.mark.django_db
class WorkloadEnvironmentTests:
    def test_a_workload_with_only_a_prod_policy_opens_on_prod(self, editor, workload_a):
        for budget in (3000, 2800):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"totalTokenBudget": budget},
                author="t",
            )
        response = client_for(editor).get(workload_url(workload_a))
        assert response.status_code == 200
        assert response.context["environment"] == "prod" and response.context["opened_on_latest"]
        assert response.context["current"].version == 2
        html = response.content.decode()
        assert "No versions yet" not in html and "Environment <code>prod</code>" in html
        assert (
            'aria-current="page" class="has-policy">prod <span class="env-marker">· v2</span>'
            in (html)
        )
        assert 'class="no-policy">dev <span class="env-marker">· no policy</span>' in html
        # The form names its environment, so saving it cannot land elsewhere.
        assert f'action="{workload_url(workload_a, "prod")}"' in html

    def test_it_opens_on_the_environment_saved_most_recently(self, editor, workload_a):
        for environment in ("prod", "", "dev"):
            workload_policy_save(
                workload=workload_a,
                environment=environment,
                document={"confidenceMin": 0.3},
                author="t",
            )
        assert client_for(editor).get(workload_url(workload_a)).context["environment"] == "dev"

    def test_an_empty_environment_asks_for_the_all_environments_default(self, editor, workload_a):
        workload_policy_save(
            workload=workload_a, environment="prod", document={"confidenceMin": 0.3}, author="t"
        )
        url = reverse("policies:workload-policy", args=["team-a", workload_a.pk])
        response = client_for(editor).get(url + "?environment=")
        assert response.context["environment"] == ""
        assert not response.context["opened_on_latest"]
        assert response.context["current"] is None

    def test_a_form_posted_without_an_environment_still_saves_the_default(self, editor, workload_a):
        workload_policy_save(
            workload=workload_a, environment="prod", document={"confidenceMin": 0.3}, author="t"
        )
        data = workload_post({"confidenceMin": 0.4})
        response = client_for(editor).post(workload_url(workload_a), data)
        assert response.status_code == 302
        assert response["Location"] == workload_url(workload_a) + "?environment="
        saved = WorkloadPolicyVersion.objects.get(workload=workload_a, environment="")
        assert saved.document == {"confidenceMin": 0.4}

    def test_live_validation_turns_save_off_while_the_floor_is_relaxed(self, editor, workload_a):
        client = client_for(editor)
        bad = workload_post({"sensitivityCeiling": "restricted"}, _validate="1")
        html = client.post(workload_url(workload_a, "prod"), bad, **HTMX).content.decode()
        assert '<div class="actions" id="save-actions" hx-swap-oob="true">' in html
        assert '<button type="submit" class="primary" id="save-policy" data-keep disabled' in html
        good = workload_post({"sensitivityCeiling": "internal"}, _validate="1")
        html = client.post(workload_url(workload_a, "prod"), good, **HTMX).content.decode()
        assert SAVE_ON in html
        assert "disabled" not in html
        # The page itself never renders it off: without JavaScript the server decides.
        page = client.post(
            workload_url(workload_a, "prod"), workload_post({"sensitivityCeiling": "restricted"})
        )
        assert page.status_code == 422
        assert SAVE_ON in page.content.decode()

    def test_the_workload_page_query_count_does_not_grow_with_versions(
        self, editor, workload_a, django_assert_num_queries
    ):
        client = client_for(editor)
        client.get(workload_url(workload_a))
        workload_policy_save(
            workload=workload_a, environment="prod", document={"confidenceMin": 0.2}, author="t"
        )
        # 10 with the row-level security scope of the signed-in user's requests
        with django_assert_num_queries(10) as first:
            client.get(workload_url(workload_a))
        for environment in ("", "dev", "prod", "staging"):
            workload_policy_save(
                workload=workload_a,
                environment=environment,
                document={"confidenceMin": 0.3},
                author="t",
            )
        with django_assert_num_queries(len(first.captured_queries)):
            assert client.get(workload_url(workload_a)).status_code == 200


@pytest.mark.django_db
class WorkloadHistoryTests:
    def history_url(self, workload: Workload, **params: Any) -> str:
        url = reverse("policies:workload-history", args=["team-a", workload.pk])
        return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")

    def save(self, workload: Workload, environment: str, budget: int) -> None:
        workload_policy_save(
            workload=workload,
            environment=environment,
            document={"totalTokenBudget": budget},
            author="t",
            comment=f"{environment or 'default'} {budget}",
        )

    def test_it_lists_every_environments_versions_with_the_environment(self, viewer, workload_a):
        self.save(workload_a, "prod", 3000)
        self.save(workload_a, "", 2900)
        self.save(workload_a, "prod", 2800)
        response = client_for(viewer).get(self.history_url(workload_a))
        entries = [
            (e.environment, e.version.version, e.current) for e in response.context["entries"]
        ]
        assert entries == [("prod", 2, True), ("", 1, True), ("prod", 1, False)]
        html = response.content.decode()
        assert '<th scope="col">Environment</th>' in html
        assert "<td>All environments (default)</td>" in html
        # Compared: the environment saved most recently, prod, v1 → v2.
        assert response.context["environment"] == "prod"
        assert [(r.axis, r.before, r.after) for r in response.context["diff"]] == [
            ("totalTokenBudget", "3,000", "2,800")
        ]

    def test_each_rows_links_and_restore_name_its_environment(self, editor, workload_a):
        self.save(workload_a, "prod", 3000)
        self.save(workload_a, "prod", 2800)
        self.save(workload_a, "", 2900)
        self.save(workload_a, "", 2700)
        response = client_for(editor).get(self.history_url(workload_a, environment=""))
        by_row = {(e.environment, e.version.version): e for e in response.context["entries"]}
        prod_v1 = by_row[("prod", 1)]
        assert prod_v1.restore_url.endswith("?environment=prod") and prod_v1.base_version == 2
        assert by_row[("prod", 2)].compare_url.endswith("?environment=prod&a=1&b=2")
        assert by_row[("", 2)].compare_url.endswith("?environment=&a=1&b=2")
        restored = client_for(editor).post(
            prod_v1.restore_url, {"version": "1", "base_version": "2"}
        )
        assert restored.status_code == 302
        latest = WorkloadPolicyVersion.objects.filter(workload=workload_a, environment="prod")
        assert latest.first().document == {"totalTokenBudget": 3000}
        assert (
            WorkloadPolicyVersion.objects.filter(workload=workload_a, environment="").count() == 2
        )

    def test_an_htmx_compare_gets_the_compare_section_of_that_environment(self, viewer, workload_a):
        self.save(workload_a, "prod", 3000)
        self.save(workload_a, "prod", 2800)
        self.save(workload_a, "", 2900)
        response = client_for(viewer).get(
            self.history_url(workload_a, environment="prod", a=1, b=2), **HTMX
        )
        html = response.content.decode()
        assert "<html" not in html and 'id="compare"' in html
        assert "Changes from v1 to v2" in html
        assert '<input type="hidden" name="environment" value="prod">' in html

    def test_an_environment_without_versions_says_so(self, viewer, workload_a):
        self.save(workload_a, "prod", 3000)
        html = client_for(viewer).get(self.history_url(workload_a, environment="dev")).content
        html = html.decode()
        assert "No versions in dev: nothing to compare." in html
        assert "prod 3000" in html  # the list still shows every environment


@pytest.mark.django_db
class SimilarityFloorPageTests:
    def test_the_floor_form_shows_it_empty_for_no_floor_and_saves_a_value_or_none(
        self, operator, workspace_a
    ):
        html = client_for(operator).get(floor_url()).content.decode()
        assert 'id="axis-similarityMin"' in html
        assert re.search(r'<input[^>]*name="ax-similarityMin"[^>]*value=""', html)
        floor = workspace_policy_current(workspace=workspace_a).document

        saved = client_for(operator).post(floor_url(), floor_post({**floor, "similarityMin": 0.3}))
        assert saved.status_code == 302
        assert workspace_policy_current(workspace=workspace_a).document["similarityMin"] == 0.3
        cleared = client_for(operator).post(
            floor_url(), floor_post({**floor, "similarityMin": None})
        )
        assert cleared.status_code == 302
        assert workspace_policy_current(workspace=workspace_a).document["similarityMin"] is None

    def test_an_out_of_range_floor_is_shown_next_to_its_field(self, operator, workspace_a):
        floor = workspace_policy_current(workspace=workspace_a).document
        response = client_for(operator).post(
            floor_url(), floor_post({**floor, "similarityMin": 1.2})
        )
        assert response.status_code == 422  # as the floor page answers any refused value
        html = response.content.decode()
        assert axis_error(html, "similarityMin").startswith("Must be between 0 and 1")

    def test_the_workload_form_shows_the_floors_value_and_refuses_a_lower_one(
        self, editor, workspace_a, workload_a
    ):
        narrowed_floor(workspace_a, similarityMin=0.3)
        html = client_for(editor).get(workload_url(workload_a, "prod")).content.decode()
        assert 'id="axis-similarityMin"' in html and "0.3" in html
        data = workload_post({"similarityMin": 0.2})
        response = client_for(editor).post(workload_url(workload_a, "prod"), data)
        assert response.status_code == 422
        assert "Wider than the operator floor (floor: 0.3)" in response.content.decode()
        saved = client_for(editor).post(
            workload_url(workload_a, "prod"), workload_post({"similarityMin": 0.45})
        )
        assert saved.status_code == 302

    def test_the_impact_preview_says_the_similarity_floor_depends_on_each_query(
        self, operator, workspace_a
    ):
        floor = workspace_policy_current(workspace=workspace_a).document
        data = floor_post({**floor, "similarityMin": 0.35}, action="preview")
        response = client_for(operator).post(floor_url(), data, **HTMX)
        html = response.content.decode()
        assert "The counts leave out the similarity floor, which depends on each query" in html
        assert "depends on each query: similarity floor 0.35 (now no floor)" in html
        [alone] = [r for r in response.context["impact_rows"] if r.workload is None]
        assert (alone.similarity_now, alone.similarity_proposed) == (None, 0.35)
