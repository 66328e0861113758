"""How a compaction run ends: the run finished, the session's monitor told, and the run's one
``context.compacted`` audit event, in one transaction.

The event holds the run's outcome without content: counts, tokens, turn indexes and memory
ids (the summaries are memories of their own, governed and audited as such).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from chat.models import SESSION_LOCK, CompactionRun, CompactionStatus, Session


def run_outcome(run: CompactionRun) -> dict[str, Any]:
    """What a run did and how it ended, without content: the fields its audit event and its
    API answer share (each adds its own ids and names)."""
    return {
        "sessionId": str(run.session_id),
        "trigger": run.trigger,
        "reason": run.reason,
        "severity": run.severity,
        "status": run.status,
        "outcome": run.outcome,
        "service": run.service,
        "timeBudgetMs": run.time_budget_ms,
        "durationMs": run.duration_ms,
        "timeBudgetExhausted": run.time_budget_exhausted,
        "targetUtilization": run.target_utilization,
        "targetMet": run.target_met,
        "availableBudget": run.available_budget,
        "tokensBefore": run.tokens_before,
        "tokensAfter": run.tokens_after,
        "utilizationBefore": run.utilization_before,
        "utilizationAfter": run.utilization_after,
        "turnsSummarised": list(run.turns_summarised),
        "insightsSuperseded": [str(pk) for pk in run.insights_superseded],
        "memoriesPromoted": [str(pk) for pk in run.memories_promoted],
        "notes": list(run.notes),
    }


def run_event_payload(run: CompactionRun) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "runId": str(run.pk),
        **run_outcome(run),
        "serviceKind": run.service_kind,
        "summaryIds": [str(pk) for pk in run.summary_ids],
    }
    if run.error_code:
        payload["error"] = {"code": run.error_code, "message": run.error}
    return payload


def elapsed_ms(clock: float | None) -> int | None:
    return None if clock is None else round((time.monotonic() - clock) * 1000)


def run_and_session_locked(run_id: int) -> tuple[CompactionRun, Session] | None:
    """The run and its session, locked to the end of the caller's transaction: the session
    first, as a turn's post takes it (no lock cycle); None when either is gone."""
    session_id = (
        CompactionRun.objects.filter(pk=run_id).values_list("session_id", flat=True).first()
    )
    if session_id is None:
        return None
    session = (
        Session.objects.select_for_update(**SESSION_LOCK)
        .select_related("workspace", "actor", "workload")
        .filter(pk=session_id)
        .first()
    )
    run = CompactionRun.objects.select_for_update().filter(pk=run_id).first()
    if session is None or run is None:
        return None
    return run, session


def compaction_close(run: CompactionRun, session: Session) -> CompactionRun:
    """Inside the caller's transaction, with the run and its session locked and the run's
    outcome set on ``run``: finish it, tell the monitor (no run in flight), record the
    event."""
    run.finished_at = timezone.now()
    if session.compaction_run_id == run.pk:
        session.compaction_run = None
        session.save(update_fields=["compaction_run", "updated_at"])
    event = audit_event_record(
        workspace=session.workspace,
        type=EventType.COMPACTED,
        author=run.author,
        payload=run_event_payload(run),
        workload_id=session.workload_id,
        environment=session.environment,
        actor_id=session.actor.external_id,
    )
    run.event_id = event.pk
    run.save()
    return run


def compaction_fail(
    *,
    run_id: int,
    code: str,
    message: str,
    clock: float | None = None,
    exhausted: bool = False,
    service_kind: str = "",
    only_queued: bool = False,
) -> str:
    """Record the run as failed, changing nothing else (once, whoever calls; ``only_queued``:
    only if no worker took it meanwhile). Returns its status."""
    with transaction.atomic():
        locked = run_and_session_locked(run_id)
        if locked is None:
            return "missing"
        run, session = locked
        if run.finished or (only_queued and run.status != CompactionStatus.QUEUED):
            return run.status
        run.status = CompactionStatus.FAILED
        run.error_code = code
        run.error = message
        run.time_budget_exhausted = exhausted
        run.duration_ms = elapsed_ms(clock)
        if service_kind:
            run.service_kind = service_kind
        compaction_close(run, session)
        return run.status
