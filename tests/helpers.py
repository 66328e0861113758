"""Assertions, clients and concurrency helpers shared by the tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils.crypto import get_random_string
from psycopg import sql

from policies.models import Workload
from portal.db.roles import owner_settings


def csrf_session(persona: Any) -> Any:
    """A session client that sends a valid CSRF cookie and header, as the portal's JS does."""
    client = persona.session()
    secret = get_random_string(32)
    client.cookies[settings.CSRF_COOKIE_NAME] = secret
    client.credentials(HTTP_X_CSRFTOKEN=secret)
    return client


# The query a recall request sends unless told otherwise.
QUERY = "release summary preferences"


def recall_body(workload: Workload, **changes: Any) -> dict[str, Any]:
    """A recall request's body: ``workload`` in "prod", ``QUERY``, the top 10; ``changes`` (in
    the API's camelCase) override or add keys."""
    return {
        "workloadId": str(workload.id),
        "environment": "prod",
        "query": QUERY,
        "topK": 10,
        **changes,
    }


def post_recall(
    persona: Any, workload: Workload, *, actor: str = "user:ada", **changes: Any
) -> Any:
    """``POST /v1/memory/actors/{actor}/recall`` of ``recall_body(workload, **changes)``
    through the persona's API client: the response."""
    return persona.api().post(
        f"/v1/memory/actors/{actor}/recall", recall_body(workload, **changes), format="json"
    )


def recall(
    persona: Any, workload: Workload, *, actor: str = "user:ada", **changes: Any
) -> dict[str, Any]:
    """``post_recall``, answered 200: the envelope."""
    response = post_recall(persona, workload, actor=actor, **changes)
    assert response.status_code == 200, response.content
    return response.json()


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert list(body) == ["error"]
    assert set(body["error"]) == {"code", "message", "details"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


@contextmanager
def database_owner() -> Iterator[None]:
    """Run the block's statements on the test's own connection as the database owner.

    The application's role may not change or delete audit rows (portal/db/roles.py); tests
    that play someone with the owner's access switch to it here. Inside a savepoint, so a
    failing statement leaves the test's transaction usable; the role is reset on the way out.
    The test cluster alone lets the application role switch (tests/conftest.py).
    """
    owner = owner_settings(settings.DATABASES["default"])
    with transaction.atomic(), connection.cursor() as cursor:
        if owner is None:  # one role does both (DATABASE_URL without DATABASE_OWNER_URL)
            yield
            return
        cursor.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner["USER"])))
        yield
        cursor.execute("RESET ROLE")


T = TypeVar("T")


def run_in_threads(
    work: Callable[[int], T], count: int, *, together: bool = False, timeout: float = 60.0
) -> list[T | BaseException]:
    """``work(n)`` for n in 0..count-1, each in a thread of its own (with a database
    connection of its own, closed when it is done): each one's result, or the exception it
    raised, in order. ``together``: all start at once, behind a barrier. Fails if a thread has
    not finished within ``timeout`` seconds."""
    results: list[Any] = [None] * count
    barrier = threading.Barrier(count, timeout=timeout) if together else None

    def run(n: int) -> None:
        try:
            if barrier is not None:
                barrier.wait()
            results[n] = work(n)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            results[n] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), f"a thread ran past {timeout} s"
    return results


def waiting_for_a_lock(monitor: psycopg.Connection[Any], pid: int) -> bool:
    """Whether the server process ``pid`` is waiting for a lock, as ``monitor`` (a connection
    of its own, in autocommit) sees it."""
    row = monitor.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
    ).fetchone()
    return bool(row) and row[0] == "Lock"


def until_waiting_for_a_lock(pid: int, timeout: float = 30.0) -> None:
    """Return once the server process ``pid`` waits for a lock; fail after ``timeout``."""
    monitor = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        deadline = time.monotonic() + timeout
        while not waiting_for_a_lock(monitor, pid):
            assert time.monotonic() < deadline, f"process {pid} never waited for a lock"
            time.sleep(0.01)
    finally:
        monitor.close()


def release_once_blocked(
    release: threading.Event, failures: list[BaseException], timeout: float = 30.0
) -> threading.Thread:
    """A thread, started, that sets ``release`` once this thread's database connection waits
    for a lock (what the test is about to do), or after ``timeout``, then with the failure
    in ``failures``: a test that holds a lock elsewhere until ``release`` lets go of it
    exactly when the wait it tests has begun, not on a timer."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]

    def run() -> None:
        try:
            until_waiting_for_a_lock(pid, timeout)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            failures.append(exc)
        finally:
            release.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def once_the_walk_begins(action: Callable[[], object]) -> Iterator[list[bool]]:
    """Within the block, ``action()`` runs once, just before the first statement that reads
    the audit trail in order (a chain check's walk) on this connection; the list yielded
    holds ``True`` once it has run."""
    began: list[bool] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not began and 'FROM "audit_auditevent"' in sql and "ORDER BY" in sql:
            began.append(True)
            action()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield began


def owner_execute(sql: str, params: list[Any] | None = None) -> None:
    """One statement as the database owner (``database_owner``): what someone with the
    owner's access could do to the rows the application may not change."""
    with database_owner(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)`` in a thread of its own: a test may run in a worker whose
    main thread already has an event loop running (Playwright's sync API leaves one)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
