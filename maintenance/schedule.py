"""The schedule: beat's tick starts the scheduled sweeps that are due, sends again the runs
nobody is processing, and purges old archives."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from maintenance.archives import archives_purge
from maintenance.models import MaintenanceRun, Trigger
from maintenance.selectors import lifecycle_settings_current
from maintenance.services import MaintenanceConflict, maintenance_recover, maintenance_start
from portal.models import Workspace

SCHEDULE_AUTHOR = "system:schedule"


def maintenance_tick(*, now: datetime | None = None) -> list[int]:
    """Start every scheduled sweep that is due, recover lost runs, purge old archives.

    Returns the ids of the runs started. Sent by beat every ``MAINTENANCE_TICK_SECONDS``.
    """
    now = now or timezone.now()
    started: list[int] = []
    for workspace in Workspace.objects.order_by("pk"):
        document = lifecycle_settings_current(workspace=workspace).document
        every = timedelta(hours=document["scheduleEveryHours"])
        for sweep, mode in document["schedule"].items():
            if mode == "off":
                continue
            last = (
                MaintenanceRun.objects.filter(
                    workspace=workspace, sweep=sweep, trigger=Trigger.SCHEDULE
                )
                .order_by("-created_at")
                .values_list("created_at", flat=True)
                .first()
            )
            if last is not None and now - last < every:
                continue
            try:
                run = maintenance_start(
                    workspace=workspace,
                    sweep=sweep,
                    mode=mode,
                    author=SCHEDULE_AUTHOR,
                    trigger=Trigger.SCHEDULE,
                )
            except MaintenanceConflict:
                continue  # another execute holds the workspace: the next tick tries again
            started.append(run.pk)
    maintenance_recover(now=now)
    archives_purge(now=now)
    return started
