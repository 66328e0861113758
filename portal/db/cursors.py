"""A cursor for the statements every API call runs, planned once per connection.

Django binds parameters on the client by default (``ClientCursor``), so PostgreSQL parses
and plans each statement on every execution. For the few statements on the recall hot path
that costs more than running them; a server-binding cursor lets psycopg prepare a statement
after it has run ``prepare_threshold`` times on the connection, and reuse the plan after.
The statements used here are written to stay correct under a generic plan (SPEC section 5,
"Completeness"; see tests/recall/test_completeness.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.backends.utils import CursorWrapper


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """Like ``connection.cursor()``, but binding server-side so statements can be prepared."""
    # The ordinary cursor first: it runs Django's per-request connection health check and
    # thread check, and opens the connection if needed.
    with connection.cursor():
        raw = ServerBindingCursor(connection.connection)
        wrapped = (
            connection.make_debug_cursor(raw)
            if connection.queries_logged
            else connection.make_cursor(raw)
        )
        with wrapped as cursor:
            yield cursor
