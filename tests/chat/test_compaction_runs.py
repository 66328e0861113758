"""Compaction runs, without a broker (the task runs at once, as every task does then): a session
driven to warning is compacted into ``summary`` memories of the actor, governed like any
memory; its summarised turns leave the history; the target is honest; the actor's duplicate
insights are superseded by the dedup sweep's rule; promotion follows the workspace's
schedule; a failure leaves the session as it was; a run is processed once."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction

from audit.models import AuditEvent, EventType
from chat.models import CompactionRun, Session, Turn
from maintenance.compaction import compaction_run_process
from maintenance.services import lifecycle_settings_patch
from policies.services import workload_policy_save
from recall.erasure import actor_erase
from recall.models import MemoryRecord
from tests.chat.compaction_support import (
    ANSWER,
    QUESTION,
    compacting,
    post,
    start,
    talk_until_compacted,
)
from tests.chat.helpers import roomy_floor
from tests.maintenance.helpers import ago, memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted(workload_a):
    """A session talked to warning, compacted once: (session, the answer that asked)."""
    roomy_floor(workload_a.workspace)
    compacting(workload_a)
    session = start(workload_a)
    return session, talk_until_compacted(session)


class CompactionRunTests:
    def test_a_session_at_warning_is_compacted_into_summary_memories(self, compacted):
        session, posted = compacted
        run = posted.run

        assert (run.status, run.trigger, run.severity, run.reason) == (
            "succeeded", "automatic", "warning", "severity",
        )  # fmt: skip
        assert run.turns_summarised == [1, 2, 3, 4, 5, 6, 7, 8]
        summaries = MemoryRecord.objects.filter(pk__in=run.summary_ids).order_by("pk")
        assert len(summaries) == 2  # four turns per summary
        for summary in summaries:
            assert (summary.memory_type, summary.source_kind, summary.confirmation_status) == (
                "summary", "system", "inferred",
            )  # fmt: skip
            assert summary.actor.external_id == "user:ada"
            assert summary.embedding_model  # embedded like any memory
        assert summaries[0].content.startswith("Earlier in this conversation (turns 1-4):")
        assert set(Turn.objects.filter(compacted_by=run).values_list("index", flat=True)) == set(
            run.turns_summarised
        )
        assert Session.objects.get(pk=session.pk).compaction_run is None

    def test_the_summaries_enter_the_next_turn_and_the_turns_leave_its_history(self, compacted):
        session, posted = compacted

        after = post(session, ("user", "And the dates?")).context

        parts = after.parts
        assert {p["turn"] for p in parts if p["kind"] == "history"}.isdisjoint(range(1, 9))
        summaries = [p for p in parts if p.get("section") == "summaries"]
        assert {p["memoryId"] for p in summaries} == {str(pk) for pk in posted.run.summary_ids}
        system = after.prompt[0]["content"]
        assert "## Summaries" in system and "Earlier in this conversation (turns 1-4)" in system
        summarised = len(posted.run.turns_summarised)
        assert after.layout["parts"]["history"]["given"] == after.turn - 1 - summarised

    def test_the_target_met_is_honest(self, compacted):
        session, posted = compacted
        run = posted.run
        assert run.target_met is True
        assert run.utilization_after <= 70.0 < run.utilization_before

        after = post(session, ("user", "And the dates?")).context

        assert after.budget_status["utilizationPct"] <= 70.0

    def test_a_policy_that_refuses_summaries_keeps_them_out_of_every_prompt(
        self, compacted, workload_a
    ):
        session, posted = compacted
        workload_policy_save(
            workload=workload_a, environment="prod",
            document={"memoryTypeAllowed": ["fact", "preference"]}, author="system:test",
        )  # fmt: skip

        after = post(session, ("user", "And the dates?")).context

        assert not [p for p in after.parts if p.get("section") == "summaries"]
        assert "Earlier in this conversation" not in after.prompt[0].get("content", "")

    def test_its_event_says_the_outcome_without_content(self, compacted):
        session, posted = compacted
        run = posted.run

        event = AuditEvent.objects.get(type=EventType.COMPACTED)

        assert event.pk == run.event_id
        assert (event.actor_id, event.environment) == ("user:ada", "prod")
        payload = event.payload
        assert payload["outcome"] == "target_met" and payload["targetMet"] is True
        assert payload["turnsSummarised"] == run.turns_summarised
        assert payload["summaryIds"] == [str(pk) for pk in run.summary_ids]
        assert (payload["tokensBefore"], payload["tokensAfter"]) == (
            run.tokens_before, run.tokens_after,
        )  # fmt: skip
        text = json.dumps(payload)
        assert "release train" not in text and "release plan" not in text
        created = AuditEvent.objects.get(type=EventType.MEMORY_CHANGED)
        assert created.payload["ids"] == [str(pk) for pk in run.summary_ids]

    def test_a_run_processed_again_changes_nothing(self, compacted):
        session, posted = compacted
        before = MemoryRecord.objects.count(), AuditEvent.objects.count()

        assert compaction_run_process(run_id=posted.run.pk) == "succeeded"

        assert (MemoryRecord.objects.count(), AuditEvent.objects.count()) == before

    def test_a_session_has_one_run_in_flight_at_most(self, compacted):
        session, _ = compacted
        fields = dict(
            workspace=session.workspace, session=session, trigger="manual", reason="manual",
            severity="normal", config={}, service="compaction", time_budget_ms=1,
            target_utilization=0.7, author="t",
        )  # fmt: skip
        CompactionRun.objects.create(**fields)

        with pytest.raises(IntegrityError), transaction.atomic():
            CompactionRun.objects.create(**fields, status="running")

    def test_erasing_the_actor_takes_its_sessions_runs_and_summaries(self, compacted):
        session, posted = compacted

        actor_erase(workspace=session.workspace, actor_id="user:ada", author="system:test")

        assert not CompactionRun.objects.exists()
        assert not MemoryRecord.objects.filter(pk__in=posted.run.summary_ids).exists()

    def test_too_few_turns_outside_the_recency_window_summarise_nothing(self, workload_a):
        roomy_floor(workload_a.workspace)
        compacting(workload_a, compaction_recency_window=14, min_turns_to_summarize=4)
        session = start(workload_a)

        run = talk_until_compacted(session).run

        assert (run.status, run.outcome, run.turns_summarised) == (
            "succeeded", "target_missed", [],
        )  # fmt: skip
        assert "outside the recency window of 14" in run.notes[0]
        assert not MemoryRecord.objects.filter(memory_type="summary").exists()


class InsightDedupTests:
    def test_the_actors_duplicate_insights_are_superseded_as_the_sweep_would(self, workload_a):
        workspace = workload_a.workspace
        roomy_floor(workspace)
        text = "Ada answers faster when the release notes include a deadline"
        oldest = memory(workspace, text, memory_type="insight", created_at=ago(days=3))
        older = memory(workspace, text + ".", memory_type="insight", created_at=ago(days=2))
        newest = memory(workspace, text + "!", memory_type="insight", created_at=ago(days=1))
        bob = memory(workspace, text, actor_id="user:bob", memory_type="insight",
                     created_at=ago(days=4))  # fmt: skip
        compacting(workload_a)

        run = talk_until_compacted(start(workload_a)).run

        assert run.insights_superseded == sorted([oldest, older])
        for pk in (oldest, older):
            row = MemoryRecord.objects.get(pk=pk)
            assert (row.is_current, row.superseded_by_id) == (False, newest)
        assert MemoryRecord.objects.get(pk=bob).is_current  # another actor's

    def test_disabled_insight_dedup_supersedes_nothing(self, workload_a):
        workspace = workload_a.workspace
        roomy_floor(workspace)
        text = "Ada answers faster when the release notes include a deadline"
        memory(workspace, text, memory_type="insight", created_at=ago(days=3))
        memory(workspace, text, memory_type="insight", created_at=ago(days=2))
        compacting(workload_a, insight_dedup_enabled=False)

        run = talk_until_compacted(start(workload_a)).run

        assert run.insights_superseded == []
        assert MemoryRecord.objects.filter(memory_type="insight", is_current=True).count() == 2


class PromotionTests:
    def earned(self, workspace) -> int:
        return memory(workspace, "asked about every week", created_at=ago(days=8),
                      hit_count=12, confidence=1.0, last_accessed_at=ago(hours=1))  # fmt: skip

    def test_the_actors_due_memories_are_promoted_when_the_schedule_executes_promotion(
        self, workload_a
    ):
        workspace = workload_a.workspace
        roomy_floor(workspace)
        earned = self.earned(workspace)
        bobs = memory(
            workspace, "asked about every week", actor_id="user:bob", created_at=ago(days=8),
            hit_count=12, last_accessed_at=ago(hours=1),
        )  # fmt: skip
        lifecycle_settings_patch(
            workspace=workspace, changes={"schedule": {"promotion": "execute"}}, author="t"
        )
        compacting(workload_a)

        run = talk_until_compacted(start(workload_a)).run

        assert run.memories_promoted == [earned]
        assert MemoryRecord.objects.get(pk=earned).tier == "long_term"
        assert MemoryRecord.objects.get(pk=bobs).tier == "short_term"

    def test_a_schedule_that_only_previews_promotion_promotes_nothing(self, workload_a):
        workspace = workload_a.workspace
        roomy_floor(workspace)
        earned = self.earned(workspace)
        compacting(workload_a)

        run = talk_until_compacted(start(workload_a)).run

        assert run.memories_promoted == []
        assert "schedule does not execute it" in run.notes[-1]
        assert MemoryRecord.objects.get(pk=earned).tier == "short_term"


class FailureTests:
    def test_a_summarizer_that_cannot_be_reached_leaves_the_session_as_it_was(
        self, workload_a, settings, monkeypatch
    ):
        settings.COMPACTION_SERVICES = {
            **settings.COMPACTION_SERVICES,
            "gone": {
                "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                "api_key_env": "CRP_TEST_KEY", "timeout_seconds": 2,
            },
        }  # fmt: skip
        monkeypatch.setenv("CRP_TEST_KEY", "sk-test")
        roomy_floor(workload_a.workspace)
        compacting(workload_a, llm_service="gone")
        session = start(workload_a)

        posted = talk_until_compacted(session)

        run = posted.run
        assert (run.status, run.outcome, run.error_code) == (
            "failed", "failed", "SUMMARIZER_UNREACHABLE",
        )  # fmt: skip
        assert not Turn.objects.filter(compacted_by__isnull=False).exists()
        assert not MemoryRecord.objects.filter(memory_type="summary").exists()
        assert Session.objects.get(pk=session.pk).compaction_run is None
        event = AuditEvent.objects.get(type=EventType.COMPACTED)
        assert event.payload["error"]["code"] == "SUMMARIZER_UNREACHABLE"
        # The next turn carries the whole history, as before.
        after = post(session, ("assistant", ANSWER), ("user", QUESTION)).context
        assert after.layout["parts"]["history"]["given"] == after.turn - 1
