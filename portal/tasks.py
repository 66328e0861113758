"""What every background task shares: its delivery guarantees and how it is enqueued.

Tasks are thin: they take ids, and call a service that is idempotent (safe to run twice),
because a task may run twice: it is acknowledged only once it finished (``acks_late``), so a
worker that dies mid-task leaves the message to be delivered again
(``reject_on_worker_lost``). Transient database errors (a restart, a dropped connection) are
retried with exponential backoff; anything else fails the task, and the service records why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Task
from django.db import InterfaceError, OperationalError, transaction

from portal.celery import app

# Errors worth another try: the database went away for a moment.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


class PortalTask(Task):
    acks_late = True
    reject_on_worker_lost = True
    autoretry_for = TRANSIENT_ERRORS
    retry_backoff = 2  # seconds, doubled each try
    retry_backoff_max = 300
    retry_jitter = True
    max_retries = 8


def task(**options: Any) -> Callable[[Callable[..., Any]], Task]:
    """``@task()``: a Celery task with the portal's delivery guarantees (``PortalTask``)."""
    return app.task(base=PortalTask, **options)


def eager() -> bool:
    """True when no broker is configured: tasks run in the calling process."""
    return bool(app.conf.task_always_eager)


def enqueue(task: Task, *args: Any) -> None:
    """Run ``task(*args)`` for the data the current transaction writes.

    With a broker, the task is sent once the transaction commits: a worker must never look
    for rows that are not committed yet, and a write that rolls back sends nothing. Without
    one (the embedded default), it runs at once in the caller's process and transaction:
    no other process can read ahead of the commit, and the work commits or rolls back with
    the write that asked for it.
    """
    if eager():
        task.apply(args=args, throw=True)
    else:
        transaction.on_commit(lambda: task.apply_async(args=args))
