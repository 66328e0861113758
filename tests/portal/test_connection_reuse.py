"""A request that reuses the database connection asks no `SELECT 1` of a healthy one, and
still replaces one the server has ended, before the request's first statement.

Through Django's own WSGI handler (the test client skips the per-request connection checks
a server runs), on the real database.
"""

from __future__ import annotations

import io
import os
import select
import tempfile
import time
from typing import Any

import psycopg
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def _get(path: str, token: str) -> tuple[int, bytes]:
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
    }
    status: list[str] = []

    def start_response(line: str, headers: Any, exc_info: Any = None) -> Any:
        status.append(line)
        return lambda data: None

    response = WSGIHandler()(environ, start_response)
    try:
        body = b"".join(response)
    finally:
        response.close()  # as a server does: the request ends (request_finished)
    return int(status[0].split()[0]), body


def _traced(pgconn: Any, call: Any) -> str:
    """The protocol messages the connection exchanged during ``call``."""
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            call()
        finally:
            pgconn.untrace()
        os.fsync(trace.fileno())
        trace.seek(0)
        return trace.read()


def test_a_reused_healthy_connection_is_not_asked_select_1(operator: Any) -> None:
    assert _get("/v1/workspaces/", operator.token)[0] == 200
    assert connection.connection is not None  # kept for the next request (CONN_MAX_AGE)
    pgconn = connection.connection.pgconn
    results: list[int] = []
    messages = _traced(pgconn, lambda: results.append(_get("/v1/workspaces/", operator.token)[0]))
    assert results == [200]
    assert "Bind" in messages  # the trace saw the request's statements
    # What the client sent (F), as a simple query or a statement to prepare.
    sent = [line for line in messages.splitlines() if line.startswith("F\t")]
    assert not [line for line in sent if '"SELECT 1"' in line], sent
    assert connection.connection.pgconn is pgconn  # the same connection served it


def test_a_connection_the_server_ended_is_replaced_before_the_next_request(
    operator: Any,
) -> None:
    assert _get("/v1/workspaces/", operator.token)[0] == 200
    ended = connection.connection
    pid = ended.info.backend_pid
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert cursor.fetchone() == (True,)
    finally:
        other.close()
    deadline = time.monotonic() + 10
    while not select.select([ended.pgconn.socket], [], [], 0.1)[0]:
        assert time.monotonic() < deadline, "the server never ended the connection"

    status, body = _get("/v1/workspaces/", operator.token)
    assert status == 200, body
    assert connection.connection is not ended
    assert connection.connection.info.backend_pid != pid
