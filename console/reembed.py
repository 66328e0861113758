"""Before ``make run`` serves: the memories another embedder embedded, embedded again.

A database made before a change of ``RECALL_EMBEDDER`` (the demo's ``.pgdata`` loaded with the
hashing embedder, say) holds memories that recall leaves out, ``embedding_pending``, until
the ``reembed`` sweep has run in their workspace. ``make run`` runs that sweep (an execute,
audited as any other) in each workspace that needs it, and says on the console how far it
has got: the sweep runs in a thread of its own while this one reads the run's progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models import Count, Max

from maintenance.models import MaintenanceRun, Mode
from maintenance.services import maintenance_start
from portal.models import Workspace
from recall.models import MemoryRecord
from recall.runtime import embedder_model

AUTHOR = "system:make-run"


def memories_pending_by_workspace() -> dict[Workspace, int]:
    """How many memories of each workspace the configured embedder has not embedded."""
    counts = dict(
        MemoryRecord.objects.exclude(embedding_model=embedder_model())
        .order_by()
        .values_list("workspace")
        .annotate(n=Count("pk"))
    )
    workspaces = Workspace.objects.filter(pk__in=counts).order_by("slug")
    return {workspace: counts[workspace.pk] for workspace in workspaces}


def memories_reembed(
    *, write: Callable[[str], Any], author: str = AUTHOR, every_seconds: float = 1.0
) -> list[MaintenanceRun]:
    """Execute the reembed sweep in every workspace with memories to embed again, writing
    its progress (at most every ``every_seconds``); the runs, in the order they ran."""
    pending = memories_pending_by_workspace()
    if not pending:
        return []
    write(
        f"Embedding again with {embedder_model()} (RECALL_EMBEDDER) the memories another"
        " embedder, or an earlier version of it, embedded: recall leaves out those it cannot"
        " compare until then."
    )
    runs = []
    for workspace, count in pending.items():
        started = time.monotonic()
        write(f"  {workspace.slug}: {count} memor{'y' if count == 1 else 'ies'}")
        run = _execute_watched(workspace, author, write, every_seconds)
        seconds = time.monotonic() - started
        if run.finished:
            write(
                f"  {workspace.slug}: {run.applied} embedded, {run.skipped} skipped, run"
                f" {run.pk} {run.status} in {seconds:.1f} s"
                + (f" ({run.error_code}: {run.error})" if run.error else "")
            )
        else:
            write(f"  {workspace.slug}: run {run.pk} queued for a worker (CELERY_BROKER_URL)")
        runs.append(run)
    return runs


def _execute_watched(
    workspace: Workspace, author: str, write: Callable[[str], Any], every_seconds: float
) -> MaintenanceRun:
    before = MaintenanceRun.objects.aggregate(last=Max("pk"))["last"] or 0
    outcome: dict[str, Any] = {}

    def execute() -> None:
        try:
            outcome["run"] = maintenance_start(
                workspace=workspace, sweep="reembed", mode=Mode.EXECUTE, author=author
            )
        except BaseException as exc:  # re-raised in the calling thread
            outcome["error"] = exc
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=execute, name="reembed", daemon=True)
    thread.start()
    shown = -1
    while thread.is_alive():
        thread.join(every_seconds)
        progress = (
            MaintenanceRun.objects.filter(workspace=workspace, sweep="reembed", pk__gt=before)
            .values_list("done", "total")
            .first()
        )
        # Between the listing and the last batch: the line after the run says the rest.
        if progress is not None and 0 < progress[0] < progress[1] and progress[0] != shown:
            shown = progress[0]
            write(f"    {shown} of {progress[1]}")
    if "error" in outcome:
        raise outcome["error"]
    run: MaintenanceRun = outcome["run"]
    return run
