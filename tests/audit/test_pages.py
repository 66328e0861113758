"""Audit pages (list, event, exports, chain check) and the workspace dashboard."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent, EventType
from audit.presenters import presenter_for, type_groups
from audit.services import audit_event_record
from console.views import volume_chart
from policies.services import workload_policy_save
from portal.models import Workspace
from tests.helpers import database_owner
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, viewer, workload_a, made_first = module_scoped("workspace_a", "viewer", "workload_a")

HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(persona: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(persona.user)
    return client


def assembled(workspace: Workspace, workload: Any, *, n: int = 1, actor: str = "user:ada") -> None:
    """``context.assembled`` events shaped like the recall service's."""
    with transaction.atomic():
        for i in range(n):
            audit_event_record(
                workspace=workspace,
                type=EventType.ASSEMBLED,
                author="token:agent",
                workload_id=workload.id,
                environment="prod",
                actor_id=actor,
                payload={
                    "envelopeId": f"env-{i}",
                    "effectivePolicyHash": "a" * 64,
                    "effectiveBudgetHash": "b" * 64,
                    "prefixFingerprint": "c" * 64,
                    "digest": "d" * 64,
                    "tokenCounts": {
                        "entries": 120,
                        "truncatedRefs": 1,
                        "used": 620,
                        "budget": 3200,
                        "query": 4,
                        "perKind": {"memory": 120, "system_policy": 500},
                    },
                    "reused": i > 0,
                    "counts": {
                        "candidates": 9,
                        "afterPolicy": 7,
                        "afterRanking": 5,
                        "afterBudgetAllocation": 4,
                    },
                    "topK": 5,
                    "accessPath": "exact",
                },
            )


def events_url(slug: str = "team-a", **params: Any) -> str:
    url = reverse("audit:events", args=[slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


@pytest.mark.django_db
class AuditListPageTests:
    def test_every_member_reads_the_trail(self, operator, editor, viewer, workload_a):
        for persona in (operator, editor, viewer):
            response = client_for(persona).get(events_url())
            assert response.status_code == 200
            assert "context.workspace_policy_set" in response.content.decode()

    def test_an_outsider_gets_404_on_every_audit_page(self, outsider, workspace_a):
        event = AuditEvent.objects.filter(workspace=workspace_a).first()
        client = client_for(outsider)
        for name, args in (
            ("audit:events", []),
            ("audit:verify", []),
            ("audit:export-csv", []),
            ("audit:export-jsonl", []),
            ("audit:event", [event.pk]),
        ):
            assert client.get(reverse(name, args=["team-a", *args])).status_code == 404

    def test_an_event_of_another_workspace_is_404_under_this_one(self, operator, workspace_b):
        other = AuditEvent.objects.filter(workspace=workspace_b).first()
        url = reverse("audit:event", args=["team-a", other.pk])
        assert client_for(operator).get(url).status_code == 404

    def test_the_pages_are_read_only(self, operator):
        client = client_for(operator)
        assert client.post(events_url()).status_code == 405
        assert client.post(reverse("audit:export-csv", args=["team-a"])).status_code == 405

    def test_filters_narrow_the_list(self, viewer, workspace_a, workload_a):
        assembled(workspace_a, workload_a, n=2)
        assembled(workspace_a, workload_a, n=1, actor="user:bob")
        client = client_for(viewer)
        page = client.get(events_url(type="context.assembled")).context["page"]
        assert page.paginator.count == 3
        page = client.get(events_url(actor="user:bob")).context["page"]
        assert [e.actor_id for e in page] == ["user:bob"]
        page = client.get(events_url(workload=workload_a.pk, author="system:test")).context["page"]
        assert [e.type for e in page] == [EventType.WORKLOAD_CREATED]
        page = client.get(events_url(environment="prod", until="2000-01-01T00:00")).context["page"]
        assert page.paginator.count == 0

    def test_bad_filters_are_shown_next_to_their_field(self, viewer):
        response = client_for(viewer).get(events_url(since="yesterday", workload="nope"))
        assert response.status_code == 400
        html = response.content.decode()
        assert "Enter a valid date/time." in html
        assert "Enter a valid UUID." in html

    def test_it_paginates_fifty_events_a_page_keeping_the_filters(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=60)
        client = client_for(viewer)
        first = client.get(events_url(type="context.assembled"))
        assert len(first.context["rows"]) == 50
        html = first.content.decode()
        assert 'href="?type=context.assembled&amp;page=2"' in html
        second = client.get(events_url(type="context.assembled", page=2))
        assert len(second.context["rows"]) == 10

    def test_htmx_gets_the_results_fragment_only(self, viewer, workspace_a, workload_a):
        assembled(workspace_a, workload_a)
        response = client_for(viewer).get(events_url(type="context.assembled"), **HTMX)
        html = response.content.decode()
        assert "<html" not in html and 'id="results-h"' in html
        assert "4 of 9 memories · 620 of 3,200 tokens" in html
        assert "export.csv?type=context.assembled" in html

    def test_an_htmx_history_restore_gets_the_whole_page(self, viewer):
        headers = {**HTMX, "HTTP_HX_HISTORY_RESTORE_REQUEST": "true"}
        response = client_for(viewer).get(events_url(type="context.assembled"), **headers)
        assert "<html" in response.content.decode()

    def test_the_list_query_count_does_not_grow_with_events(
        self, viewer, workspace_a, workload_a, django_assert_num_queries
    ):
        client = client_for(viewer)
        client.get(events_url())
        # session, user, the user's workspaces as the row-level security scope, workspace with
        # role, workloads, count, page, environments, nav switcher
        with django_assert_num_queries(9):
            client.get(events_url())
        assembled(workspace_a, workload_a, n=70)
        with django_assert_num_queries(9):
            assert client.get(events_url()).status_code == 200
        with django_assert_num_queries(8):  # the fragment has no nav
            assert client.get(events_url(type="context.assembled", page=2), **HTMX)


@pytest.mark.django_db
class TypeFilterPageTests:
    def test_every_event_type_is_offered_once_under_its_presenters_title(self):
        offered = [(value, title) for _, types in type_groups() for value, title in types]

        assert sorted(value for value, _ in offered) == sorted(EventType.values)
        assert all(title == presenter_for(value).title for value, title in offered)
        assert ("context.workspace_policy_set", "Operator floor saved") in offered

    def test_the_page_offers_the_types_as_boxes_in_words(self, viewer):
        html = client_for(viewer).get(events_url()).content.decode()

        assert "<legend>Policies</legend>" in html
        assert (
            '<input type="checkbox" name="type" value="context.workspace_policy_set"> '
            "Operator floor saved</label>"
        ) in html
        assert 'id="type-summary">any type</span>' in html

    def test_two_types_list_both_kinds_keep_their_boxes_ticked_and_reach_the_export(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=2)
        client = client_for(viewer)
        query = "type=context.assembled&type=workload.created"

        response = client.get(f"{events_url()}?{query}")

        assert sorted({row.event.type for row in response.context["rows"]}) == [
            "context.assembled",
            "workload.created",
        ]
        html = response.content.decode()
        assert 'value="context.assembled" checked> Context assembled' in html
        assert 'value="workload.created" checked> Workload created' in html
        assert 'value="token.issued">' in html
        assert 'id="type-summary">Context assembled, Workload created</span>' in html
        assert f"export.csv?{query.replace('&', '&amp;')}" in html
        export = client.get(reverse("audit:export-jsonl", args=["team-a"]) + f"?{query}")
        lines = b"".join(export.streaming_content).decode().splitlines()
        assert sorted(json.loads(line)["type"] for line in lines) == [
            "context.assembled",
            "context.assembled",
            "workload.created",
        ]

    def test_the_pages_keep_every_type_chosen(self, viewer, workspace_a, workload_a):
        assembled(workspace_a, workload_a, n=55)
        html = (
            client_for(viewer)
            .get(f"{events_url()}?type=context.assembled&type=workload.created&type=")
            .content.decode()
        )

        assert 'href="?type=context.assembled&amp;type=workload.created&amp;page=2"' in html

    def test_htmx_updates_the_pickers_summary_with_the_results(self, viewer):
        response = client_for(viewer).get(events_url(type="context.workspace_policy_set"), **HTMX)

        html = response.content.decode()
        assert 'id="type-summary" hx-swap-oob="true">Operator floor saved</span>' in html
        assert response["HX-Push-Url"] == "/w/team-a/audit/?type=context.workspace_policy_set"

    def test_an_unknown_type_is_named_next_to_the_picker(self, viewer):
        response = client_for(viewer).get(events_url(type="the-floor"))

        assert response.status_code == 400
        html = response.content.decode()
        assert "Not an event type: “the-floor”. Tick the types in the list." in html
        assert '<details class="filter-fields type-picker" open>' in html
        export = client_for(viewer).get(
            reverse("audit:export-csv", args=["team-a"]) + "?type=the-floor"
        )
        assert export.status_code == 400
        assert "Not an event type: the-floor." in export.content.decode()


@pytest.mark.django_db
class AuditEventPageTests:
    def test_a_policy_event_shows_its_diff(self, viewer, workspace_a, workload_a):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "internal"},
            author="user:eddie",
            comment="Less for support",
        )
        event = AuditEvent.objects.get(type=EventType.WORKLOAD_POLICY_SET)
        response = client_for(viewer).get(reverse("audit:event", args=["team-a", event.pk]))
        assert response.status_code == 200
        assert [(c.key, c.label, c.after) for c in response.context["changes"]] == [
            ("sensitivityCeiling", "Sensitivity ceiling", "internal")
        ]
        html = response.content.decode()
        assert "Less for support" in html and "support-bot" in html

    def test_a_floor_event_diffs_relaxable_axes_too(self, viewer, workspace_a):
        event = AuditEvent.objects.get(type=EventType.WORKSPACE_POLICY_SET, workspace=workspace_a)
        response = client_for(viewer).get(reverse("audit:event", args=["team-a", event.pk]))
        axes = [c.key for c in response.context["changes"]]
        assert "sensitivityCeiling" in axes and "relaxableAxes" in axes

    def test_an_assembled_event_shows_hashes_counts_tokens_and_reuse(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=2)
        event = AuditEvent.objects.filter(type=EventType.ASSEMBLED).first()
        html = client_for(viewer).get(reverse("audit:event", args=["team-a", event.pk])).content
        html = html.decode()
        for text in ("a" * 64, "b" * 64, "c" * 64, "d" * 64, "After budget", "After policy"):
            assert text in html
        assert "<strong>620</strong> of 3,200 tokens used" in html
        assert '<span class="badge ok">yes</span>' in html  # the second one reused its prefix


@pytest.mark.django_db
class AuditExportTests:
    def test_csv_export_streams_the_filtered_events_as_an_attachment(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=3)
        url = reverse("audit:export-csv", args=["team-a"]) + "?type=context.assembled"
        response = client_for(viewer).get(url)
        assert response.status_code == 200 and response.streaming
        assert response["Content-Type"].startswith("text/csv")
        assert response["Content-Disposition"].startswith('attachment; filename="audit-team-a-')
        rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
        assert rows[0][:3] == ["id", "type", "occurredAt"]
        assert len(rows) == 4
        assert {row[1] for row in rows[1:]} == {"context.assembled"}
        assert json.loads(rows[1][8])["topK"] == 5

    def test_csv_gives_the_common_payload_fields_their_own_columns(
        self, viewer, workspace_a, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "internal", "confidenceMin": 0.4},
            author="user:eddie",
            comment="Less for support",
        )
        assembled(workspace_a, workload_a, n=2)
        url = reverse("audit:export-csv", args=["team-a"])
        response = client_for(viewer).get(url)
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
        by_type: dict[str, list[dict[str, str]]] = {}
        for row in rows:
            by_type.setdefault(row["type"], []).append(row)

        newest, oldest = by_type["context.assembled"]
        assert newest["envelopeId"] == "env-1" and newest["topK"] == "5"
        assert (newest["reused"], oldest["reused"]) == ("true", "false")
        assert newest["counts.candidates"] == "9" and newest["counts.afterPolicy"] == "7"
        assert newest["counts.afterBudgetAllocation"] == "4"
        assert (newest["tokenCounts.used"], newest["tokenCounts.budget"]) == ("620", "3200")
        assert newest["accessPath"] == "exact" and newest["version"] == ""
        [policy] = by_type["context.workload_policy_set"]
        assert policy["version"] == "1" and policy["comment"] == "Less for support"
        assert policy["changed"] == "confidenceMin sensitivityCeiling"  # the algebra's order
        assert policy["floorVersion"] == "1" and policy["topK"] == ""
        [token] = [r for r in by_type["token.issued"] if r["name"] == "vera-token"]
        assert token["role"] == "viewer" and token["prefix"].startswith("crp_")
        [created] = by_type["workload.created"]
        assert created["name"] == "support-bot"
        # the API's columns first, as they were, the JSON payload still among them
        assert list(rows[0])[:11] == [
            "id", "type", "occurredAt", "workspace", "author", "workloadId", "environment",
            "actorId", "payload", "query", "prevHash",
        ]  # fmt: skip
        assert json.loads(newest["payload"])["envelopeId"] == "env-1"

    def test_jsonl_export_has_the_api_shape(self, viewer, workspace_a, workload_a):
        assembled(workspace_a, workload_a, n=2)
        url = reverse("audit:export-jsonl", args=["team-a"]) + "?actor=user:ada"
        response = client_for(viewer).get(url)
        assert response["Content-Disposition"].endswith('.jsonl"')
        lines = b"".join(response.streaming_content).decode().splitlines()
        events = [json.loads(line) for line in lines]
        assert len(events) == 2
        assert events[0]["actorId"] == "user:ada" and events[0]["workspace"] == "team-a"
        assert events[0]["workloadId"] == str(workload_a.pk)
        assert set(events[0]) >= {"id", "type", "occurredAt", "payload", "prevHash", "hash"}

    def test_a_bad_filter_is_a_400_not_an_empty_file(self, viewer):
        url = reverse("audit:export-csv", args=["team-a"]) + "?since=soon"
        response = client_for(viewer).get(url)
        assert response.status_code == 400
        assert "since" in response.content.decode()


@pytest.mark.django_db
class ChainVerificationPageTests:
    def test_an_intact_chain_is_reported(self, viewer, workspace_a, workload_a):
        response = client_for(viewer).get(reverse("audit:verify", args=["team-a"]), **HTMX)
        html = response.content.decode()
        # the floor, the viewer's token, the workload
        assert "chain intact" in html and "all 3 events checked" in html

    def test_the_lazy_check_reads_only_what_was_appended_since(
        self, viewer, workspace_a, workload_a
    ):
        client = client_for(viewer)
        url = reverse("audit:verify", args=["team-a"])
        client.get(url, **HTMX)  # the first check walks everything and leaves a checkpoint
        assembled(workspace_a, workload_a, n=2)

        html = client.get(url, **HTMX).content.decode()

        assert "chain intact" in html
        assert "5 events: the 2 appended since the last check were checked" in html
        assert "the earlier ones held when every event was last checked, at" in html
        assert f'hx-get="{url}?full=1"' in html  # "Check every event"
        again = client.get(url, **HTMX).content.decode()
        assert "5 events: none appended since the last check; they all held" in again
        full = client.get(url + "?full=1", **HTMX).content.decode()
        assert "all 5 events checked" in full

    def test_a_tampered_event_is_reported_as_the_first_broken_link(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=3)
        victim = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("id")[1]
        with database_owner():  # the application may not change audit rows
            AuditEvent.objects.filter(pk=victim.pk).update(author="someone-else")
        response = client_for(viewer).get(reverse("audit:verify", args=["team-a"]))
        assert response.status_code == 200
        html = response.content.decode()
        assert "chain broken" in html
        assert f'href="/w/team-a/audit/{victim.pk}/">event #{victim.pk}</a>' in html


@pytest.mark.django_db
class DashboardPageTests:
    def test_every_member_sees_the_dashboard_and_an_outsider_gets_404(
        self, operator, editor, viewer, outsider
    ):
        for persona in (operator, editor, viewer):
            assert client_for(persona).get("/w/team-a/").status_code == 200
        assert client_for(outsider).get("/w/team-a/").status_code == 404

    def test_it_shows_compliance_per_environment_and_links_recent_events(
        self, viewer, workspace_a, workload_a
    ):
        from policies.selectors import workspace_policy_current
        from policies.services import workspace_policy_save

        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "confidential"},
            author="user:eddie",
        )
        floor = workspace_policy_current(workspace=workspace_a)
        workspace_policy_save(
            workspace=workspace_a,
            document={**floor.document, "sensitivityCeiling": "internal", "relaxableAxes": []},
            author="user:olga",
            comment="Test floor",
        )
        response = client_for(viewer).get("/w/team-a/")
        html = response.content.decode()
        row = response.context["compliance"][0]
        assert [(c.environment, c.compliant) for c in row.cells] == [
            ("", True),
            ("dev", True),
            ("prod", False),
            ("staging", True),
        ]
        assert "1 workload non-compliant" in html
        assert "Narrow to floor" not in html
        latest = AuditEvent.objects.filter(workspace=workspace_a).first()
        assert f'href="/w/team-a/audit/{latest.pk}/"' in html

    def test_the_recall_volume_chart_counts_assembled_events_per_day(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=3)
        chart = client_for(viewer).get("/w/team-a/").context["chart"]
        assert len(chart["bars"]) == 14
        assert chart["bars"][-1].count == 3 and chart["total"] == 3

    def test_the_chart_scales_bars_to_the_busiest_day(self):
        today = date(2025, 3, 14)
        chart = volume_chart({date(2025, 3, 14): 4, date(2025, 3, 10): 2}, today)
        heights = {bar.day: bar.height for bar in chart["bars"]}
        assert heights[date(2025, 3, 14)] == 2 * heights[date(2025, 3, 10)]
        assert chart["bars"][0].day == date(2025, 3, 1) and chart["peak"] == 4

    def test_the_dashboard_query_count_does_not_grow(
        self, viewer, workspace_a, workload_a, django_assert_num_queries
    ):
        client = client_for(viewer)
        client.get("/w/team-a/")
        # 12 with the row-level security scope of the signed-in user's requests and the
        # compaction panel's one grouped count
        with django_assert_num_queries(12):
            client.get("/w/team-a/")
        assembled(workspace_a, workload_a, n=20)
        for env in ("dev", "prod"):
            workload_policy_save(
                workload=workload_a, environment=env, document={"confidenceMin": 0.1}, author="t"
            )
        compacted_sessions(workload_a, n=3)
        with django_assert_num_queries(12):
            assert client.get("/w/team-a/").status_code == 200


def compacted_sessions(workload: Any, n: int) -> None:
    """``n`` sessions with one manual compaction run each."""
    from chat.services import compaction_request, session_create, session_turns_post
    from recall.layout.services import layout_config_save

    layout_config_save(
        workload=workload, document={"memory": {"compaction": {"enabled": True}}}, author="t"
    )
    for _ in range(n):
        session = session_create(
            workspace=workload.workspace, actor_id="user:ada", workload_id=workload.id,
            environment="prod", author="t",
        )  # fmt: skip
        session_turns_post(
            session=session, messages=[{"role": "user", "content": "release?"}], author="t"
        )
        compaction_request(session=session, author="t")


def test_the_list_names_changed_axes_in_the_algebras_order_not_jsonbs():
    from audit.presenters import summary

    event = AuditEvent(
        type=EventType.WORKLOAD_POLICY_SET,
        payload={"version": 2, "diff": {"totalTokenBudget": {}, "memoryTypeAllowed": {}}},
    )
    assert summary(event) == "v2: Memory types allowed, Total token budget"
