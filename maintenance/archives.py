"""Retention archives: what a retention run deleted, kept as JSON Lines parts with their
SHA-256 (written by the run's batches, ``maintenance.sweeps``; read by
``maintenance.selectors``), restored, and purged after the workspace's
``archiveRetentionDays``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from maintenance.models import ArchiveChunk, MaintenanceRun, Mode
from maintenance.selectors import settings_of, with_settings
from maintenance.services import MaintenanceConflict
from portal.errors import ValidationFailed
from portal.models import Workspace
from recall.api.serializers import MemoryInputSerializer
from recall.jsonl import parse_jsonl_lines
from recall.models import MemoryRecord
from recall.services import memory_import


@dataclass(frozen=True)
class Restored:
    restored: int
    already_present: int


def maintenance_archive_restore(*, run: MaintenanceRun, author: str) -> Restored:
    """Put a retention run's deleted memories back, under their own ids, as they were.

    Each part is checked against its SHA-256 first. Memories already back (a second
    restore) are left alone, so restoring twice restores once.
    """
    if run.sweep != "retention" or run.mode != Mode.EXECUTE:
        raise ValidationFailed({"run": "Only a retention execute has an archive to restore."})
    chunks = list(ArchiveChunk.objects.filter(run=run).order_by("seq"))
    if not chunks:
        raise MaintenanceConflict(
            "NO_ARCHIVE",
            f"Run {run.pk} has no archive"
            + (" (purged after the archive retention)." if run.archive_purged_at else "."),
        )
    for chunk in chunks:
        if hashlib.sha256(chunk.lines.encode()).hexdigest() != chunk.sha256:
            raise MaintenanceConflict(
                "ARCHIVE_CORRUPT",
                f"Part {chunk.seq} of run {run.pk}'s archive does not match its SHA-256;"
                " nothing was restored.",
            )
    restored = present = 0
    with transaction.atomic():
        for chunk in chunks:
            items, errors = parse_jsonl_lines(chunk.lines, MemoryInputSerializer)
            if errors:
                raise MaintenanceConflict(
                    "ARCHIVE_UNREADABLE",
                    f"Part {chunk.seq} of the archive has lines the import refuses"
                    f" (line {errors[0].line}: {errors[0].message}); nothing was restored.",
                )
            ids = [item["id"] for item in items]
            back = set(MemoryRecord.objects.filter(pk__in=ids).values_list("pk", flat=True))
            fresh = [item for item in items if item["id"] not in back]
            present += len(items) - len(fresh)
            if fresh:
                memory_import(workspace=run.workspace, actor_id=None, items=fresh, author=author)
                restored += len(fresh)
        audit_event_record(
            workspace=run.workspace,
            type=EventType.ARCHIVE_RESTORED,
            author=author,
            payload={"runId": run.pk, "restored": restored, "alreadyPresent": present},
        )
    return Restored(restored, present)


def archives_purge(*, now: datetime | None = None) -> int:
    """Delete the archives older than their workspace's ``archiveRetentionDays``: two queries
    to find them, whatever the number of workspaces, then one transaction per run purged."""
    now = now or timezone.now()
    by_days: dict[int, list[int]] = {}
    for workspace in with_settings(
        Workspace.objects.filter(maintenance_runs__archive__isnull=False).distinct()
    ):
        by_days.setdefault(settings_of(workspace)["archiveRetentionDays"], []).append(workspace.pk)
    if not by_days:
        return 0
    due = Q()
    for days, workspace_ids in by_days.items():
        due |= Q(workspace_id__in=workspace_ids, finished_at__lt=now - timedelta(days=days))
    runs = MaintenanceRun.objects.filter(due, sweep="retention", archive_purged_at__isnull=True)
    purged = 0
    for run in runs.order_by("pk"):
        with transaction.atomic():
            ArchiveChunk.objects.filter(run=run).delete()
            MaintenanceRun.objects.filter(pk=run.pk).update(archive_purged_at=now)
        purged += 1
    return purged
