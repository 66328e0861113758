"""Audit pages in a real browser: filtering, the chain check, the CSV export, the dashboard."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import transaction
from playwright.sync_api import expect

from audit.models import EventType
from audit.services import audit_event_record
from policies.services import workload_policy_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # PBKDF2 costs over a second per persona here; these pages do not care how it is hashed.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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
        page.get_by_label("Workload").select_option(label="support-bot")
        page.get_by_label("Type").select_option("context.workload_policy_set")
        page.wait_for_url("**?type=context.workload_policy_set&workload=*")
        expect(page.locator("table.events tbody tr")).to_have_count(1)
        expect(page.locator("#results")).to_contain_text("Only confident memories")
        shot(page, "audit-trail")

        with page.expect_download() as info:
            page.get_by_role("link", name="CSV", exact=True).click()
        download = info.value
        assert download.suggested_filename.startswith("audit-team-a-")
        rows = list(csv.reader(io.StringIO(open(download.path(), encoding="utf-8").read())))
        assert rows[0] == [
            "id",
            "type",
            "occurredAt",
            "workspace",
            "author",
            "workloadId",
            "environment",
            "actorId",
            "payload",
            "prevHash",
            "hash",
        ]
        assert len(rows) == 2
        data = dict(zip(rows[0], rows[1], strict=True))
        assert data["type"] == "context.workload_policy_set"
        assert data["author"] == "user:eddie" and data["environment"] == "prod"
        assert data["workloadId"] == str(workload_a.pk)

    def test_an_assembled_event_and_the_dashboard_chart(
        self, page, live_server, login, operator, workspace_a, workload_a, shot
    ):
        recall_events(workspace_a, workload_a, 4)
        login(page, "olga", "pw-olga")
        chart = page.locator("svg.bars")
        assert "4 contexts assembled" in chart.locator("desc").text_content()
        shot(page, "dashboard-chart")
        page.locator(".event-list a").first.click()
        page.get_by_role("heading", name="Assembled context").wait_for()
        assert page.locator("code.hash").get_by_text("c" * 64).is_visible()
        shot(page, "audit-event-assembled")
