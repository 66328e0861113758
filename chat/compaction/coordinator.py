"""The background coordinator of seed 000, for chat sessions: the compaction monitor's state
kept with its session, the runs it schedules after a turn, the manual runs, and the wait for
a run in flight before the next turn's prompt.

After every assembled turn (``chat.assembly``), the session's monitor is rebuilt from its
stored state (``session_monitor``), records the turn's budget status and decides with the
seed's gates in the seed's order (``recall.layout.monitor``); when it decides to compact, the
run is written and the monitor marks it started (``compaction_start``); the state goes back
to the session in the same transaction (``monitor_keep``), and the run is sent once it
commits (``compaction_send``; at once without a broker). The run marks the monitor finished
when it ends (``maintenance.compaction``, which processes runs).

The next turn of a session with a run in flight waits for it, up to ``COMPACTION_WAIT_MS``
(``compaction_wait``), then goes on without it: its monitor then says ``in_progress`` and its
answer says what it waited for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chat.models import ACTIVE_COMPACTION, CompactionRun, CompactionTrigger, Session
from portal.tasks import enqueue
from recall.layout.config import LayoutConfig, layout_config_to_dict
from recall.layout.monitor import (
    BudgetSeverity,
    BudgetStatus,
    ContextBudgetMonitor,
    MonitorState,
)

# The session fields that hold the monitor's state, saved with the turn that changed them.
MONITOR_FIELDS = ["monitor_recent", "monitor_turns", "compaction_started_turn", "compaction_run"]
SYSTEM_AUTHOR = "system:compaction"
# Chat's extension point, sent by name: maintenance, above, registers and processes it (its
# insight dedup and promotion are maintenance's sweeps: ``maintenance.compaction``).
TASK = "chat.compaction_run"
_POLL_SECONDS = 0.05


def budget_status_plain(status: BudgetStatus) -> dict[str, Any]:
    pct = status.utilization_pct
    return {
        "turn": status.turn_index,
        "totalTokens": status.total_tokens,
        "availableBudget": status.available_budget,
        # JSON has no infinity: a zero budget with anything in it is null, and overage.
        "utilizationPct": round(pct, 2) if pct != float("inf") else None,
        "severity": status.severity.value,
    }


def budget_status_from_plain(stored: dict[str, Any]) -> BudgetStatus:
    pct = stored["utilizationPct"]
    return BudgetStatus(
        total_tokens=stored["totalTokens"],
        available_budget=stored["availableBudget"],
        utilization_pct=float("inf") if pct is None else float(pct),
        severity=BudgetSeverity(stored["severity"]),
        turn_index=stored["turn"],
    )


def session_monitor(*, session: Session, config: LayoutConfig) -> ContextBudgetMonitor:
    """The session's compaction monitor as the last turn left it, under ``config``."""
    state = MonitorState(
        recent=tuple(budget_status_from_plain(stored) for stored in session.monitor_recent),
        turns_recorded=session.monitor_turns,
        last_compaction_started_at=session.compaction_started_turn,
        compaction_in_progress=session.compaction_run_id is not None,
    )
    return ContextBudgetMonitor.from_state(config.compaction, state)


def monitor_keep(session: Session, monitor: ContextBudgetMonitor) -> None:
    """Put the monitor's state on the session (saved by the caller, ``MONITOR_FIELDS``)."""
    state = monitor.state()
    session.monitor_recent = [budget_status_plain(status) for status in state.recent]
    session.monitor_turns = state.turns_recorded
    session.compaction_started_turn = state.last_compaction_started_at


def compaction_start(
    *,
    session: Session,
    monitor: ContextBudgetMonitor,
    config: LayoutConfig,
    trigger: str,
    reason: str,
    author: str,
) -> CompactionRun:
    """Write a run of the (locked) session and mark the monitor's compaction started: its
    severity and time budget are the latest turn's. Sent by ``compaction_send`` once the
    session is saved."""
    latest = monitor.latest
    severity = latest.severity if latest is not None else BudgetSeverity.NORMAL
    monitor.mark_compaction_started()
    run = CompactionRun.objects.create(
        workspace_id=session.workspace_id,
        session=session,
        trigger=trigger,
        reason=reason,
        severity=severity.value,
        config=layout_config_to_dict(config)["memory"],
        service=config.compaction.llm_service,
        time_budget_ms=config.compaction.time_budget_ms(severity),
        target_utilization=config.compaction.target_utilization,
        monitor_turn=monitor.turns_recorded,
        author=SYSTEM_AUTHOR if trigger == CompactionTrigger.AUTOMATIC else author,
    )
    session.compaction_run = run
    monitor_keep(session, monitor)
    return run


def compaction_send(run: CompactionRun) -> None:
    """Process the run: in a worker once the transaction commits, or here and now without a
    broker (``portal.tasks.enqueue``). A run whose message is lost is sent again by the
    worker's recovery (``maintenance.compaction.compaction_recover``)."""
    enqueue(TASK, run.pk, deferred="a worker's start-up sends the queued runs again")


@dataclass(frozen=True)
class Waited:
    """The run in flight a turn waited for: how long, and whether it finished meanwhile."""

    run_id: int
    waited_ms: int
    finished: bool

    def as_dict(self) -> dict[str, Any]:
        return {"runId": str(self.run_id), "waitedMs": self.waited_ms, "finished": self.finished}


def compaction_wait(*, session: Session, bound_ms: int | None = None) -> Waited | None:
    """Wait, outside any transaction and without the session's lock (the run needs it to
    finish), for the session's run in flight, up to ``bound_ms`` (``COMPACTION_WAIT_MS``).
    None when there is none. ``session`` is as the caller read it (a turn: locked, the lock
    let go since), its run in flight not read again."""
    pk = session.compaction_run_id
    if pk is None:
        return None
    bound = (settings.COMPACTION_WAIT_MS if bound_ms is None else bound_ms) / 1000
    start = time.monotonic()
    while True:
        status = CompactionRun.objects.filter(pk=pk).values_list("status", flat=True).first()
        waited = time.monotonic() - start
        if status not in ACTIVE_COMPACTION:
            return Waited(pk, round(waited * 1000), True)
        if waited >= bound:
            return Waited(pk, round(waited * 1000), False)
        time.sleep(min(_POLL_SECONDS, bound - waited))
