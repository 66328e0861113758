"""The schedule: beat's tick starts the scheduled sweeps that are due, sends again the runs
nobody is processing, and purges old archives."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from maintenance.archives import archives_purge
from maintenance.models import Trigger
from maintenance.selectors import schedule_states
from maintenance.services import MaintenanceConflict, maintenance_recover, maintenance_start
from portal.errors import NotFoundError, ValidationFailed

SCHEDULE_AUTHOR = "system:schedule"

logger = logging.getLogger(__name__)


def maintenance_tick(*, now: datetime | None = None) -> list[int]:
    """Start every scheduled sweep that is due, recover lost runs, purge old archives.

    Returns the ids of the runs started. Sent by beat every ``MAINTENANCE_TICK_SECONDS``.
    """
    now = now or timezone.now()
    started: list[int] = []
    for state in schedule_states():
        every = timedelta(hours=state.document["scheduleEveryHours"])
        for sweep, mode in state.document["schedule"].items():
            if mode == "off":
                continue
            last = state.last_scheduled.get(sweep)
            if last is not None and now - last < every:
                continue
            try:
                run = maintenance_start(
                    workspace=state.workspace,
                    sweep=sweep,
                    mode=mode,
                    author=SCHEDULE_AUTHOR,
                    trigger=Trigger.SCHEDULE,
                )
            except MaintenanceConflict:
                continue  # another execute holds the workspace: the next tick tries again
            except (NotFoundError, ValidationFailed) as exc:
                # A schedule no run can be started for (an unknown sweep or mode, in a settings
                # row written around the service, or a sweep a release renamed): said in the
                # log on every tick, and the other sweeps and workspaces are still served. A
                # broker that cannot be reached (QueueUnavailable) still ends the tick: the
                # next one tries every sweep again.
                logger.warning(
                    "maintenance schedule of workspace %s: cannot start %r (%s): %s %s",
                    state.workspace.slug, sweep, mode, exc.code, exc.message,
                )  # fmt: skip
                continue
            started.append(run.pk)
    maintenance_recover(now=now)
    archives_purge(now=now)
    return started
