"""Compaction on the pages: a session's runs (trigger, severity, outcome, tokens before and
after, time against its budget, errors), "Compact now" for editors and operators, the
dashboard's panel counting runs by outcome over 14 days, and the audit event in words."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent, EventType
from chat.models import CompactionRun, Session
from tests.chat.helpers import layout, started, turn

pytestmark = pytest.mark.django_db


def client_for(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


@pytest.fixture
def session(editor, workload_a) -> dict[str, Any]:
    layout(workload_a, {"compaction": {"enabled": True}})
    created = started(editor, workload_a)
    turn(editor, created["id"], ("user", "release notes?"))
    return created


def page_of(persona: Any, session: dict[str, Any]) -> str:
    response = client_for(persona).get(f"/w/team-a/sessions/{session['id']}/")
    assert response.status_code == 200
    return response.content.decode()


def add_run(session_id: str, **fields: Any) -> CompactionRun:
    stored = Session.objects.get(pk=session_id)
    values: dict[str, Any] = dict(
        workspace=stored.workspace, session=stored, trigger="automatic", reason="severity",
        severity="warning", config={}, service="compaction", time_budget_ms=15000,
        target_utilization=0.7, author="system:compaction", status="succeeded",
    )  # fmt: skip
    values.update(fields)
    return CompactionRun.objects.create(**values)


class CompactNowTests:
    def test_an_editor_compacts_from_the_session_page(self, editor, session):
        client = client_for(editor)
        assert "Compact now" in page_of(editor, session)

        response = client.post(f"/w/team-a/sessions/{session['id']}/compact/", follow=True)

        run = CompactionRun.objects.get()
        assert (run.trigger, run.author) == ("manual", "user:eddie")
        page = response.content.decode()
        assert f"Compaction run {run.pk} finished: target met." in page
        assert f'id="run-{run.pk}"' in page and "manual" in page

    def test_a_viewer_sees_the_runs_but_no_button_and_cannot_post(self, editor, viewer, session):
        client_for(editor).post(f"/w/team-a/sessions/{session['id']}/compact/")

        assert "Compact now" not in page_of(viewer, session)
        response = client_for(viewer).post(f"/w/team-a/sessions/{session['id']}/compact/")
        assert response.status_code == 403
        assert CompactionRun.objects.count() == 1

    def test_an_outsider_gets_404(self, outsider, session):
        response = client_for(outsider).post(f"/w/team-a/sessions/{session['id']}/compact/")

        assert response.status_code == 404
        assert not CompactionRun.objects.exists()

    def test_a_refusal_is_said_in_words_and_starts_nothing(self, editor, workload_a, session):
        layout(workload_a, {"compaction": {"enabled": False}})

        response = client_for(editor).post(
            f"/w/team-a/sessions/{session['id']}/compact/", follow=True
        )

        page = response.content.decode()
        assert "Nothing was compacted: Compaction is disabled" in page
        assert "disabled" in page and not CompactionRun.objects.exists()


class RunListTests:
    def test_the_session_page_lists_each_runs_outcome(self, viewer, session):
        add_run(
            session["id"], target_met=True, tokens_before=920, tokens_after=610,
            utilization_before=92.0, utilization_after=61.0, duration_ms=40,
            turns_summarised=[1, 2, 3, 4], summary_ids=[], available_budget=1000,
        )  # fmt: skip
        add_run(
            session["id"], status="failed", severity="critical", time_budget_ms=45000,
            error_code="SUMMARIZER_HTTP_ERROR", error="The service answered HTTP 500.",
            duration_ms=120,
        )  # fmt: skip
        add_run(
            session["id"], target_met=False, time_budget_exhausted=True, duration_ms=16020,
            tokens_before=990, tokens_after=900, utilization_before=99.0,
            utilization_after=90.0, available_budget=1000,
        )  # fmt: skip

        page = page_of(viewer, session)

        assert "920 (92.0%) → 610 (61.0%)" in page and "target met" in page
        assert "40 ms / 15000 ms" in page and "1–4 (4)" in page
        assert "failed" in page and "SUMMARIZER_HTTP_ERROR: The service answered HTTP 500." in page
        assert "time budget exhausted" in page and "16020 ms / 15000 ms" in page
        assert "not a language model" in page

    def test_a_run_in_flight_makes_the_section_refresh_itself(self, viewer, session):
        run = add_run(session["id"], status="running")
        Session.objects.filter(pk=session["id"]).update(compaction_run=run)

        page = page_of(viewer, session)

        assert 'hx-trigger="every 2s"' in page and "still running" in page
        fragment = client_for(viewer).get(
            f"/w/team-a/sessions/{session['id']}/",
            headers={"HX-Request": "true", "HX-Target": "compaction"},
        )
        assert fragment.content.decode().lstrip().startswith('<section class="card compaction')


class DashboardPanelTests:
    def test_it_counts_the_last_14_days_runs_by_outcome(self, viewer, session):
        add_run(session["id"], target_met=True)
        add_run(session["id"], target_met=True)
        add_run(session["id"], target_met=False)
        add_run(session["id"], status="failed")
        old = add_run(session["id"], status="failed")
        CompactionRun.objects.filter(pk=old.pk).update(
            created_at=timezone.now() - timedelta(days=20)
        )

        page = client_for(viewer).get("/w/team-a/").content.decode()

        assert "Compaction runs per day by outcome" in page
        desc = re.search(r'<desc id="compaction-desc">([^<]*)</desc>', page).group(1)
        assert desc.startswith("2 target met, 1 target missed, 1 failed from ")
        assert "4 runs: 2 met the target" in page and "2 did not" in page
        assert page.count('data-outcome="target_met"') == 1  # one day, one segment

    def test_no_run_says_how_runs_start(self, viewer):
        page = client_for(viewer).get("/w/team-a/").content.decode()

        assert "No compaction run yet" in page


class AuditWordsTests:
    def test_the_event_page_says_the_outcome_in_words(self, editor, viewer, session):
        client_for(editor).post(f"/w/team-a/sessions/{session['id']}/compact/")
        event = AuditEvent.objects.get(type=EventType.COMPACTED)

        page = client_for(viewer).get(f"/w/team-a/audit/{event.pk}/").content.decode()

        assert "Session compacted" in page
        assert "by hand" in page and "target met" in page
        assert f"#{session['id']}" in page
        listing = client_for(viewer).get("/w/team-a/audit/").content.decode()
        assert f"session #{session['id']}, manual: target met; 0 turns summarised" in listing


class SummaryMemoryPageTests:
    def test_a_summary_memorys_page_names_its_run_and_session(self, viewer, workload_a):
        from tests.chat.compaction_support import compacting, start, talk_until_compacted
        from tests.chat.helpers import roomy_floor

        roomy_floor(workload_a.workspace)
        compacting(workload_a)
        session = start(workload_a)
        run = talk_until_compacted(session).run

        page = client_for(viewer).get(f"/w/team-a/memories/{run.summary_ids[0]}/")

        text = page.content.decode()
        assert "Made by compaction" in text
        assert "One of the 2 summaries" in text and "turns 1–8 of" in text
        assert f"session #{session.pk}" in text
        assert f"compaction run #{run.pk}" in text
