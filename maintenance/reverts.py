"""Reverting an executed run: the memories it changed, put back as they were.

An execute records on each item it applies the columns it wrote (its sweep's
``state_columns``), before and after the change, in the transaction that changed the row
(``maintenance.sweeps``). A revert puts ``before`` back on every row that still holds
``after`` (nothing has changed it since) and skips the others, saying why: deleted since,
its actor erased, changed since, or changed before executes recorded the values.

A preview says what an execute would do and writes nothing. An execute locks the rows in id
order (as the sweeps and recall's hit updates do), restores them, marks the items and the
run and records one ``maintenance.reverted`` event, all in one transaction; a run is
reverted once. Only the sweeps that change rows in place are reverted (expiry, decay,
promotion, dedup): a retention run's deletions come back from its archive
(``maintenance.archives``), and a re-embedding keeps no earlier vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from maintenance import sql
from maintenance.models import MaintenanceItem, MaintenanceRun, Mode, Outcome, RevertOutcome
from maintenance.services import IDS_IN_EVENT, MaintenanceConflict
from maintenance.sweeps import SWEEP_CLASSES
from recall.selectors import actors_erased

# Why a memory the run changed is not put back, by code (items, the API, the event).
SKIP_REASONS: dict[str, str] = {
    "deleted": "deleted since the run",
    "erased": "its actor was erased since the run",
    "changed_since": "changed since the run",
    "not_recorded": "changed before runs recorded the values they change",
}
CHUNK = 1_000
# Written by every change, so never put back: a revert is a change of its own.
BOOKKEEPING = ("updated_at",)


@dataclass(frozen=True)
class Skip:
    memory_id: int
    reason: str

    @property
    def message(self) -> str:
        return SKIP_REASONS[self.reason]


@dataclass(frozen=True)
class RevertPlan:
    """What a revert of ``run`` puts back (``restore``) and leaves (``skipped``), out of the
    ``changed`` memories the run changed; once executed, its audit event."""

    run: MaintenanceRun
    changed: int
    restore: list[int]
    skipped: list[Skip]
    executed: bool = False
    event_id: int | None = None
    fields: list[str] = field(default_factory=list)


def revert_refusal(run: MaintenanceRun) -> MaintenanceConflict | None:
    """Why ``run`` cannot be reverted, or None if it can."""
    pk = run.pk

    def refused(reason: str, message: str) -> MaintenanceConflict:
        return MaintenanceConflict("NOT_REVERTIBLE", message, {"runId": pk, "reason": reason})

    if run.mode != Mode.EXECUTE:
        return refused(
            "preview",
            f"Run {pk} is a preview: it changed no memory, so there is nothing to revert.",
        )
    if run.sweep == "sessions":
        return refused(
            "sweep",
            f"Run {pk} deleted ended sessions and their turns past their retention, which a"
            " revert cannot bring back: nothing of them was archived.",
        )
    if run.sweep == "retention":
        return refused(
            "sweep",
            f"Run {pk} deleted memories, which a revert cannot bring back: restore them from its"
            f' archive (POST /v1/maintenance/runs/{pk}/restore, or "Restore these memories" on'
            " the run's page) while the archive is kept.",
        )
    if not SWEEP_CLASSES[run.sweep].revertible:
        return refused(
            "sweep",
            f"Run {pk} re-embedded memories and kept no earlier vectors, so it cannot be"
            " reverted (with RECALL_EMBEDDER set back, a re-embed computes them again).",
        )
    if not run.finished:
        return MaintenanceConflict(
            "RUN_NOT_FINISHED",
            f"Run {pk} is {run.status}: revert it once it has finished, or cancel it first.",
            {"runId": pk, "status": run.status},
        )
    if run.reverted_at is not None:
        return MaintenanceConflict(
            "ALREADY_REVERTED",
            f"Run {pk} was reverted on {run.reverted_at:%Y-%m-%d %H:%M} UTC by"
            f" {run.reverted_by}; a run is reverted once.",
            {
                "runId": pk,
                "revertedAt": run.reverted_at.isoformat(),
                "revertedBy": run.reverted_by,
                "auditEventId": run.revert_event_id,
            },
        )
    if not run.applied:
        return refused(
            "nothing_changed", f"Run {pk} changed no memory: there is nothing to revert."
        )
    if not MaintenanceItem.objects.filter(
        run=run, outcome=Outcome.APPLIED, before__isnull=False
    ).exists():
        return refused(
            "not_recorded",
            f"Run {pk} was executed before runs recorded the values they change, so it cannot"
            " be reverted. Change its memories back one by one (a stale or expired memory:"
            " reactivate it).",
        )
    return None


def revertible_fields(run: MaintenanceRun) -> list[str]:
    """The memory columns a revert of ``run`` puts back."""
    columns = SWEEP_CLASSES[run.sweep].state_columns
    return [column for column in columns if column not in BOOKKEEPING]


def maintenance_revert_preview(*, run: MaintenanceRun) -> RevertPlan:
    """What reverting ``run`` would put back and skip, and why; writes nothing."""
    refusal = revert_refusal(run)
    if refusal is not None:
        raise refusal
    changed, restore, skipped = _plan(run, lock=False)
    return RevertPlan(run, changed, restore, skipped, fields=revertible_fields(run))


def maintenance_revert(
    *, run: MaintenanceRun, author: str, confirm: int | None = None
) -> RevertPlan:
    """Put back what ``run`` changed, where nothing changed it since; one audit event.

    ``confirm``, if given, must be the number of memories put back (as the preview said);
    otherwise nothing is changed. Raises ``MaintenanceConflict`` (nothing written) for a run
    that cannot be reverted, or has nothing left to put back.
    """
    with transaction.atomic():
        # The run's row serialises reverts of the run: a second one waits, then is refused.
        locked = (
            MaintenanceRun.objects.select_for_update().select_related("workspace").get(pk=run.pk)
        )
        refusal = revert_refusal(locked)
        if refusal is not None:
            raise refusal
        changed, restore, skipped = _plan(locked, lock=True)
        if confirm is not None and confirm != len(restore):
            raise MaintenanceConflict(
                "CONFIRMATION_MISMATCH",
                f"A revert of run {locked.pk} now puts back {len(restore)} memories, not"
                f" {confirm}; nothing was changed. Preview again.",
                {"count": len(restore), "confirm": confirm},
            )
        if not restore:
            raise MaintenanceConflict(
                "NOTHING_TO_REVERT",
                f"Every memory run {locked.pk} changed has changed since or is gone: nothing to"
                " put back, and nothing was changed.",
                {"runId": locked.pk, "skipped": len(skipped)},
            )
        now = timezone.now()
        fields = revertible_fields(locked)
        _restore(locked, restore, fields, now)
        _mark_items(locked, restore, skipped)
        event = audit_event_record(
            workspace=locked.workspace,
            type=EventType.MAINTENANCE_REVERTED,
            author=author,
            payload=_event_payload(locked, changed, restore, skipped, fields),
        )
        locked.reverted_at = now
        locked.reverted_by = author
        locked.revert_event_id = event.pk
        locked.save(update_fields=["reverted_at", "reverted_by", "revert_event_id"])
    run.refresh_from_db()
    return RevertPlan(
        run, changed, restore, skipped, executed=True, event_id=event.pk, fields=fields
    )


def _plan(run: MaintenanceRun, *, lock: bool) -> tuple[int, list[int], list[Skip]]:
    """The memories the run changed, split into those to put back and those to skip."""
    columns = SWEEP_CLASSES[run.sweep].state_columns
    items = list(
        MaintenanceItem.objects.filter(run=run, outcome=Outcome.APPLIED)
        .order_by("memory_id")
        .values_list("memory_id", "actor_id", "after")
    )
    restore: list[int] = []
    skipped: list[Skip] = []
    missing: list[tuple[int, str]] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        recorded = [pk for pk, _, after in chunk if after is not None]
        # As the run left it: the columns it wrote still hold what it wrote.
        unchanged = sql.states_unchanged(
            run_id=run.pk, workspace_id=run.workspace_id, ids=recorded, columns=columns, lock=lock
        )
        for pk, actor, after in chunk:
            if after is None:
                skipped.append(Skip(pk, "not_recorded"))
            elif pk not in unchanged:
                missing.append((pk, actor))
            elif unchanged[pk]:
                restore.append(pk)
            else:
                skipped.append(Skip(pk, "changed_since"))
    erased = actors_erased(workspace_id=run.workspace_id, actor_ids={a for _, a in missing})
    skipped += [Skip(pk, "erased" if actor in erased else "deleted") for pk, actor in missing]
    skipped.sort(key=lambda skip: skip.memory_id)
    return len(items), restore, skipped


def _restore(run: MaintenanceRun, ids: Sequence[int], fields: Sequence[str], now: datetime) -> None:
    """Write each row's recorded ``before`` back into ``fields`` (rows locked by the plan)."""
    for start in range(0, len(ids), CHUNK):
        sql.states_restore(
            run_id=run.pk,
            workspace_id=run.workspace_id,
            ids=ids[start : start + CHUNK],
            fields=fields,
            now=now,
        )


def _mark_items(run: MaintenanceRun, restore: Sequence[int], skipped: Sequence[Skip]) -> None:
    for start in range(0, len(restore), CHUNK):
        MaintenanceItem.objects.filter(
            run=run, memory_id__in=restore[start : start + CHUNK]
        ).update(revert_outcome=RevertOutcome.REVERTED, revert_reason="")
    for reason in SKIP_REASONS:
        ids = [skip.memory_id for skip in skipped if skip.reason == reason]
        for start in range(0, len(ids), CHUNK):
            MaintenanceItem.objects.filter(
                run=run, memory_id__in=ids[start : start + CHUNK]
            ).update(revert_outcome=RevertOutcome.SKIPPED, revert_reason=reason)


def _event_payload(
    run: MaintenanceRun,
    changed: int,
    restore: Sequence[int],
    skipped: Sequence[Skip],
    fields: Sequence[str],
) -> dict[str, object]:
    """Counts, the fields put back and the ids (the first thousand of each; the run's items
    hold them all), never any content."""
    reasons: dict[str, int] = {}
    for skip in skipped:
        reasons[skip.reason] = reasons.get(skip.reason, 0) + 1
    return {
        "runId": run.pk,
        "sweep": run.sweep,
        "counts": {"changed": changed, "reverted": len(restore), "skipped": len(skipped)},
        "fields": list(fields),
        "revertedIds": [str(pk) for pk in restore[:IDS_IN_EVENT]],
        "revertedIdsTruncated": len(restore) > IDS_IN_EVENT,
        "skippedIds": [str(skip.memory_id) for skip in skipped[:IDS_IN_EVENT]],
        "skippedIdsTruncated": len(skipped) > IDS_IN_EVENT,
        "skippedReasons": reasons,
    }
