"""Maintenance writes: lifecycle settings, and sweep runs from start to finish.

A run goes ``queued`` → ``running`` → ``succeeded`` (or ``failed``, ``refused``,
``cancelled``). :func:`maintenance_start` checks the request and writes the run;
:func:`maintenance_run_process` (the ``maintenance.run`` task) lists what the sweep would
change — or copies what the preview listed — then, for an execute, checks the preflight
conditions and changes the listed rows in batches, then records one audit event.

Safety, in order of the seed's warnings ("quiesce before mutating"; "uncertain partial
mutation needs reconciliation rather than replay"):

* one execute per workspace at a time: the database refuses a second active execute
  (a partial unique index), and the process executing holds the workspace's advisory lock;
* each batch is one transaction: its rows, their items' outcomes and the run's progress
  commit together, so a crash leaves every row either before or after;
* a row is changed only if it is still as it was listed (its fingerprint); others are
  skipped and reported, so a run processed again finishes the job instead of replaying it;
* a retention run writes the rows it deletes to its archive in the same transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from maintenance import lifecycle
from maintenance.lifecycle import SWEEPS, LifecycleSettingsInvalid
from maintenance.models import (
    ACTIVE_STATUSES,
    LifecycleSettingsVersion,
    MaintenanceItem,
    MaintenanceRun,
    Mode,
    Outcome,
    Status,
    Trigger,
)
from maintenance.selectors import archive_manifest, lifecycle_settings_current
from maintenance.sweeps import SWEEP_CLASSES, apply_batch
from policies import algebra
from policies.services import change_comment
from portal.errors import DomainError, NotFoundError, UnprocessableError, ValidationFailed
from portal.models import Workspace
from portal.tasks import TRANSIENT_ERRORS, QueueUnavailable, enqueue
from portal.versioning import versioned_save
from recall.hits import hits_fold
from recall.models import MemoryRecord
from recall.runtime import embedder_model

logger = logging.getLogger(__name__)

IDS_IN_EVENT = 1000
# A queued run that no worker has taken after this long is sent again (its message lost).
QUEUED_RESEND_AFTER = timedelta(minutes=10)


class MaintenanceConflict(DomainError):
    """A request that is well formed but cannot be done now (HTTP 409)."""

    status = 409


# --- lifecycle settings -------------------------------------------------------------------------


@transaction.atomic
def lifecycle_settings_save(
    *, workspace: Workspace, document: Any, author: str, comment: Any = ""
) -> LifecycleSettingsVersion:
    """Save a complete settings document (missing keys take their defaults) as a new version,
    with its audit event. A save identical to the current settings records nothing."""
    try:
        normalized = lifecycle.normalize_settings(document)
    except LifecycleSettingsInvalid as exc:
        if exc.malformed:
            raise ValidationFailed(exc.fields, "The lifecycle settings are not valid.") from None
        raise UnprocessableError(
            "PROMOTION_WEIGHTS_UNBALANCED",
            "The promotion weights must add up to 1; nothing was saved.",
            {"fields": exc.fields},
        ) from None
    comment = change_comment(comment)

    def locked_document() -> dict[str, Any]:
        # The workspace row serialises saves: two cannot both become version n+1.
        Workspace.objects.select_for_update(no_key=True).filter(pk=workspace.pk).first()
        return normalized

    def insert(document: dict[str, Any], number: int) -> LifecycleSettingsVersion:
        return LifecycleSettingsVersion.objects.create(
            workspace=workspace, version=number, document=document, author=author, comment=comment
        )

    def record(
        document: dict[str, Any],
        previous: LifecycleSettingsVersion | None,
        version: LifecycleSettingsVersion,
    ) -> None:
        before = previous.document if previous is not None else None  # never None: defaults
        audit_event_record(
            workspace=workspace,
            type=EventType.LIFECYCLE_SETTINGS_SET,
            author=author,
            payload={
                "version": version.version,
                "before": before,
                "after": document,
                "diff": algebra.diff_documents(before, document),
                "comment": comment,
            },
        )

    # The current settings are never missing: a workspace that never saved any is on the
    # defaults, an unsaved version 0 (so the first save is version 1).
    return versioned_save(
        what="The lifecycle settings",
        base_version=None,
        locked_document=locked_document,
        latest=lambda: lifecycle_settings_current(workspace=workspace),
        unchanged=lambda current, document: current.document == document,
        insert=insert,
        record=record,
    )


def lifecycle_settings_patch(
    *, workspace: Workspace, changes: Any, author: str, comment: Any = ""
) -> LifecycleSettingsVersion:
    """Save the current settings with ``changes`` applied (the keys it names only)."""
    if not isinstance(changes, dict):
        raise ValidationFailed({"settings": "Send the changed settings as a JSON object."})
    current = lifecycle_settings_current(workspace=workspace).document
    return lifecycle_settings_save(
        workspace=workspace, document={**current, **changes}, author=author, comment=comment
    )


# --- starting a run -----------------------------------------------------------------------------


def sweep_check(sweep: str) -> str:
    if sweep not in SWEEPS:
        raise NotFoundError(
            f"There is no sweep {sweep!r}; the sweeps are {', '.join(SWEEPS)}.",
            {"sweeps": list(SWEEPS)},
        )
    return sweep


def mode_check(mode: Any) -> str:
    if mode not in Mode.values:
        raise ValidationFailed(
            {"mode": f"Use mode=preview or mode=execute; got {mode!r}."},
            "Unknown mode: use preview or execute.",
        )
    return str(mode)


def maintenance_start(
    *,
    workspace: Workspace,
    sweep: str,
    mode: str,
    author: str,
    preview_id: Any = None,
    confirm: int | None = None,
    trigger: str = Trigger.MANUAL,
) -> MaintenanceRun:
    """Check a run request, write the run and send it to be processed.

    Without a broker the run has been processed when this returns; with one it is queued.
    Raises a ``DomainError`` (nothing written) for a request that cannot be done.
    """
    sweep_check(sweep)
    mode_check(mode)
    version = lifecycle_settings_current(workspace=workspace)
    preview = None
    if preview_id is not None:
        if mode != Mode.EXECUTE:
            raise ValidationFailed(
                {"preview": "Only an execute names a preview to carry out."},
                "A preview does not take a preview.",
            )
        preview = _usable_preview(workspace, sweep, preview_id, version)
    if mode == Mode.EXECUTE and trigger == Trigger.MANUAL:
        _check_confirmation(workspace, sweep, preview, version.document, confirm)
    try:
        with transaction.atomic():
            run = MaintenanceRun.objects.create(
                workspace=workspace,
                sweep=sweep,
                mode=mode,
                trigger=trigger,
                preview=preview,
                settings_version=version.version,
                settings=version.document,
                embedder=embedder_model(),
                confirm=confirm,
                author=author,
            )
    except IntegrityError as exc:
        raise _start_conflict(workspace, preview, exc) from None
    try:
        _send(run)
    except QueueUnavailable:
        _fail_unsent(run)
        raise QueueUnavailable(
            f"The task queue is not reachable right now, so run {run.pk} was not started and"
            " changed nothing; it is recorded as failed. Try again shortly.",
            {"runId": run.pk},
        ) from None
    run.refresh_from_db()
    return run


def _send(run: MaintenanceRun) -> None:
    enqueue("maintenance.run", run.pk)


def _fail_unsent(run: MaintenanceRun) -> None:
    """Record a run whose task could not be sent as failed, with its one event: left queued,
    it would hold the workspace's execute slot, and the tick would send it again later,
    behind the back of an operator who was told it did not start. A run a worker took after
    all (the message went out before the error) is left to that worker."""
    with transaction.atomic():
        queued = (
            MaintenanceRun.objects.select_for_update().filter(pk=run.pk, status=Status.QUEUED)
        ).first()
        if queued is not None:
            _finish(
                run,
                Status.FAILED,
                code="QUEUE_UNAVAILABLE",
                error="The task queue was not reachable; the run was never started.",
            )


def _start_conflict(
    workspace: Workspace, preview: MaintenanceRun | None, exc: IntegrityError
) -> DomainError:
    if "maintenance_preview_executed_once" in str(exc) and preview is not None:
        return MaintenanceConflict(
            "PREVIEW_ALREADY_EXECUTED",
            f"Preview {preview.pk} is already executed (or being executed); preview again.",
            {"preview": preview.pk},
        )
    active = (
        MaintenanceRun.objects.filter(
            workspace=workspace, mode=Mode.EXECUTE, status__in=ACTIVE_STATUSES
        )
        .order_by("-id")
        .first()
    )
    return MaintenanceConflict(
        "MAINTENANCE_IN_PROGRESS",
        "Another maintenance run is executing in this workspace"
        + (f" (run {active.pk}, {active.sweep}, {active.status})" if active else "")
        + "; wait for it to finish, or cancel it.",
        {"runId": active.pk if active else None},
    )


def _usable_preview(
    workspace: Workspace, sweep: str, preview_id: Any, version: LifecycleSettingsVersion
) -> MaintenanceRun:
    try:
        pk = int(preview_id)
    except (TypeError, ValueError):
        raise ValidationFailed({"preview": f"Not a run id: {preview_id!r}."}) from None
    preview = MaintenanceRun.objects.filter(pk=pk, workspace=workspace).first()
    if preview is None:
        raise NotFoundError(f"No preview run {pk} in this workspace.")
    if preview.mode != Mode.PREVIEW:
        raise ValidationFailed(
            {"preview": f"Run {pk} is an execute, not a preview."}, "That run is not a preview."
        )
    if preview.sweep != sweep:
        raise ValidationFailed(
            {"preview": f"Run {pk} previews the {preview.sweep} sweep, not {sweep}."},
            "That preview is of another sweep.",
        )
    if preview.status != Status.SUCCEEDED:
        raise MaintenanceConflict(
            "PREVIEW_NOT_FINISHED",
            f"Preview {pk} is {preview.status}; only a finished preview can be executed.",
            {"preview": pk, "status": preview.status},
        )
    max_age = timedelta(hours=version.document["previewMaxAgeHours"])
    reference = preview.as_of or preview.created_at
    if preview.settings_version != version.version:
        raise MaintenanceConflict(
            "PREVIEW_STALE",
            f"Preview {pk} was made under lifecycle settings v{preview.settings_version}; they"
            f" are now v{version.version}. Preview again.",
            {"preview": pk, "settingsVersion": version.version},
        )
    if timezone.now() - reference > max_age:
        raise MaintenanceConflict(
            "PREVIEW_STALE",
            f"Preview {pk} is older than {version.document['previewMaxAgeHours']:g} hours;"
            " preview again.",
            {"preview": pk, "maxAgeHours": version.document["previewMaxAgeHours"]},
        )
    return preview


@dataclass(frozen=True)
class RetentionShare:
    count: int
    memories: int

    @property
    def share(self) -> float:
        return self.count / self.memories if self.memories else 0.0


def retention_share(
    *, workspace: Workspace, settings: dict[str, Any], count: int | None = None
) -> RetentionShare:
    """How many memories a retention run would delete, out of the workspace's."""
    if count is None:
        cutoff = timezone.now() - timedelta(days=settings["retentionDays"])
        count = (
            MemoryRecord.objects.filter(workspace=workspace, lifecycle_status="stale")
            .extra(where=["coalesce(stale_since, updated_at) < %s"], params=[cutoff])
            .count()
        )
    return RetentionShare(count, MemoryRecord.objects.filter(workspace=workspace).count())


def _check_confirmation(
    workspace: Workspace,
    sweep: str,
    preview: MaintenanceRun | None,
    settings: dict[str, Any],
    confirm: int | None,
) -> None:
    """An execute that names a count must name the right one; a retention run deleting more
    than ``retentionMaxShare`` of the workspace must name it."""
    if preview is not None and confirm is not None and confirm != preview.total:
        raise MaintenanceConflict(
            "CONFIRMATION_MISMATCH",
            f"Preview {preview.pk} lists {preview.total} memories, not {confirm}.",
            {"count": preview.total, "confirm": confirm},
        )
    if sweep != "retention":
        return
    share = retention_share(
        workspace=workspace,
        settings=settings,
        count=preview.total if preview is not None else None,
    )
    if share.share > settings["retentionMaxShare"] and confirm != share.count:
        raise MaintenanceConflict(
            "CONFIRMATION_REQUIRED",
            f"This retention run would delete {share.count} of the workspace's"
            f" {share.memories} memories ({share.share:.0%}, more than the"
            f" {settings['retentionMaxShare']:.0%} allowed unconfirmed). Confirm with the exact"
            f" count: confirm={share.count}.",
            {
                "count": share.count,
                "memories": share.memories,
                "share": round(share.share, 4),
                "maxShare": settings["retentionMaxShare"],
            },
        )


# --- processing a run ---------------------------------------------------------------------------


class Busy(Exception):
    """Another process holds the run's lock: it is being processed; try again later."""


class Refused(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Cancelled(Exception):
    pass


def lock_key(run: MaintenanceRun) -> str:
    """An execute holds its workspace's lock (one execute per workspace at a time); a preview
    only its own (two deliveries of one task must not list it twice)."""
    if run.mode == Mode.EXECUTE:
        return f"maintenance:workspace:{run.workspace_id}"
    return f"maintenance:run:{run.pk}"


@contextmanager
def advisory_lock(key: str) -> Iterator[bool]:
    """A session-level PostgreSQL advisory lock, if free. It is released here, or by the
    server when the holder's connection dies (a worker killed mid-run frees it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [key])
        (held,) = cursor.fetchone()
    try:
        yield bool(held)
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [key])


def lock_is_free(key: str) -> bool:
    with advisory_lock(key) as held:
        return held


def maintenance_run_process(*, run_id: int) -> str:
    """List, check and execute one run; idempotent: processing a run again finishes it.

    Returns the run's status. Raises ``Busy`` while another process holds its lock, and
    transient database errors (the task retries both).
    """
    run = MaintenanceRun.objects.select_related("workspace").filter(pk=run_id).first()
    if run is None or run.finished:
        return run.status if run else "missing"
    with advisory_lock(lock_key(run)) as held:
        if not held:
            raise Busy(f"run {run_id} is being processed elsewhere")
        run.refresh_from_db()
        if run.finished:
            return run.status
        now = timezone.now()
        if not MaintenanceRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
            status=Status.RUNNING, started_at=run.started_at or now, heartbeat_at=now
        ):
            # Finished since it was read (a run whose sending failed is marked failed).
            run.refresh_from_db()
            return run.status
        run.refresh_from_db()
        try:
            if run.listed_at is None:
                hits_fold(workspace_id=run.workspace_id)  # decay and promotion read the hits
                _list(run)
            if run.mode == Mode.EXECUTE:
                _preflight(run)
                _execute(run)
            _finish(run, Status.SUCCEEDED)
        except Refused as exc:
            _finish(run, Status.REFUSED, code=exc.code, error=exc.message)
        except Cancelled:
            _finish(run, Status.CANCELLED)
        except TRANSIENT_ERRORS:
            raise  # the task retries; the run stays running and resumes where it stopped
        except Exception as exc:  # noqa: BLE001 - recorded on the run, then re-raised
            if _is_soft_time_limit(exc):
                raise  # the task is sent again and continues from the last batch
            # The message only: a database error's details may quote row values.
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            # The class only: a traceback's messages may quote memory content.
            logger.error("maintenance run %s failed: %s", run.pk, type(exc).__name__)
            _finish(run, Status.FAILED, code="RUN_FAILED", error=message)
        run.refresh_from_db()
        return run.status


def _is_soft_time_limit(exc: Exception) -> bool:
    from celery.exceptions import SoftTimeLimitExceeded

    return isinstance(exc, SoftTimeLimitExceeded)


def _list(run: MaintenanceRun) -> None:
    """Write the run's items: a copy of its preview's, or the sweep's listing. A listing cut
    short by a crash is thrown away and written again."""
    MaintenanceItem.objects.filter(run=run).delete()
    if run.preview_id is not None:
        preview = MaintenanceRun.objects.get(pk=run.preview_id)
        as_of = preview.as_of
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {MaintenanceItem._meta.db_table}"
                " (run_id, memory_id, actor_id, reason, score, details, fingerprint, outcome,"
                " note) SELECT %s, memory_id, actor_id, reason, score, details, fingerprint,"
                " %s, '' FROM maintenance_maintenanceitem WHERE run_id = %s",
                [run.pk, Outcome.LISTED, preview.pk],
            )
    else:
        as_of = timezone.now()
        run.as_of = as_of
        for drafts in SWEEP_CLASSES[run.sweep].drafts(run):
            MaintenanceItem.objects.bulk_create([d.item(run) for d in drafts], batch_size=1000)
            MaintenanceRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
            _check_cancelled(run)
    total = MaintenanceItem.objects.filter(run=run).count()
    MaintenanceRun.objects.filter(pk=run.pk).update(
        as_of=as_of, total=total, listed_at=timezone.now(), done=0, applied=0, skipped=0
    )
    run.refresh_from_db()


def _check_cancelled(run: MaintenanceRun) -> None:
    if MaintenanceRun.objects.filter(pk=run.pk, status=Status.CANCELLED).exists():
        raise Cancelled()


def _preflight(run: MaintenanceRun) -> None:
    """Checks before the first change (once changes began, they are not asked again)."""
    if run.done:
        return
    if run.confirm is not None and run.confirm != run.total:
        raise Refused(
            "CONFIRMATION_MISMATCH",
            f"Confirmed {run.confirm} memories, but the run lists {run.total}; nothing was"
            " changed. Preview again.",
        )
    if run.sweep == "retention":
        share = retention_share(workspace=run.workspace, settings=run.settings, count=run.total)
        if share.share > run.settings["retentionMaxShare"] and run.confirm != run.total:
            raise Refused(
                "CONFIRMATION_REQUIRED",
                f"Would delete {share.count} of {share.memories} memories ({share.share:.0%},"
                f" more than the {run.settings['retentionMaxShare']:.0%} allowed unconfirmed);"
                " nothing was changed. Execute its preview with the count confirmed.",
            )
    if run.sweep == "reembed" and embedder_model() != run.embedder:
        raise Refused(
            "EMBEDDER_MISMATCH",
            f"This process embeds with {embedder_model()}, the run with {run.embedder}.",
        )


def _execute(run: MaintenanceRun) -> None:
    batch = django_settings.MAINTENANCE_BATCH_SIZE
    pause = django_settings.MAINTENANCE_BATCH_PAUSE_MS / 1000
    while True:
        # Each batch decides on hits counted up to now (recall/hits.py); not in the batch's
        # transaction, which would keep recalls waiting for its end.
        hits_fold(workspace_id=run.workspace_id)
        with transaction.atomic():
            locked = MaintenanceRun.objects.select_for_update().get(pk=run.pk)
            if locked.status == Status.CANCELLED:
                raise Cancelled()
            items = list(
                MaintenanceItem.objects.filter(run=run, outcome=Outcome.LISTED).order_by(
                    "memory_id"
                )[:batch]
            )
            if not items:
                return
            apply_batch(locked, items, timezone.now())
        if pause:
            time.sleep(pause)


def _finish(run: MaintenanceRun, status: str, *, code: str = "", error: str = "") -> MaintenanceRun:
    """Mark the run finished and record its one audit event (once, whoever calls)."""
    with transaction.atomic():
        locked = (
            MaintenanceRun.objects.select_for_update().select_related("workspace").get(pk=run.pk)
        )
        if locked.event_id is not None:
            return locked
        if locked.status == Status.CANCELLED:
            status = Status.CANCELLED
        locked.status = status
        locked.error_code = code
        locked.error = error
        locked.finished_at = timezone.now()
        event = audit_event_record(
            workspace=locked.workspace,
            type=EventType.MAINTENANCE_EXECUTED
            if locked.mode == Mode.EXECUTE
            else EventType.MAINTENANCE_PREVIEWED,
            author=locked.author,
            payload=run_event_payload(locked),
        )
        locked.event_id = event.pk
        locked.save(update_fields=["status", "error_code", "error", "finished_at", "event_id"])
        return locked


def run_event_payload(run: MaintenanceRun) -> dict[str, Any]:
    """What the trail keeps of a run: counts, the preview it executed, the ids it changed
    (the first thousand; the run's items hold them all), never any content."""
    payload: dict[str, Any] = {
        "runId": run.pk,
        "sweep": run.sweep,
        "mode": run.mode,
        "status": run.status,
        "trigger": run.trigger,
        "settingsVersion": run.settings_version,
        "embedder": run.embedder,
        "asOf": run.as_of.isoformat() if run.as_of else None,
        "counts": {"listed": run.total, "applied": run.applied, "skipped": run.skipped},
    }
    if run.error_code:
        payload["error"] = {"code": run.error_code, "message": run.error}
    if run.mode == Mode.EXECUTE:
        payload["preview"] = run.preview_id
        payload["confirm"] = run.confirm
        ids = list(
            MaintenanceItem.objects.filter(run=run, outcome=Outcome.APPLIED)
            .order_by("memory_id")
            .values_list("memory_id", flat=True)[: IDS_IN_EVENT + 1]
        )
        payload["appliedIds"] = [str(pk) for pk in ids[:IDS_IN_EVENT]]
        payload["appliedIdsTruncated"] = len(ids) > IDS_IN_EVENT
        if run.sweep == "retention":
            manifest = archive_manifest(run)
            payload["archive"] = {"count": manifest["count"], "sha256": manifest["sha256"]}
    return payload


def maintenance_cancel(*, run: MaintenanceRun, author: str) -> MaintenanceRun:
    """Stop a queued or running run after its current batch; what it changed stays changed
    (and is recorded). Cancelling a finished run is refused."""
    with transaction.atomic():
        locked = MaintenanceRun.objects.select_for_update().get(pk=run.pk)
        if locked.finished:
            raise MaintenanceConflict(
                "RUN_FINISHED",
                f"Run {locked.pk} is already {locked.status}.",
                {"status": locked.status},
            )
        was = locked.status
        locked.status = Status.CANCELLED
        locked.error = f"Cancelled by {author}."
        locked.save(update_fields=["status", "error"])
    if was == Status.QUEUED or lock_is_free(lock_key(locked)):
        # Nobody is processing it: record it now (a worker taking it later does nothing).
        _finish(locked, Status.CANCELLED)
    locked.refresh_from_db()
    return locked


# --- recovery ----------------------------------------------------------------------------------


def maintenance_recover(*, now: datetime | None = None) -> list[int]:
    """Send again the runs nobody is processing: running ones whose lock is free (their
    worker died), and queued ones no worker took for a while (their message was lost)."""
    now = now or timezone.now()
    resent = []
    for run in MaintenanceRun.objects.filter(status__in=ACTIVE_STATUSES).order_by("pk"):
        stuck_queued = run.status == Status.QUEUED and now - run.created_at > QUEUED_RESEND_AFTER
        if (run.status == Status.RUNNING or stuck_queued) and lock_is_free(lock_key(run)):
            _send(run)
            resent.append(run.pk)
    return resent
