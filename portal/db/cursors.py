"""A cursor for the statements every API call runs, planned once per connection.

Django binds parameters on the client by default (``ClientCursor``), so PostgreSQL parses
and plans each statement on every execution. For the few statements on the recall hot path
that costs more than running them; a server-binding cursor lets psycopg prepare a statement
after it has run ``prepare_threshold`` times on the connection, and reuse the plan after.

Prepared statements are planned once, generically (``plan_cache_mode`` is set on every new
connection by ``generic_plans``): left to choose, PostgreSQL keeps re-planning the recall
read for every call, since its custom plans look cheaper on paper, and planning that
statement costs more than executing it. The statements run here are written so their plan
does not depend on the parameter values (the actor is looked up inside the statement, the
eligible set is materialised before it is ranked), and stay complete under a generic plan
(SPEC section 5, "Completeness"; see tests/recall/test_completeness.py). Statements run
through ordinary cursors are never prepared, so the setting does not reach them.

The statements that run prepared are declared in one registry (:func:`prepared_statement`,
listed by :func:`prepared_statements`), each under a name, by the module that owns its SQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
    ServerBindingCursor,  # not in django-stubs 5.2
)
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


def generic_plans(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: prepared statements use their generic plan."""
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")


Params = Mapping[str, Any] | Sequence[Any]


@dataclass(frozen=True)
class PreparedStatement:
    """A statement of the hot path, run on a server-binding cursor (``prepared_cursor``)."""

    name: str
    sql: str

    def fetchall(self, params: Params) -> list[tuple[Any, ...]]:
        with prepared_cursor() as cursor:
            cursor.execute(self.sql, params)
            return cursor.fetchall()

    def fetchone(self, params: Params) -> tuple[Any, ...] | None:
        with prepared_cursor() as cursor:
            cursor.execute(self.sql, params)
            return cursor.fetchone()


_registry: dict[str, PreparedStatement] = {}


def prepared_statement(name: str, sql: str) -> PreparedStatement:
    """Declare a statement that runs prepared, on its generic plan: its plan must not depend on
    the parameters' values (see above). Declaring the same name again returns the statement
    declared first, and refuses different SQL under that name."""
    known = _registry.get(name)
    if known is not None:
        if known.sql != sql:
            raise ValueError(f"prepared statement {name!r} is already declared with other SQL")
        return known
    statement = _registry[name] = PreparedStatement(name, sql)
    return statement


def prepared_statements() -> tuple[PreparedStatement, ...]:
    """Every statement declared so far, in the order they were declared."""
    return tuple(_registry.values())
