"""Audit pages in a real browser: filtering, the chain check, the CSV export, the dashboard,
and each kind of event page read in words (with the sandbox reached from a recall's event)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from audit.models import AuditEvent, EventType
from audit.services import audit_event_record
from maintenance.services import lifecycle_settings_patch, maintenance_start
from policies import labels
from policies.services import workload_policy_save, workload_update, workspace_store_queries_set
from recall.erasure import actor_erase
from recall.services import memory_update
from tests.browser.pages import a_recalled_memory, wider_than_the_screen
from tests.helpers import QUERY
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def recall_events(workspace, workload, n: int) -> None:
    with transaction.atomic():
        for i in range(n):
            audit_event_record(
                workspace=workspace,
                type=EventType.ASSEMBLED,
                author="token:agent",
                workload_id=workload.id,
                environment="prod",
                actor_id="user:ada",
                payload={
                    "envelopeId": f"env-{i}",
                    "effectivePolicyHash": "a" * 64,
                    "effectiveBudgetHash": "b" * 64,
                    "prefixFingerprint": "c" * 64,
                    "digest": "d" * 64,
                    "tokenCounts": {"entries": 90, "used": 590, "budget": 3200, "query": 3},
                    "reused": i > 0,
                    "counts": {"candidates": 8, "afterPolicy": 6, "afterBudgetAllocation": 3},
                    "topK": 5,
                },
            )


class AuditTrailTests:
    def test_the_filtered_trail_exports_as_csv(
        self, page, live_server, login, viewer, workspace_a, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"confidenceMin": 0.3},
            author="user:eddie",
            comment="Only confident memories",
        )
        recall_events(workspace_a, workload_a, 3)
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/audit/")
        page.locator("#chain").get_by_text("chain intact").wait_for()
        page.get_by_label("Workload", exact=True).select_option(label="support-bot")
        page.get_by_text("Event types:").click()
        page.get_by_label("Workload policy saved").check()
        page.wait_for_url("**?type=context.workload_policy_set&workload=*")
        expect(page.locator("table.events tbody tr")).to_have_count(1)
        expect(page.locator("#results")).to_contain_text(
            "v1 created: Minimum confidence — “Only confident memories”"
        )
        shot(page, "audit-trail")

        with page.expect_download() as info:
            page.get_by_role("link", name="CSV", exact=True).click()
        download = info.value
        assert download.suggested_filename.startswith("audit-team-a-")
        rows = list(csv.reader(io.StringIO(open(download.path(), encoding="utf-8").read())))
        # the API's columns, as before, then the payload's fields of their own
        assert rows[0][:11] == [
            "id",
            "type",
            "occurredAt",
            "workspace",
            "author",
            "workloadId",
            "environment",
            "actorId",
            "payload",
            "query",
            "prevHash",
        ]
        assert {"version", "comment", "changed", "topK", "tokenCounts.used"} <= set(rows[0])
        assert len(rows) == 2
        data = dict(zip(rows[0], rows[1], strict=True))
        assert data["type"] == "context.workload_policy_set"
        assert data["author"] == "user:eddie" and data["environment"] == "prod"
        assert data["workloadId"] == str(workload_a.pk)
        assert data["version"] == "1" and data["comment"] == "Only confident memories"
        assert data["changed"] == "confidenceMin" and data["topK"] == ""

    def test_the_list_keeps_each_time_on_one_line(
        self, page, live_server, login, viewer, workspace_a, workload_a, shot
    ):
        workload_update(
            workload=workload_a,
            author="user:olga",
            description="Answers support tickets about releases, billing and the status page",
        )
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"confidenceMin": 0.3, "sensitivityCeiling": "internal", "maxAgeSeconds": 60},
            author="user:eddie",
            comment="Only confident memories, and nothing confidential for the support bot",
        )
        recall_events(workspace_a, workload_a, 2)
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/audit/")
        page.locator("#chain").get_by_text("chain intact").wait_for()
        rows = page.locator("table.events tbody tr")
        expect(rows.first).to_be_visible()
        for n in range(rows.count()):
            one_line = rows.nth(n).locator("td a").first.bounding_box()["height"]  # the "#"
            box = rows.nth(n).locator("td time").bounding_box()
            assert box["height"] <= one_line + 1, rows.nth(n).inner_text()
        expect(page.locator("#results")).to_contain_text("3 of 8 memories · 590 of 3,200 tokens")
        expect(page.locator("#results")).to_contain_text("description: (empty) → Answers support")
        shot(page, "audit-trail-all")

    def test_an_assembled_event_reads_in_words_first_and_the_dashboard_chart(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        recall_events(workspace_a, workload_a, 4)
        login(page, "olga", "pw-olga")
        chart = page.locator("svg.bars")
        assert "4 contexts assembled" in chart.locator("desc").text_content()
        shot(page, "dashboard-chart")
        page.locator(".event-list a").first.click()
        page.get_by_role("heading", name="Context assembled").wait_for()
        request = page.get_by_role("region", name="Request")
        expect(request).to_contain_text("support-bot")
        expect(request).to_contain_text("user:ada")
        steps = page.get_by_role("list", name="Counts funnel").get_by_role("listitem")
        expect(steps).to_have_text(
            ["8 Candidates", "6 After policy", "3 After budget"], use_inner_text=True
        )
        expect(page.get_by_role("region", name="Tokens")).to_contain_text(
            "590 of 3,200 tokens used"
        )
        expect(page.get_by_text(labels.TERM_HINTS["prefixFingerprint"])).to_be_visible()
        expect(page.get_by_text(labels.TERM_HINTS["digest"])).to_be_visible()
        expect(page.get_by_text(labels.TERM_HINTS["reused"])).to_be_visible()
        assert page.locator("code.hash").get_by_text("c" * 64).is_visible()
        # the chain's links are folded away until asked for
        event = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("-id").first()
        chain_hash = page.locator("#chain code.hash").get_by_text(event.hash)
        expect(chain_hash).to_be_hidden()
        shot(page, "audit-event-assembled")
        page.locator("#chain summary").click()
        expect(chain_hash).to_be_visible()
        expect(page.locator("#chain")).to_contain_text(event.prev_hash)
        shot(page, "audit-event-chain-open")

    def test_an_assembled_event_opens_the_same_request_in_the_sandbox(
        self, page, live_server, login, editor, workspace_a, workload_a, shot
    ):
        workspace_store_queries_set(workspace=workspace_a, enabled=True, author="user:olga")
        factories.memories(
            workspace_a, *({"content": f"release summary preferences {n}"} for n in range(3))
        )
        response = editor.api().post(
            "/v1/memory/actors/user:ada/recall",
            {"workloadId": str(workload_a.id), "environment": "staging", "query": QUERY, "topK": 2},
            format="json",
        )
        assert response.status_code == 200, response.content
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)

        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/audit/{event.pk}/")
        expect(page.get_by_role("region", name="Request")).to_contain_text(f"“{QUERY}”")
        shot(page, "audit-event-assembled-real")
        page.get_by_role("link", name="Open this request in the sandbox").click()
        page.wait_for_url("**/sandbox/?*")
        expect(page.locator("#id_actor")).to_have_value("user:ada")
        expect(page.get_by_label("Workload")).to_have_value(str(workload_a.pk))
        expect(page.get_by_label("Environment")).to_have_value("staging")
        expect(page.get_by_label("Top K")).to_have_value("2")
        expect(page.get_by_label("Query")).to_have_value(QUERY)
        page.get_by_role("button", name="Run recall").click()
        page.locator("#sandbox-result").wait_for()
        again = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("-id").first()
        assert again.pk != event.pk
        assert (again.environment, again.actor_id, again.payload["topK"]) == (
            "staging",
            "user:ada",
            2,
        )
        assert again.payload["memoryIds"] == event.payload["memoryIds"]
        shot(page, "audit-event-sandbox-prefilled")


class TypeFilterTests:
    def test_two_types_picked_in_words_list_both_kinds_kept_in_the_url_and_the_export(
        self, page, live_server, login, viewer, workspace_a, workload_a, shot
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"confidenceMin": 0.3},
            author="user:eddie",
            comment="Only confident memories",
        )
        recall_events(workspace_a, workload_a, 2)
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/audit/")
        picker = page.locator("details.type-picker")
        expect(picker).not_to_have_attribute("open", "")
        page.get_by_text("Event types:").click()
        expect(picker.locator("legend")).to_have_text(
            ["Policies", "Contexts and sessions", "Memories", "Maintenance",
             "Workspace and workloads", "Tokens and members"]
        )  # fmt: skip
        page.get_by_label("Operator floor saved").check()
        page.wait_for_url("**/audit/?type=context.workspace_policy_set")
        page.get_by_label("Context assembled").check()
        page.wait_for_url("**/audit/?type=context.workspace_policy_set&type=context.assembled")

        rows = page.locator("table.events tbody tr")
        expect(rows).to_have_count(3)
        expect(page.locator("table.events td.type a")).to_have_text(
            ["Context assembled", "Context assembled", "Operator floor saved"]
        )
        expect(page.locator("#type-summary")).to_have_text(
            "Operator floor saved, Context assembled"
        )
        shot(page, "audit-types-1280")

        # The URL keeps the choice: opened again, the picker (folded, so that the events
        # come first) names the types, and the same boxes are ticked, the rest not.
        page.goto(page.url)
        expect(page.locator("#type-summary")).to_have_text(
            "Operator floor saved, Context assembled"
        )
        expect(picker).not_to_have_attribute("open", "")
        page.get_by_text("Event types:").click()
        expect(page.get_by_label("Operator floor saved")).to_be_checked()
        expect(page.get_by_label("Context assembled")).to_be_checked()
        expect(page.get_by_label("Workload policy saved")).not_to_be_checked()
        expect(rows).to_have_count(3)

        with page.expect_download() as info:
            page.get_by_role("link", name="CSV", exact=True).click()
        exported = list(
            csv.DictReader(io.StringIO(open(info.value.path(), encoding="utf-8").read()))
        )
        assert [row["type"] for row in exported] == [
            "context.assembled",
            "context.assembled",
            "context.workspace_policy_set",
        ]

        # Unticking one narrows the list again; on a phone the picker fits the screen.
        page.get_by_label("Context assembled").uncheck()
        page.wait_for_url("**/audit/?type=context.workspace_policy_set")
        expect(rows).to_have_count(1)
        page.set_viewport_size({"width": 390, "height": 844})
        assert wider_than_the_screen(page) == []
        shot(page, "audit-types-390")

    def test_a_memory_s_history_labels_its_contexts_and_its_changes(
        self, page, live_server, login, editor, viewer, workload_a, shot
    ):
        memory, _ = a_recalled_memory(editor, workload_a)
        memory_update(memory=memory, changes={"sensitivity": "confidential"}, author="user:eddie")
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/audit/?memory={memory.pk}")

        expect(page.locator("table.events td.relation")).to_have_text(["changed", "in a context"])
        expect(page.locator("table.events td.type a")).to_have_text(
            ["Memories changed", "Context assembled"]
        )
        shot(page, "audit-memory-history-1280")
        page.set_viewport_size({"width": 390, "height": 844})
        assert wider_than_the_screen(page) == []
        shot(page, "audit-memory-history-390")


class PolicyEventPageTests:
    def test_a_first_version_reads_as_created_and_a_later_one_as_a_change(
        self, page, live_server, login, viewer, workspace_a, workload_a, shot
    ):
        for ceiling, comment in (("internal", "Support sees internal only"), ("public", "")):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"sensitivityCeiling": ceiling, "maxAgeSeconds": 604_800},
                author="user:eddie",
                comment=comment,
            )
        floor = AuditEvent.objects.get(type=EventType.WORKSPACE_POLICY_SET, workspace=workspace_a)
        first, second = AuditEvent.objects.filter(type=EventType.WORKLOAD_POLICY_SET).order_by("id")
        login(page, "vera", "pw-vera")

        page.goto(f"{live_server.url}/w/team-a/audit/{floor.pk}/")
        expect(page.get_by_role("heading", name="Operator floor version 1 created")).to_be_visible()
        expect(page.locator("table.diff td.before")).to_have_count(0)
        expect(page.locator("table.diff")).to_contain_text("Relaxable axes")
        shot(page, "audit-event-floor-created")

        page.goto(f"{live_server.url}/w/team-a/audit/{first.pk}/")
        expect(
            page.get_by_role("heading", name="Workload policy version 1 created")
        ).to_be_visible()
        expect(page.locator("table.diff td.before")).to_have_count(0)
        expect(page.locator("table.diff")).to_contain_text("Maximum age")
        expect(page.locator("table.diff")).to_contain_text("7 days")
        expect(page.get_by_text("every other axis inherits the floor")).to_be_visible()
        shot(page, "audit-event-policy-created")

        page.get_by_role("link", name=f"#{second.pk} →").click()
        expect(page.get_by_role("heading", name="Workload policy version 2")).to_be_visible()
        row = page.locator("table.diff tbody tr")
        expect(row).to_have_count(1)
        expect(row.locator("td.before")).to_have_text("internal")
        expect(row.locator("td.after")).to_have_text("public")
        shot(page, "audit-event-policy-change")


class OtherEventPageTests:
    def test_token_workload_memory_and_maintenance_events_show_their_fields(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        memory = factories.memory(workspace_a, "prefers short answers")
        memory_update(memory=memory, changes={"sensitivity": "confidential"}, author="user:eddie")
        workload_update(workload=workload_a, author="user:olga", description="Answers tickets")
        factories.memory(
            workspace_a, "an old offer", expires_at=timezone.now() - timedelta(hours=1)
        )
        run = maintenance_start(
            workspace=workspace_a, sweep="expiry", mode="preview", author="user:olga"
        )
        token = AuditEvent.objects.get(type=EventType.TOKEN_ISSUED, payload__name="olga-token")
        login(page, "olga", "pw-olga")

        def open_event(type: str) -> None:
            pk = AuditEvent.objects.filter(type=type).order_by("-id").first().pk
            page.goto(f"{live_server.url}/w/team-a/audit/{pk}/")

        page.goto(f"{live_server.url}/w/team-a/audit/{token.pk}/")
        details = page.get_by_role("region", name="Details")
        expect(page.get_by_role("heading", name="API token issued")).to_be_visible()
        expect(details).to_contain_text("olga-token")
        expect(details).to_contain_text("operator")
        expect(details).to_contain_text(f"{token.payload['prefix']}…")
        shot(page, "audit-event-token")

        open_event(EventType.WORKLOAD_UPDATED)
        expect(page.get_by_role("heading", name="Workload changed")).to_be_visible()
        expect(details).to_contain_text("(empty) → Answers tickets")
        shot(page, "audit-event-workload")

        open_event(EventType.MEMORY_CHANGED)
        expect(details).to_contain_text("sensitivity")
        details.get_by_role("link", name=f"#{memory.pk}").click()
        page.wait_for_url(f"**/memories/{memory.pk}/")
        page.go_back()
        shot(page, "audit-event-memory")

        open_event(EventType.MAINTENANCE_PREVIEWED)
        expect(details).to_contain_text("Expiry")
        expect(details).to_contain_text("1 listed")
        expect(details.get_by_role("link", name=f"#{run.pk}")).to_be_visible()
        shot(page, "audit-event-maintenance")

    def test_settings_and_erasure_events_show_their_fields(
        self, page, live_server, login, operator, workspace_a, shot
    ):
        lifecycle_settings_patch(
            workspace=workspace_a,
            changes={"retentionDays": 60, "decayLongTerm": True},
            author="user:olga",
            comment="Keep stale memories longer",
        )
        workspace_store_queries_set(workspace=workspace_a, enabled=True, author="user:olga")
        rows = factories.memories(workspace_a, {"content": "a"}, {"content": "b"})
        actor_erase(workspace=workspace_a, actor_id="user:ada", author="user:olga")
        login(page, "olga", "pw-olga")

        def open_event(type: str) -> None:
            pk = AuditEvent.objects.filter(type=type).order_by("-id").first().pk
            page.goto(f"{live_server.url}/w/team-a/audit/{pk}/")

        open_event(EventType.LIFECYCLE_SETTINGS_SET)
        change = page.get_by_role("region", name="Lifecycle settings version")
        retention = change.locator("tr", has_text="Retention of stale memories")
        expect(retention.locator("td.after")).to_have_text("60 days")
        expect(change).to_contain_text("Keep stale memories longer")
        shot(page, "audit-event-lifecycle-settings")

        open_event(EventType.WORKSPACE_SETTINGS_SET)
        details = page.get_by_role("region", name="Details")
        expect(details).to_contain_text("not stored (a salted hash only) → stored")
        shot(page, "audit-event-workspace-setting")

        open_event(EventType.MEMORY_ERASED)
        expect(page.get_by_role("heading", name="Actor erased")).to_be_visible()
        expect(details).to_contain_text("2 memories")
        for row in rows:  # gone, so named without a link
            expect(details.get_by_text(f"#{row.pk}", exact=True)).to_be_visible()
            expect(details.get_by_role("link", name=f"#{row.pk}")).to_have_count(0)
        shot(page, "audit-event-erasure")
