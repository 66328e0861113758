"""The compaction monitor kept per session (seed 000, "Trigger and severity details"): each turn
is posted to the session as stored, so every decision below comes from the persisted state;
the gates in the seed's order (enabled, history, none in progress, cooldown before any
severity), then warning / critical / overage, then a rising trend above
``compaction_threshold``; exact boundary values in the lower class."""

from __future__ import annotations

import pytest

from chat.compaction.coordinator import session_monitor
from chat.models import CompactionRun, Session
from recall.layout.services import layout_config_current
from tests.chat.compaction_support import at, measured, message_at, post, start
from tests.chat.helpers import in_flight

pytestmark = pytest.mark.django_db


def monitor_of(session: Session):
    fresh = Session.objects.get(pk=session.pk)
    return session_monitor(
        session=fresh, config=layout_config_current(workload=fresh.workload).config
    )


class SeedExampleTests:
    def test_one_turn_at_90_compacts_then_the_stored_monitor_waits(self, workload_a):
        """Seed 000's offline example: one turn at 90 % with ``cooldown_turns: 1`` → True;
        after ``mark_compaction_started`` → False, read back from the session."""
        measured(workload_a, cooldown_turns=1)
        session = start(workload_a)

        decision = at(session, 90.0)

        assert (decision["compact"], decision["code"]) == (True, "severity")
        assert decision["runId"] == str(CompactionRun.objects.get(session=session).pk)
        stored = Session.objects.get(pk=session.pk)
        assert stored.monitor_turns == 1 and stored.compaction_started_turn == 1
        assert [s["utilizationPct"] for s in stored.monitor_recent] == [90.0]
        assert monitor_of(session).should_compact() is False  # its cooldown counts from here

    def test_the_next_turn_after_the_cooldown_compacts_again(self, workload_a):
        measured(workload_a, cooldown_turns=1)
        session = start(workload_a)
        at(session, 90.0)

        assert at(session, 90.0)["compact"] is True
        assert CompactionRun.objects.filter(session=session).count() == 2


class GateOrderTests:
    def test_disabled_is_the_first_gate_even_at_overage(self, workload_a):
        measured(workload_a, enabled=False, cooldown_turns=0)
        session = start(workload_a)

        decision = at(session, 120.0)

        assert (decision["compact"], decision["code"]) == (False, "disabled")
        assert not CompactionRun.objects.exists()

    def test_a_run_in_flight_blocks_before_the_cooldown_is_asked(self, workload_a, settings):
        settings.COMPACTION_WAIT_MS = 50
        measured(workload_a, cooldown_turns=0)
        session = start(workload_a)
        at(session, 50.0)
        running = in_flight(session)

        decision = at(session, 99.0)

        assert (decision["compact"], decision["code"]) == (False, "in_progress")
        assert decision["waitedFor"]["runId"] == str(running.pk)
        assert decision["waitedFor"]["finished"] is False
        assert decision["waitedFor"]["waitedMs"] >= 50

    def test_the_cooldown_is_checked_before_critical_and_overage(self, workload_a):
        measured(workload_a, cooldown_turns=3)
        session = start(workload_a)
        assert at(session, 90.0)["code"] == "severity"  # started at turn 1

        critical, overage = at(session, 97.0), at(session, 120.0)

        assert (critical["compact"], critical["code"]) == (False, "cooldown")
        assert (overage["compact"], overage["code"]) == (False, "cooldown")
        assert "2 of 3 turns" in overage["reason"]
        after = at(session, 120.0)
        assert (after["compact"], after["severity"]) == (True, "overage")
        assert after["timeBudgetMs"] == 45000  # critical_max_duration_ms


class TriggerTests:
    @pytest.mark.parametrize(
        ("pct", "severity", "budget"),
        [(85.1, "warning", 15000), (95.1, "critical", 45000), (100.1, "overage", 45000)],
    )
    def test_warning_critical_and_overage_trigger_with_their_time_budget(
        self, workload_a, pct, severity, budget
    ):
        measured(workload_a)
        session = start(workload_a)

        decision = at(session, pct)

        assert (decision["compact"], decision["code"]) == (True, "severity")
        assert (decision["severity"], decision["timeBudgetMs"]) == (severity, budget)
        run = CompactionRun.objects.get(session=session)
        assert (run.severity, run.time_budget_ms, run.trigger) == (severity, budget, "automatic")

    @pytest.mark.parametrize(
        ("pct", "severity", "compact", "budget"),
        [
            (70.0, "normal", False, None),
            (85.0, "elevated", False, None),
            (95.0, "warning", True, 15000),
            (100.0, "critical", True, 45000),
        ],
    )
    def test_an_exact_boundary_stays_in_the_lower_class(
        self, workload_a, pct, severity, compact, budget
    ):
        measured(workload_a)
        session = start(workload_a)

        decision = at(session, pct)

        assert (decision["severity"], decision["compact"]) == (severity, compact)
        assert decision["timeBudgetMs"] == budget

    def test_a_rising_trend_above_the_threshold_triggers_without_a_severity(self, workload_a):
        measured(workload_a, compaction_threshold=0.75)
        session = start(workload_a)
        at(session, 60.0)
        at(session, 70.0)

        decision = at(session, 80.0)  # elevated: no severity trigger

        assert (decision["compact"], decision["code"]) == (True, "rising_trend")
        assert decision["severity"] == "elevated"

    def test_a_trend_ending_on_the_threshold_does_not_trigger(self, workload_a):
        """With the seed's 0.85, a rising trend must end above 85 %: 85.0 is not."""
        measured(workload_a)
        session = start(workload_a)
        at(session, 70.0)
        at(session, 80.0)

        decision = at(session, 85.0)

        assert (decision["compact"], decision["code"]) == (False, "not_needed")

    def test_a_flat_trend_above_the_threshold_does_not_trigger(self, workload_a):
        measured(workload_a, compaction_threshold=0.75)
        session = start(workload_a)
        at(session, 80.0)
        at(session, 70.0)

        assert at(session, 80.0)["code"] == "not_needed"  # slope 0

    def test_the_trend_window_is_the_stored_readings(self, workload_a):
        measured(workload_a, compaction_threshold=0.75, trend_window=3)
        session = start(workload_a)
        for pct in (10.0, 20.0, 80.0, 79.0):
            at(session, pct)

        stored = Session.objects.get(pk=session.pk)
        assert [s["utilizationPct"] for s in stored.monitor_recent] == [20.0, 80.0, 79.0]
        assert stored.monitor_turns == 4

    def test_an_assistant_message_alone_records_nothing(self, workload_a):
        measured(workload_a)
        session = start(workload_a)
        post(session, ("user", message_at(40.0)))

        post(session, ("assistant", "An answer."))

        assert Session.objects.get(pk=session.pk).monitor_turns == 1
