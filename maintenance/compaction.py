"""A compaction run of a chat session, processed (the ``chat.compaction_run`` task, which chat
sends by name and maintenance registers: its insight dedup and promotion are maintenance's
sweeps): the session's oldest turns summarised into ``summary`` memories of the actor, the
actor's duplicate insights superseded, memories promoted, the outcome recorded.

Phase by phase (the rules are ``chat.compaction.rules``'):

1. **Summaries**, outside any transaction (a language model takes its time): the chunks of
   the session's current turns are summarised oldest first while the estimate is above
   ``target_utilization`` and the time budget lasts (``max_duration_ms``, or
   ``critical_max_duration_ms`` for a critical or overage run). A summarizer's error fails
   the run; a time budget that runs out keeps the summaries made before it.
2. **The change**, in one transaction, or nothing of it: the summaries become memories of the
   actor (``summary``, source ``system``, confirmation ``inferred``, through the memory
   import, with its ``memory.changed`` event; embedded as any memory, governed by the
   policies as any memory), their turns leave the current history (``Turn.compacted_by``);
   with ``insight_dedup_enabled`` the actor's duplicate insights are superseded (the dedup
   sweep's listing and change: ``maintenance.sweeps``); when the workspace's schedule
   executes the promotion sweep, the actor's memories its rule finds due are promoted (its
   listing and change); the run ends with its ``context.compacted`` event and the monitor
   is told.

Safe to run twice: a run is processed by one process at a time (an advisory lock per
session, freed when its holder's connection dies), a finished run is left as it is, and a
run taken over after a crash starts again from phase 1 (phase 2 either committed, and the
run is finished, or left nothing).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from chat.compaction.coordinator import compaction_send
from chat.compaction.records import (
    compaction_close,
    compaction_fail,
    elapsed_ms,
    run_and_session_locked,
)
from chat.compaction.rules import (
    SUMMARISE,
    TIME_BUDGET_EXHAUSTED,
    Estimate,
    TurnText,
    candidates,
    chunks,
    given_turns,
    next_step,
)
from chat.compaction.summarizers import SummarizerError, service_config, summarizer_for
from chat.models import (
    ACTIVE_COMPACTION,
    CompactionRun,
    CompactionStatus,
    Session,
    Turn,
    TurnContext,
)
from maintenance.selectors import lifecycle_settings_current
from maintenance.services import advisory_lock, lock_is_free
from maintenance.sweeps import (
    dedup_listing,
    insights_gone,
    insights_supersede,
    memories_locked,
    memories_promote,
    promotion_listing,
)
from portal.errors import DomainError
from portal.tasks import TRANSIENT_ERRORS
from recall.hits import hits_fold
from recall.layout.config import LayoutConfig, parse_memory_config
from recall.runtime import embedder_model, token_estimator
from recall.services import memory_import

logger = logging.getLogger(__name__)

# A queued run no worker has taken after this long is sent again (its message lost).
QUEUED_RESEND_AFTER = timedelta(minutes=5)


class Busy(Exception):
    """Another process is processing the session's run: try again later."""


class RunRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def lock_key(session_id: int) -> str:
    return f"compaction:session:{session_id}"


@dataclass
class Summarised:
    """What phase 1 made: the summaries (each with its turns), the estimate before and after,
    and why it stopped."""

    before: Estimate
    after: Estimate
    pieces: list[tuple[list[TurnText], str]] = field(default_factory=list)
    turn_pks: dict[int, int] = field(default_factory=dict)  # turn index -> row id
    exhausted: bool = False
    notes: list[str] = field(default_factory=list)


def compaction_run_process(*, run_id: int) -> str:
    """Process one run; returns its status. Raises ``Busy`` while another process holds the
    session's lock, and transient database errors (the task retries both)."""
    run = CompactionRun.objects.filter(pk=run_id).first()
    if run is None or run.finished:
        return run.status if run else "missing"
    with advisory_lock(lock_key(run.session_id)) as held:
        if not held:
            raise Busy(f"the session of compaction run {run_id} is being compacted elsewhere")
        if not CompactionRun.objects.filter(pk=run_id, status__in=ACTIVE_COMPACTION).update(
            status=CompactionStatus.RUNNING,
            started_at=Coalesce("started_at", timezone.now()),
        ):
            found = CompactionRun.objects.filter(pk=run_id).first()
            return found.status if found else "missing"
        clock = time.monotonic()
        kind = _kind(run.service)
        try:
            done = _summarise(run, clock)
            return _apply(run, done, clock)
        except SummarizerError as exc:
            return compaction_fail(
                run_id=run_id, code=exc.code, message=exc.message, clock=clock,
                exhausted=exc.budget, service_kind=kind,
            )  # fmt: skip
        except RunRefused as exc:
            return compaction_fail(
                run_id=run_id, code=exc.code, message=exc.message, clock=clock, service_kind=kind
            )
        except DomainError as exc:
            return compaction_fail(
                run_id=run_id, code=exc.code, message=exc.message, clock=clock, service_kind=kind
            )
        except TRANSIENT_ERRORS:
            raise  # the task retries; the run stays running and starts again
        except Exception as exc:  # noqa: BLE001 - recorded on the run
            # The class only: a message or traceback may quote turn content.
            logger.error("compaction run %s failed: %s", run_id, type(exc).__name__)
            return compaction_fail(
                run_id=run_id, code="RUN_FAILED", message=f"{type(exc).__name__}.", clock=clock,
                service_kind=kind,
            )  # fmt: skip


def _kind(service: str) -> str:
    config = service_config(service)
    return config.kind if config is not None else ""


def _layout(run: CompactionRun) -> LayoutConfig:
    return parse_memory_config({"memory": run.config}, accept_no_effect=True)


def _summarise(run: CompactionRun, clock: float) -> Summarised:
    """Phase 1: the summaries, oldest chunk first, until the target or the time budget."""
    layout = _layout(run)
    config = layout.compaction
    latest = TurnContext.objects.filter(session_id=run.session_id).order_by("-turn").first()
    if latest is None:
        raise RunRefused("COMPACTION_NO_HISTORY", "The session has no assembled turn.")
    rows = list(
        Turn.objects.filter(session_id=run.session_id, compacted_by__isnull=True)
        .order_by("index")
        .values_list("pk", "index", "role", "content", "tokens")
    )
    turns = [TurnText(index, role, content, tokens) for _, index, role, content, tokens in rows]
    sections = latest.layout["parts"]["supporting"]["sections"]
    before = Estimate(
        tokens=int(latest.layout["estimateBeforePruning"]),
        available_budget=int(latest.budget_status["availableBudget"]),
        given=given_turns(
            [turn.index for turn in turns],
            query=latest.turn,
            max_history_turns=layout.max_history_turns,
        ),
        summaries_empty=not sections.get("summaries", {}).get("kept"),
    )
    done = Summarised(before=before, after=before, turn_pks={index: pk for pk, index, *_ in rows})
    eligible = candidates(turns, config.compaction_recency_window)
    cut = chunks(
        eligible,
        min_turns=config.min_turns_to_summarize,
        max_turns=config.max_turns_per_summary,
    )
    if not cut:
        done.notes.append(
            f"{len(eligible)} turn(s) outside the recency window of "
            f"{config.compaction_recency_window}; a summary takes at least "
            f"{config.min_turns_to_summarize}."
        )
        return done
    summarizer = summarizer_for(run.service)
    estimate = token_estimator()
    deadline = clock + run.time_budget_ms / 1000
    for chunk in cut:
        step = next_step(
            done.after, config.target_utilization, (deadline - time.monotonic()) * 1000
        )
        if step == TIME_BUDGET_EXHAUSTED:
            done.exhausted = True
        if step != SUMMARISE:
            break
        try:
            text = summarizer.summarize(chunk, remaining_seconds=deadline - time.monotonic())
        except SummarizerError as exc:
            if exc.budget and done.pieces:
                done.exhausted = True
                break
            raise
        done.pieces.append((chunk, text))
        done.after = done.after.replaced(chunk, estimate(text))
    return done


def _apply(run: CompactionRun, done: Summarised, clock: float) -> str:
    """Phase 2, in one transaction."""
    layout = _layout(run)
    config = layout.compaction
    promote = _promotion_executes(run)
    if promote:
        hits_fold(workspace_id=run.workspace_id)  # the promotion rule reads the hits
    with transaction.atomic():
        locked = run_and_session_locked(run.pk)
        if locked is None:
            return "missing"
        run, session = locked
        if run.finished:
            return run.status
        turn_ids = [done.turn_pks[turn.index] for chunk, _ in done.pieces for turn in chunk]
        current = Turn.objects.filter(pk__in=turn_ids, compacted_by__isnull=True).count()
        if current != len(turn_ids):
            raise RunRefused(
                "TURNS_CHANGED", "Some of the turns were summarised or deleted meanwhile."
            )
        summaries = []
        if done.pieces:
            summaries = memory_import(
                workspace=session.workspace,
                actor_id=session.actor.external_id,
                items=[
                    {
                        "content": text,
                        "memory_type": "summary",
                        "source_kind": "system",
                        "confirmation_status": "inferred",
                    }
                    for _, text in done.pieces
                ],
                author=run.author,
            )
        for (chunk, _), memory in zip(done.pieces, summaries, strict=True):
            Turn.objects.filter(pk__in=[done.turn_pks[turn.index] for turn in chunk]).update(
                compacted_by=run
            )
            run.summary_ids.append(memory.pk)
        now = timezone.now()
        if config.insight_dedup_enabled:
            run.insights_superseded = _dedup(session, layout, now)
        if promote:
            run.memories_promoted = _promote(session, now)
        else:
            run.notes.append("Promotion: the workspace's schedule does not execute it.")
        _outcome(run, done, clock)
        compaction_close(run, session)
        return run.status


def _outcome(run: CompactionRun, done: Summarised, clock: float) -> None:
    run.status = CompactionStatus.SUCCEEDED
    run.service_kind = _kind(run.service)
    run.available_budget = done.before.available_budget
    run.tokens_before = done.before.tokens
    run.tokens_after = done.after.tokens
    run.utilization_before = _rounded(done.before.utilization_pct)
    run.utilization_after = _rounded(done.after.utilization_pct)
    run.target_met = done.after.meets(run.target_utilization)
    run.time_budget_exhausted = done.exhausted
    run.turns_summarised = [turn.index for chunk, _ in done.pieces for turn in chunk]
    run.notes = [*done.notes, *run.notes]
    run.duration_ms = elapsed_ms(clock)


def _rounded(pct: float | None) -> float | None:
    return None if pct is None else round(pct, 2)


def _dedup(session: Session, layout: LayoutConfig, now: Any) -> list[int]:
    """The actor's duplicate insights superseded, as the dedup sweep lists and changes
    them, with compaction's threshold and count; rows changed since they were listed (a
    recall's hit) are left for the sweep."""
    config = layout.compaction
    drafts = dedup_listing(
        workspace_id=session.workspace_id,
        actor_pks=[session.actor_id],
        model=embedder_model(),
        limit=config.max_insights_to_check,
        threshold=config.insight_similarity_threshold,
    )
    newer = {draft.memory_id: int(draft.details["supersededBy"]) for draft in drafts}
    locked = memories_locked(workspace_id=session.workspace_id, ids=[*newer, *newer.values()])
    gone = insights_gone(newer)
    ready = {
        draft.memory_id: newer[draft.memory_id]
        for draft in drafts
        if locked.get(draft.memory_id) == draft.fingerprint and draft.memory_id not in gone
    }
    if ready:
        insights_supersede(newer=ready, now=now)
    return sorted(ready)


def _promotion_executes(run: CompactionRun) -> bool:
    settings = lifecycle_settings_current(workspace=run.workspace).document
    return settings.get("schedule", {}).get("promotion") == "execute"


def _promote(session: Session, now: Any) -> list[int]:
    """The actor's memories the promotion sweep's rule finds due, made long-term."""
    settings = lifecycle_settings_current(workspace=session.workspace).document
    drafts = [
        draft
        for page in promotion_listing(
            workspace_id=session.workspace_id,
            settings=settings,
            model=embedder_model(),
            now=now,
            actor_pk=session.actor_id,
        )
        for draft in page
    ]
    locked = memories_locked(workspace_id=session.workspace_id, ids=[d.memory_id for d in drafts])
    ready = sorted(d.memory_id for d in drafts if locked.get(d.memory_id) == d.fingerprint)
    if ready:
        memories_promote(ids=ready, now=now)
    return ready


def compaction_recover(*, now: Any = None) -> list[int]:
    """Send again the runs nobody is processing: running ones whose session's lock is free
    (their worker died), and queued ones no worker took for a while (their message was
    lost)."""
    now = now or timezone.now()
    resent = []
    for run in CompactionRun.objects.filter(status__in=ACTIVE_COMPACTION).order_by("pk"):
        stuck = run.status == CompactionStatus.QUEUED and now - run.created_at > QUEUED_RESEND_AFTER
        if (run.status == CompactionStatus.RUNNING or stuck) and lock_is_free(
            lock_key(run.session_id)
        ):
            compaction_send(run)
            resent.append(run.pk)
    return resent
