"""Reads for maintenance: lifecycle settings, runs and their items, a memory's lifecycle,
retention archives."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import JSONField, OuterRef, QuerySet, Subquery
from django.utils import timezone

from maintenance import lifecycle
from maintenance.connections import memory_connections
from maintenance.models import ArchiveChunk, LifecycleSettingsVersion, MaintenanceRun, Trigger
from portal.models import Workspace
from recall.models import MemoryRecord
from recall.runtime import embedder_model

DEFAULTS_AUTHOR = "system:defaults"


def lifecycle_settings_current(*, workspace: Workspace) -> LifecycleSettingsVersion:
    """The workspace's current lifecycle settings.

    A workspace that never saved any runs on the defaults: an unsaved version 0, so that
    reading writes nothing and the first save becomes version 1. A version saved before a
    setting or a sweep existed reads with it at its default (``lifecycle.settings_completed``).
    """
    version = (
        LifecycleSettingsVersion.objects.filter(workspace=workspace).order_by("-version").first()
    )
    if version is not None:
        version.document = lifecycle.settings_completed(version.document)
    else:
        version = LifecycleSettingsVersion(
            workspace=workspace,
            version=0,
            document=lifecycle.default_settings(),
            author=DEFAULTS_AUTHOR,
            comment="The defaults (never saved)",
            created_at=workspace.created_at,
        )
    return version


@dataclass(frozen=True)
class ScheduleState:
    """A workspace as beat's tick sees it: its current lifecycle settings and when each sweep
    last ran on the schedule (None: never)."""

    workspace: Workspace
    document: dict[str, Any]
    last_scheduled: dict[str, datetime | None]


_DOCUMENT = "settings_document"  # the annotation holding the current settings


def with_settings(workspaces: QuerySet[Workspace]) -> QuerySet[Workspace]:
    """The workspaces, each with its current lifecycle settings document read in the same
    query (``settings_of`` reads it: a workspace that never saved any has the defaults)."""
    newest = LifecycleSettingsVersion.objects.filter(workspace=OuterRef("pk")).order_by("-version")
    return workspaces.annotate(
        **{_DOCUMENT: Subquery(newest.values("document")[:1], output_field=JSONField())}
    )


def settings_of(workspace: Workspace) -> dict[str, Any]:
    """The current settings document of a workspace read ``with_settings`` (one saved before a
    setting or a sweep existed with it at its default)."""
    document = getattr(workspace, _DOCUMENT)
    return lifecycle.settings_completed(document) if document else lifecycle.default_settings()


def schedule_states() -> list[ScheduleState]:
    """Every workspace with its current settings and its sweeps' last scheduled runs, in one
    query whatever the number of workspaces. Each lookup walks an index newest first: the
    workspace's settings versions, and per sweep its runs by id (the order they are created
    in) until the first scheduled one."""
    last = {
        sweep: Subquery(
            MaintenanceRun.objects.filter(
                workspace=OuterRef("pk"), sweep=sweep, trigger=Trigger.SCHEDULE
            )
            .order_by("-id")
            .values("created_at")[:1]
        )
        for sweep in lifecycle.SWEEPS
    }
    rows = with_settings(Workspace.objects.order_by("pk")).annotate(
        **{f"last_{sweep}": query for sweep, query in last.items()}
    )
    return [
        ScheduleState(
            workspace=row,
            document=settings_of(row),
            last_scheduled={sweep: getattr(row, f"last_{sweep}") for sweep in lifecycle.SWEEPS},
        )
        for row in rows
    ]


def runs_for(*, workspace: Workspace) -> QuerySet[MaintenanceRun]:
    return MaintenanceRun.objects.filter(workspace=workspace).order_by("-id")


@dataclass(frozen=True)
class MemoryLifecycle:
    """Where one memory stands in its lifecycle, under the workspace's current settings."""

    tier: str
    decay_score: float
    decays: bool
    stale_at: datetime | None
    promotion: lifecycle.PromotionSignals
    connections: int
    promotable: bool
    settings_version: int
    settings: dict[str, Any]
    embedded: bool
    # Whether the decay sweep would list it if it were active now, without a reactivation
    # restarting its decay clock (a revert of its decay does not).
    due_if_active: bool = False
    # When it would be due for the decay sweep again if it were reactivated now.
    stale_at_if_reactivated: datetime | None = None


def memory_lifecycle(*, memory: MemoryRecord, now: datetime | None = None) -> MemoryLifecycle:
    """The decay score, when the memory turns stale and its promotion score, with the signals
    (connections counted exactly, as the promotion sweep counts them)."""
    now = now or timezone.now()
    version = lifecycle_settings_current(workspace=memory.workspace)
    settings = version.document
    facts = lifecycle.MemoryFacts(
        id=memory.pk,
        tier=memory.tier,
        lifecycle_status=memory.lifecycle_status,
        is_current=memory.is_current,
        confidence=memory.confidence,
        created_at=memory.created_at,
        last_accessed_at=memory.last_accessed,
        hit_count=memory.hits,
        expires_at=memory.expires_at,
        stale_since=memory.stale_since,
        reactivated_at=memory.reactivated_at,
    )
    model = embedder_model()
    embedded = memory.embedding_model == model
    connections = memory_connections(
        memory.pk, model, settings["connectionSimilarity"], settings["connectionsFull"]
    )
    signals = lifecycle.promotion_signals(facts, connections, settings, now)
    active = dataclasses.replace(facts, lifecycle_status="active", stale_since=None)
    return MemoryLifecycle(
        tier=memory.tier,
        decay_score=lifecycle.decay_score(facts, settings, now),
        decays=lifecycle.stale_at(facts, settings) is not None,
        stale_at=lifecycle.stale_at(facts, settings),
        promotion=signals,
        connections=connections,
        promotable=lifecycle.promotion_applies(facts)
        and lifecycle.promotion_due(signals, settings),
        settings_version=version.version,
        settings=settings,
        embedded=embedded,
        due_if_active=lifecycle.decay_due(active, settings, now) is not None,
        stale_at_if_reactivated=lifecycle.stale_at(
            dataclasses.replace(active, reactivated_at=now), settings
        ),
    )


# --- retention archives -------------------------------------------------------------------------


def archive_manifest(run: MaintenanceRun) -> dict[str, Any]:
    """Counts and SHA-256 of a retention run's archive (the whole file and each part)."""
    whole = hashlib.sha256()
    parts = []
    count = 0
    for chunk in ArchiveChunk.objects.filter(run=run).order_by("seq"):
        whole.update(chunk.lines.encode())
        parts.append({"part": chunk.seq, "count": chunk.count, "sha256": chunk.sha256})
        count += chunk.count
    return {
        "runId": run.pk,
        "workspace": run.workspace.slug,
        "sweep": run.sweep,
        "format": "JSON Lines, one memory per line in the import's shape (with id and actorId)",
        "count": count,
        "sha256": whole.hexdigest(),
        "parts": parts,
        "purgedAt": run.archive_purged_at.isoformat() if run.archive_purged_at else None,
    }


def archive_text(run: MaintenanceRun) -> Iterator[str]:
    for chunk in ArchiveChunk.objects.filter(run=run).order_by("seq").iterator():
        yield chunk.lines
