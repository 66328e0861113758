"""What every background task shares: its delivery guarantees and how it is enqueued.

Tasks are thin: they take ids, and call a service that is idempotent (safe to run twice),
because a task may run twice: it is acknowledged only once it finished (``acks_late``), so a
worker that dies mid-task leaves the message to be delivered again
(``reject_on_worker_lost``). Transient database errors (a restart, a dropped connection) are
retried with exponential backoff; anything else fails the task, and the service records why.

A task that cannot be sent because the broker is unreachable raises ``QueueUnavailable`` (a
503 to the caller), never a bare connection error (a 500).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import Task
from django.db import InterfaceError, OperationalError, transaction
from kombu.exceptions import OperationalError as BrokerOperationalError

from portal.celery import app
from portal.errors import DomainError

logger = logging.getLogger(__name__)

# Errors worth another try: the database went away for a moment.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)


class QueueUnavailable(DomainError):
    """The broker (Redis) could not be reached, so a task was not sent (HTTP 503)."""

    status = 503

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__("QUEUE_UNAVAILABLE", message, details)


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


def enqueue(name: str, *args: Any, deferred: str | None = None) -> None:
    """Run the task registered as ``name`` with ``args``, for the data the current
    transaction writes. By name, so that a service need not import its app's tasks module
    (which imports the services: tasks are thin).

    With a broker, the task is sent once the transaction commits: a worker must never look
    for rows that are not committed yet, and a write that rolls back sends nothing. Without
    one (the embedded default), it runs at once in the caller's process and transaction:
    no other process can read ahead of the commit, and the work commits or rolls back with
    the write that asked for it.

    Sending raises ``QueueUnavailable`` when the broker is unreachable (kombu gives up after
    its short publish retries, under a second): here when no transaction is open, or out of
    the outermost ``atomic()`` once it has committed. For a task whose work a sweep does later
    anyway, ``deferred`` says which: the unsent task is then logged, not raised, so the
    request that saved the data answers as saved and a client's retry writes nothing twice.
    """
    task = app.tasks[name]
    if eager():
        task.apply(args=args, throw=True)
    else:
        transaction.on_commit(lambda: _send(task, args, deferred))


def _send(task: Task, args: tuple[Any, ...], deferred: str | None = None) -> None:
    try:
        task.apply_async(args=args)
    except BrokerOperationalError as exc:
        if deferred is not None:
            logger.warning("Task %s not sent, the queue is unreachable: %s", task.name, deferred)
            return
        # Sent after the commit: what the request wrote is kept; only the task is missing.
        raise QueueUnavailable(
            "The task queue is not reachable right now: what this request saved is kept, but"
            f" its background task ({task.name}) was not sent."
        ) from exc


# The tasks ``send_in_background`` is sending now, by name.
_SENDING: set[str] = set()
_SENDING_LOCK = threading.Lock()


def send_in_background(name: str, *args: Any, deferred: str) -> bool:
    """Send the task registered as ``name`` with ``args`` without making the caller wait for
    the broker: from a thread of its own, which logs a broker it cannot reach (``deferred``
    says what does the work instead). For work that may be skipped: while a send of the same
    task is still in flight (a broker that accepts connections and never answers holds one as
    long as it does not), another is dropped rather than queued. Returns whether a send was
    started. With no broker configured, use ``enqueue``."""
    task = app.tasks[name]
    with _SENDING_LOCK:
        if name in _SENDING:
            return False
        _SENDING.add(name)

    def send() -> None:
        try:
            _send(task, args, deferred)
        except Exception:  # anything else the broker's client raises: logged, never raised
            logger.warning("Task %s not sent: %s", name, deferred, exc_info=True)
        finally:
            with _SENDING_LOCK:
                _SENDING.discard(name)

    threading.Thread(target=send, name=f"send {name}", daemon=True).start()
    return True


def sending() -> frozenset[str]:
    """The tasks ``send_in_background`` is sending now."""
    with _SENDING_LOCK:
        return frozenset(_SENDING)
