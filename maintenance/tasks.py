"""Maintenance tasks: thin wrappers over idempotent services.

``maintenance.run`` processes one run (a task delivered twice finds it finished, or takes
over where a dead worker stopped); ``maintenance.tick`` is sent by beat; when a worker
starts, it looks for runs that a dead worker left behind (``maintenance.recover``), sweep
runs and compaction runs alike.

``chat.compaction_run`` processes one compaction run of a chat session: chat sends it by
name (``chat.compaction.coordinator``), maintenance registers it (``maintenance.compaction``).
"""

from __future__ import annotations

from typing import Any

from celery import Task
from celery.signals import worker_ready

from maintenance import compaction, schedule, services
from portal.tasks import task

BUSY_RETRY_SECONDS = 15
COMPACTION_BUSY_RETRY_SECONDS = 5


@task(name="maintenance.run", bind=True)
def run_process(self: Task, run_id: int) -> str:
    try:
        return services.maintenance_run_process(run_id=run_id)
    except services.Busy as exc:
        # A second delivery while the first still runs: look again later; it is then done.
        raise self.retry(exc=exc, countdown=BUSY_RETRY_SECONDS) from None
    except Exception as exc:
        from celery.exceptions import SoftTimeLimitExceeded

        if isinstance(exc, SoftTimeLimitExceeded):
            # Its batches so far are committed: carry on in a fresh task.
            raise self.retry(exc=exc, countdown=0) from None
        raise


@task(name="maintenance.tick")
def tick() -> list[int]:
    return schedule.maintenance_tick()


@task(name="maintenance.recover")
def recover() -> list[int]:
    return services.maintenance_recover() + compaction.compaction_recover()


@task(name="chat.compaction_run", bind=True)
def compaction_run(self: Task, run_id: int) -> str:
    try:
        return compaction.compaction_run_process(run_id=run_id)
    except compaction.Busy as exc:
        # A second delivery while the first still runs: look again later; it is then done.
        raise self.retry(exc=exc, countdown=COMPACTION_BUSY_RETRY_SECONDS) from None


@worker_ready.connect
def _recover_on_start(**_: Any) -> None:
    recover.delay()
