"""Context budget severity and the opt-in automatic compaction monitor (seed 000).

Plain Python, no Django import. The names follow seed 000 (``BudgetSeverity``,
``BudgetStatus``, ``CompactionConfig``, ``ContextBudgetMonitor``) so that the seed's
offline example runs with only its import lines changed::

    monitor = ContextBudgetMonitor(CompactionConfig(enabled=True, cooldown_turns=1))
    monitor.record_turn(BudgetStatus(
        total_tokens=900, available_budget=1000, utilization_pct=90.0,
        severity=BudgetSeverity.from_utilization(90.0),
    ))
    print(monitor.should_compact())   # True
    monitor.mark_compaction_started()
    print(monitor.should_compact())   # False

The monitor only decides *whether* a compaction run is eligible; running it (calling a
model, summarising turns) belongs to the caller. Its state between turns (``MonitorState``:
the readings of the trend window, the turns recorded, the turn the last compaction started
at, whether one is in flight) is what a session keeps (``chat.compaction.coordinator``), so
``ContextBudgetMonitor.from_state`` gives back the monitor that decided the turn before.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Fixed classifier boundaries (percent). The seed is explicit that these are fixed:
# ``critical_threshold`` in the config does not move them.
ELEVATED_ABOVE_PCT = 70.0
WARNING_ABOVE_PCT = 85.0
CRITICAL_ABOVE_PCT = 95.0
OVERAGE_ABOVE_PCT = 100.0

# A least-squares slope needs at least this many points to mean "a trend" rather than
# "two readings that happen to differ".
MIN_TREND_POINTS = 3


class BudgetSeverity(StrEnum):
    """How full the context is, classified by fixed utilization boundaries."""

    NORMAL = "normal"
    ELEVATED = "elevated"
    WARNING = "warning"
    CRITICAL = "critical"
    OVERAGE = "overage"

    @classmethod
    def from_utilization(cls, pct: float) -> BudgetSeverity:
        """Classify a utilization percentage.

        Greater than 70 is elevated, greater than 85 warning, greater than 95 critical and
        greater than 100 overage. Exact boundary values stay in the lower class (85.0 is
        elevated, not warning). NaN is rejected rather than silently classed as normal.
        """
        if math.isnan(pct):
            raise ValueError("utilization_pct must be a number, not NaN")
        if pct > OVERAGE_ABOVE_PCT:
            return cls.OVERAGE
        if pct > CRITICAL_ABOVE_PCT:
            return cls.CRITICAL
        if pct > WARNING_ABOVE_PCT:
            return cls.WARNING
        if pct > ELEVATED_ABOVE_PCT:
            return cls.ELEVATED
        return cls.NORMAL

    @property
    def rank(self) -> int:
        """0 for normal up to 4 for overage, so severities can be compared."""
        return _SEVERITY_ORDER.index(self)

    @property
    def triggers_compaction(self) -> bool:
        """Warning, critical and overage trigger a run once the gates are passed."""
        return self.rank >= BudgetSeverity.WARNING.rank

    @property
    def uses_critical_time_budget(self) -> bool:
        """Critical and overage runs get the larger ``critical_max_duration_ms``."""
        return self.rank >= BudgetSeverity.CRITICAL.rank


_SEVERITY_ORDER: tuple[BudgetSeverity, ...] = tuple(BudgetSeverity)


def utilization_pct(total_tokens: int, available_budget: int) -> float:
    """``100 * total / available``.

    With no available budget, zero use is 0 % and any use is infinite (always overage):
    a zero budget must never look comfortable.
    """
    if available_budget > 0:
        return 100.0 * total_tokens / available_budget
    return 0.0 if total_tokens <= 0 else math.inf


@dataclass(frozen=True)
class BudgetStatus:
    """One turn's budget reading, as the background coordinator records it."""

    total_tokens: int
    available_budget: int
    utilization_pct: float
    severity: BudgetSeverity
    turn_index: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_tokens(
        cls, total_tokens: int, available_budget: int, turn_index: int | None = None
    ) -> BudgetStatus:
        """Build a status whose utilization and severity are derived, not hand-entered."""
        pct = utilization_pct(total_tokens, available_budget)
        return cls(
            total_tokens=total_tokens,
            available_budget=available_budget,
            utilization_pct=pct,
            severity=BudgetSeverity.from_utilization(pct),
            turn_index=turn_index,
        )


@dataclass(frozen=True)
class CompactionConfig:
    """The seed's ``memory.compaction`` fragment; every key is a field.

    Defaults are the seed's values except ``enabled``: automatic compaction is opt-in,
    so it is off unless the operator sets it explicitly.
    """

    enabled: bool = False
    llm_service: str = "compaction"
    compaction_threshold: float = 0.85
    # Accepted for compatibility but, as in the seed, it does not move the fixed
    # severity classifier; see BudgetSeverity.from_utilization.
    critical_threshold: float = 0.95
    target_utilization: float = 0.70
    cooldown_turns: int = 3
    max_duration_ms: int = 15000
    critical_max_duration_ms: int = 45000
    min_turns_to_summarize: int = 5
    max_turns_per_summary: int = 8
    compaction_recency_window: int = 4
    insight_dedup_enabled: bool = True
    insight_similarity_threshold: float = 0.90
    max_insights_to_check: int = 50
    trend_window: int = 10

    def time_budget_ms(self, severity: BudgetSeverity) -> int:
        """Critical/overage runs use the larger time budget."""
        if severity.uses_critical_time_budget:
            return self.critical_max_duration_ms
        return self.max_duration_ms


@dataclass(frozen=True)
class CompactionDecision:
    """Whether compaction should run now, and why.

    ``code`` is one of: ``disabled``, ``no_history``, ``in_progress``, ``cooldown``,
    ``severity``, ``rising_trend``, ``not_needed``. It also unpacks as the pair
    ``(compact, reason)``.
    """

    compact: bool
    code: str
    reason: str
    severity: BudgetSeverity | None = None
    time_budget_ms: int | None = None

    def __iter__(self) -> Iterator[bool | str]:
        return iter((self.compact, self.reason))


def least_squares_slope(values: Sequence[float]) -> float:
    """Slope of the least-squares line through ``(i, values[i])``; 0.0 for < 2 points."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x = (n - 1) / 2
    mean_y = sum(values) / n
    covariance = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values))
    variance = sum((i - mean_x) ** 2 for i in range(n))
    return covariance / variance


def is_rising_trend(values: Sequence[float]) -> bool:
    """A rising trend: at least 3 points and a least-squares slope strictly above 0."""
    if len(values) < MIN_TREND_POINTS:
        return False
    if not all(math.isfinite(v) for v in values):
        # An infinite reading (zero budget) is already overage; a slope through it is
        # meaningless, so the severity rule, not the trend rule, must handle it.
        return False
    return least_squares_slope(values) > 0.0


@dataclass(frozen=True)
class MonitorState:
    """A monitor's state between turns: what ``ContextBudgetMonitor.state`` gives and
    ``ContextBudgetMonitor.from_state`` takes back."""

    recent: tuple[BudgetStatus, ...] = ()  # the trend window's readings, oldest first
    turns_recorded: int = 0
    last_compaction_started_at: int | None = None  # turns_recorded when it started
    compaction_in_progress: bool = False


class ContextBudgetMonitor:
    """Records per-turn budget status and decides when automatic compaction is due.

    Gates, in order (the first failing one explains the decision):

    1. ``config.enabled`` is true;
    2. at least one turn has been recorded;
    3. no compaction is in progress;
    4. the cooldown has elapsed: turns recorded since the last compaction *started*
       >= ``cooldown_turns`` (always elapsed before the first compaction). This gate is
       checked before severity, so critical/overage do not bypass it.

    Then a run is triggered when the latest turn's severity is warning, critical or
    overage; otherwise when there is a *rising trend*: over the last ``trend_window``
    recorded turns there are at least 3 points, the least-squares slope of
    utilization_pct against turn order is > 0, and the latest utilization_pct is above
    ``compaction_threshold * 100``.
    """

    def __init__(self, config: CompactionConfig | None = None) -> None:
        self.config = config if config is not None else CompactionConfig()
        # Only the trend window is ever read back, so an endless chat costs O(window).
        self._recent: deque[BudgetStatus] = deque(maxlen=max(self.config.trend_window, 1))
        self._turns_recorded = 0
        self._compaction_in_progress = False
        self._last_compaction_started_at: int | None = None

    @classmethod
    def from_state(cls, config: CompactionConfig, state: MonitorState) -> ContextBudgetMonitor:
        """The monitor as it was when ``state`` was taken, under ``config`` (a trend window
        shortened since keeps the latest readings only)."""
        monitor = cls(config)
        monitor._recent.extend(state.recent)
        monitor._turns_recorded = state.turns_recorded
        monitor._last_compaction_started_at = state.last_compaction_started_at
        monitor._compaction_in_progress = state.compaction_in_progress
        return monitor

    def state(self) -> MonitorState:
        return MonitorState(
            recent=tuple(self._recent),
            turns_recorded=self._turns_recorded,
            last_compaction_started_at=self._last_compaction_started_at,
            compaction_in_progress=self._compaction_in_progress,
        )

    @property
    def turns_recorded(self) -> int:
        return self._turns_recorded

    @property
    def compaction_in_progress(self) -> bool:
        return self._compaction_in_progress

    @property
    def latest(self) -> BudgetStatus | None:
        return self._recent[-1] if self._recent else None

    @property
    def history(self) -> list[BudgetStatus]:
        """The recorded statuses still inside the trend window, oldest first."""
        return list(self._recent)

    def turns_since_compaction(self) -> int | None:
        """Turns recorded since the last compaction started; None if none has started."""
        if self._last_compaction_started_at is None:
            return None
        return self._turns_recorded - self._last_compaction_started_at

    def record_turn(self, status: BudgetStatus) -> None:
        self._recent.append(status)
        self._turns_recorded += 1

    def mark_compaction_started(self) -> None:
        self._compaction_in_progress = True
        self._last_compaction_started_at = self._turns_recorded

    def mark_compaction_finished(self) -> None:
        self._compaction_in_progress = False

    def cooldown_elapsed(self) -> bool:
        since = self.turns_since_compaction()
        return since is None or since >= self.config.cooldown_turns

    def trend_window_utilization(self) -> list[float]:
        window = self.config.trend_window
        if window <= 0:
            return []
        return [s.utilization_pct for s in list(self._recent)[-window:]]

    def rising_trend_above_threshold(self) -> bool:
        latest = self.latest
        if latest is None:
            return False
        above = latest.utilization_pct > self.config.compaction_threshold * 100.0
        return above and is_rising_trend(self.trend_window_utilization())

    def should_compact(self) -> bool:
        return self.compaction_decision().compact

    def compaction_decision(self) -> CompactionDecision:
        blocked = self._gate_decision()
        if blocked is not None:
            return blocked
        return self._trigger_decision()

    def _gate_decision(self) -> CompactionDecision | None:
        if not self.config.enabled:
            return CompactionDecision(False, "disabled", "automatic compaction is not enabled")
        if self.latest is None:
            return CompactionDecision(False, "no_history", "no turn has been recorded yet")
        if self._compaction_in_progress:
            return CompactionDecision(False, "in_progress", "a compaction is already running")
        if not self.cooldown_elapsed():
            since = self.turns_since_compaction()
            return CompactionDecision(
                False,
                "cooldown",
                f"cooldown: {since} of {self.config.cooldown_turns} turns since the last "
                "compaction started",
            )
        return None

    def _trigger_decision(self) -> CompactionDecision:
        latest = self.latest
        assert latest is not None  # guaranteed by _gate_decision
        severity = latest.severity
        budget = self.config.time_budget_ms(severity)
        if severity.triggers_compaction:
            return CompactionDecision(
                True,
                "severity",
                f"latest turn is {severity.value} ({latest.utilization_pct:.1f}% used)",
                severity,
                budget,
            )
        if self.rising_trend_above_threshold():
            return CompactionDecision(
                True,
                "rising_trend",
                f"utilization is rising and {latest.utilization_pct:.1f}% is above the "
                f"{self.config.compaction_threshold * 100:.1f}% compaction threshold",
                severity,
                budget,
            )
        return CompactionDecision(
            False,
            "not_needed",
            f"latest turn is {severity.value} ({latest.utilization_pct:.1f}% used) with no "
            "rising trend above the compaction threshold",
            severity,
        )
