"""Budget severity and the compaction monitor (``recall/layout/monitor.py``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recall.layout.monitor import (
    BudgetSeverity,
    BudgetStatus,
    CompactionConfig,
    ContextBudgetMonitor,
    is_rising_trend,
    least_squares_slope,
    utilization_pct,
)
from tests.properties import examples

# --- the offline example ----------------------------------------------------------------


def test_the_offline_example_compacts_once_then_waits(capsys: pytest.CaptureFixture[str]) -> None:
    # The example as an integrator runs it: one turn at 900 of 1,000 tokens (90%, a warning)
    # with compaction enabled and a one-turn cooldown. It asks for a compaction; once that
    # has started, it asks for no second one. No model is called.
    monitor = ContextBudgetMonitor(CompactionConfig(enabled=True, cooldown_turns=1))
    monitor.record_turn(BudgetStatus(
        total_tokens=900, available_budget=1000, utilization_pct=90.0,
        severity=BudgetSeverity.from_utilization(90.0),
    ))  # fmt: skip
    print(monitor.should_compact())
    decision = monitor.compaction_decision()
    monitor.mark_compaction_started()
    print(monitor.should_compact())

    assert capsys.readouterr().out == "True\nFalse\n"
    assert (decision.code, decision.severity) == ("severity", BudgetSeverity.WARNING)
    assert decision.time_budget_ms == 15000
    assert monitor.compaction_decision().code == "in_progress"


# --- severity classifier ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pct", "expected"),
    [
        (0.0, BudgetSeverity.NORMAL),
        (-5.0, BudgetSeverity.NORMAL),
        (70.0, BudgetSeverity.NORMAL),
        (70.0001, BudgetSeverity.ELEVATED),
        (85.0, BudgetSeverity.ELEVATED),
        (85.0001, BudgetSeverity.WARNING),
        (90.0, BudgetSeverity.WARNING),
        (95.0, BudgetSeverity.WARNING),
        (95.0001, BudgetSeverity.CRITICAL),
        (100.0, BudgetSeverity.CRITICAL),
        (100.01, BudgetSeverity.OVERAGE),
        (math.inf, BudgetSeverity.OVERAGE),
    ],
)
def test_from_utilization_boundaries_stay_in_the_lower_class(
    pct: float, expected: BudgetSeverity
) -> None:
    assert BudgetSeverity.from_utilization(pct) is expected


def test_severity_values_and_ranks_are_fixed() -> None:
    assert [s.value for s in BudgetSeverity] == [
        "normal",
        "elevated",
        "warning",
        "critical",
        "overage",
    ]
    assert [s.rank for s in BudgetSeverity] == [0, 1, 2, 3, 4]


def test_from_utilization_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        BudgetSeverity.from_utilization(math.nan)


pcts = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(pcts, pcts)
def test_from_utilization_is_monotone(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert BudgetSeverity.from_utilization(low).rank <= BudgetSeverity.from_utilization(high).rank


@given(pcts)
def test_from_utilization_matches_the_fixed_boundaries(pct: float) -> None:
    crossed = sum(pct > bound for bound in (70, 85, 95, 100))
    assert BudgetSeverity.from_utilization(pct).rank == crossed


def test_triggers_and_time_budget_by_severity() -> None:
    config = CompactionConfig()
    assert [s.triggers_compaction for s in BudgetSeverity] == [False, False, True, True, True]
    budgets = [config.time_budget_ms(s) for s in BudgetSeverity]
    assert budgets == [15000, 15000, 15000, 45000, 45000]


# --- status and config ------------------------------------------------------------------


def test_status_from_tokens_derives_utilization_and_severity() -> None:
    status = BudgetStatus.from_tokens(900, 1000, turn_index=7)
    assert status.utilization_pct == 90.0
    assert status.severity is BudgetSeverity.WARNING
    assert status.turn_index == 7


def test_zero_available_budget_is_never_comfortable() -> None:
    assert utilization_pct(0, 0) == 0.0
    assert BudgetStatus.from_tokens(1, 0).severity is BudgetSeverity.OVERAGE


def test_compaction_config_defaults_are_fixed_and_opt_in() -> None:
    assert CompactionConfig() == CompactionConfig(
        enabled=False,
        llm_service="compaction",
        compaction_threshold=0.85,
        critical_threshold=0.95,
        target_utilization=0.70,
        cooldown_turns=3,
        max_duration_ms=15000,
        critical_max_duration_ms=45000,
        min_turns_to_summarize=5,
        max_turns_per_summary=8,
        compaction_recency_window=4,
        insight_dedup_enabled=True,
        insight_similarity_threshold=0.90,
        max_insights_to_check=50,
        trend_window=10,
    )
    assert len(fields(CompactionConfig)) == 15


# --- monitor gates ----------------------------------------------------------------------


def status(pct: float) -> BudgetStatus:
    return BudgetStatus(
        total_tokens=round(pct * 10),
        available_budget=1000,
        utilization_pct=pct,
        severity=BudgetSeverity.from_utilization(pct),
    )


def monitor_with(*pcts: float, **config: object) -> ContextBudgetMonitor:
    monitor = ContextBudgetMonitor(CompactionConfig(**{"enabled": True, **config}))
    for pct in pcts:
        monitor.record_turn(status(pct))
    return monitor


def test_disabled_by_default_even_at_overage() -> None:
    monitor = ContextBudgetMonitor()
    monitor.record_turn(status(150.0))
    decision = monitor.compaction_decision()
    assert (decision.compact, decision.code) == (False, "disabled")


def test_no_history_means_no_compaction() -> None:
    assert monitor_with().compaction_decision().code == "no_history"


def test_in_progress_blocks_until_finished() -> None:
    monitor = monitor_with(99.0, cooldown_turns=0)
    monitor.mark_compaction_started()
    assert monitor.compaction_decision().code == "in_progress"
    monitor.mark_compaction_finished()
    assert monitor.should_compact()


def test_cooldown_is_checked_before_critical_and_overage() -> None:
    monitor = monitor_with(99.0, cooldown_turns=3)
    assert monitor.should_compact()  # no compaction yet: cooldown counts as elapsed
    monitor.mark_compaction_started()
    monitor.mark_compaction_finished()
    for turn in (1, 2):
        monitor.record_turn(status(120.0))
        decision = monitor.compaction_decision()
        assert (decision.compact, decision.code) == (False, "cooldown")
        assert f"{turn} of 3 turns" in decision.reason
    monitor.record_turn(status(120.0))
    decision = monitor.compaction_decision()
    assert (decision.compact, decision.code) == (True, "severity")
    assert decision.severity is BudgetSeverity.OVERAGE
    assert decision.time_budget_ms == 45000


def test_warning_triggers_with_the_normal_time_budget() -> None:
    ok, reason = monitor_with(86.0).compaction_decision()
    assert ok is True
    assert "warning" in reason
    assert monitor_with(86.0).compaction_decision().time_budget_ms == 15000


def test_elevated_without_a_trend_does_not_trigger() -> None:
    decision = monitor_with(80.0, 80.0, 80.0).compaction_decision()
    assert (decision.compact, decision.code) == (False, "not_needed")


# --- rising trend -----------------------------------------------------------------------


def test_least_squares_slope() -> None:
    assert least_squares_slope([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert least_squares_slope([5.0, 5.0, 5.0]) == 0.0
    assert least_squares_slope([3.0, 1.0, 2.0]) == pytest.approx(-0.5)
    assert least_squares_slope([4.0]) == 0.0


def test_rising_trend_needs_three_points_and_positive_slope() -> None:
    assert not is_rising_trend([10.0, 20.0])
    assert is_rising_trend([10.0, 20.0, 30.0])
    assert not is_rising_trend([30.0, 20.0, 30.0, 20.0])
    assert not is_rising_trend([50.0, 50.0, 50.0])


def test_rising_trend_above_threshold_triggers() -> None:
    decision = monitor_with(50.0, 60.0, 65.0, compaction_threshold=0.6).compaction_decision()
    assert (decision.compact, decision.code) == (True, "rising_trend")
    assert decision.severity is BudgetSeverity.NORMAL


def test_rising_trend_below_threshold_does_not_trigger() -> None:
    monitor = monitor_with(40.0, 50.0, 60.0, compaction_threshold=0.6)
    assert not monitor.should_compact()  # 60.0 is not above 60


def test_rising_trend_uses_only_the_trend_window() -> None:
    # Over all six points the slope is positive, over the last three it is falling.
    falling_window = monitor_with(
        10.0, 20.0, 30.0, 75.0, 74.0, 73.0, compaction_threshold=0.6, trend_window=3
    )
    assert not falling_window.should_compact()
    # Over all five points the slope is negative, over the last three it is rising.
    rising_window = monitor_with(
        84.0, 83.0, 62.0, 64.0, 66.0, compaction_threshold=0.6, trend_window=3
    )
    assert rising_window.compaction_decision().code == "rising_trend"


def test_trend_window_shorter_than_three_never_trends() -> None:
    monitor = monitor_with(61.0, 70.0, 80.0, compaction_threshold=0.6, trend_window=2)
    assert not monitor.should_compact()


def test_a_trend_window_of_zero_looks_at_no_turn() -> None:
    monitor = monitor_with(61.0, 70.0, 80.0, compaction_threshold=0.6, trend_window=0)
    assert monitor.trend_window_utilization() == []
    assert not monitor.should_compact()


# --- properties of the monitor ----------------------------------------------------------


@dataclass
class Reference:
    """An independent model of the monitor's gates, in their order (enabled, history, in
    progress, cooldown, severity, rising trend), to check the monitor against."""

    config: CompactionConfig
    pcts: list[float]
    in_progress: bool = False
    started_at: int | None = None

    def expected(self) -> bool:
        if not self.config.enabled or not self.pcts or self.in_progress:
            return False
        if self.started_at is not None:
            if len(self.pcts) - self.started_at < self.config.cooldown_turns:
                return False
        latest = self.pcts[-1]
        if latest > 85:
            return True
        window = self.pcts[-self.config.trend_window :] if self.config.trend_window else []
        rising = len(window) >= 3 and least_squares_slope(window) > 0
        return rising and latest > self.config.compaction_threshold * 100


operations = st.lists(
    st.one_of(
        st.floats(min_value=0, max_value=130, allow_nan=False),
        st.sampled_from(["start", "finish"]),
    ),
    max_size=25,
)


@settings(max_examples=examples(200))
@given(
    ops=operations,
    enabled=st.booleans(),
    cooldown=st.integers(0, 4),
    window=st.integers(0, 6),
    threshold=st.sampled_from([0.5, 0.6, 0.85]),
)
def test_monitor_matches_the_reference_model(
    ops: list[float | str], enabled: bool, cooldown: int, window: int, threshold: float
) -> None:
    config = CompactionConfig(
        enabled=enabled,
        cooldown_turns=cooldown,
        trend_window=window,
        compaction_threshold=threshold,
    )
    monitor = ContextBudgetMonitor(config)
    reference = Reference(config, [])
    for op in ops:
        if op == "start":
            monitor.mark_compaction_started()
            reference.in_progress, reference.started_at = True, len(reference.pcts)
        elif op == "finish":
            monitor.mark_compaction_finished()
            reference.in_progress = False
        else:
            assert isinstance(op, float)
            monitor.record_turn(status(op))
            reference.pcts.append(op)
        decision = monitor.compaction_decision()
        assert monitor.should_compact() is decision.compact is reference.expected()
        assert decision.reason


@given(st.lists(st.floats(min_value=0, max_value=200, allow_nan=False), min_size=1))
def test_disabled_or_in_progress_never_compacts(pcts: list[float]) -> None:
    disabled = monitor_with(*pcts, enabled=False)
    assert not disabled.should_compact()
    running = monitor_with(*pcts, cooldown_turns=0)
    running.mark_compaction_started()
    assert not running.should_compact()


# --- the state a session keeps between turns ------------------------------------------------


@settings(max_examples=examples(200))
@given(ops=operations, cooldown=st.integers(0, 4), window=st.integers(0, 6))
def test_a_monitor_rebuilt_from_its_state_decides_as_the_one_kept(
    ops: list[float | str], cooldown: int, window: int
) -> None:
    """A session rebuilds its monitor from the stored state before every turn: the rebuilt
    one must decide exactly as one kept in memory for the whole conversation."""
    config = CompactionConfig(enabled=True, cooldown_turns=cooldown, trend_window=window)
    kept = ContextBudgetMonitor(config)
    state = ContextBudgetMonitor(config).state()
    for op in ops:
        rebuilt = ContextBudgetMonitor.from_state(config, state)
        for monitor in (kept, rebuilt):
            if op == "start":
                monitor.mark_compaction_started()
            elif op == "finish":
                monitor.mark_compaction_finished()
            else:
                assert isinstance(op, float)
                monitor.record_turn(status(op))
        state = rebuilt.state()
        assert rebuilt.compaction_decision() == kept.compaction_decision()
        assert len(state.recent) <= max(window, 1)


def test_the_offline_example_through_a_stored_state() -> None:
    """Seed 000's example with the monitor put away and rebuilt between each step."""
    config = CompactionConfig(enabled=True, cooldown_turns=1)
    monitor = ContextBudgetMonitor(config)
    monitor.record_turn(
        BudgetStatus(
            total_tokens=900, available_budget=1000, utilization_pct=90.0,
            severity=BudgetSeverity.from_utilization(90.0),
        )
    )  # fmt: skip
    monitor = ContextBudgetMonitor.from_state(config, monitor.state())
    assert monitor.should_compact() is True
    monitor.mark_compaction_started()
    monitor = ContextBudgetMonitor.from_state(config, monitor.state())
    assert monitor.should_compact() is False
