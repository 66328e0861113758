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
Each is converted once, when it is declared, to PostgreSQL's own placeholders (``$1``) and
run on a raw cursor: psycopg would otherwise parse its ``%(name)s`` placeholders on every
call, since it caches the parse of statements up to 4 KB only and the recall's read is 10 KB
(0.13 ms a recall, measured on this machine).

A statement declared ``binary`` gets its results in PostgreSQL's binary format: the recall's
read returns 30 rows of timestamps, floats and arrays, which psycopg decodes from binary with
far fewer instructions than it parses their text (1.2 M fewer a recall, −14% of the Python
process's, counted by callgrind).

A query vector goes to a prepared statement as a :class:`BinaryVector`, in pgvector's binary
form, rather than as 384 numbers written out in text for PostgreSQL to parse back. The
statement's cast (``$1::vector``) names its type, so no lookup of pgvector's type is needed.
Binary parameters need server-side binding: Django's ordinary (client-binding) cursors take
the text form, ``vector_literal``, which writes exactly the same vector.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
    CursorMixin,  # not in django-stubs 5.2
    ServerBindingCursor,
)
from django.db.backends.utils import CursorWrapper
from pgvector import Vector
from psycopg.adapt import Dumper


class _NativeCursor(CursorMixin, psycopg.RawCursor):
    """Server-side binding with PostgreSQL's placeholders: psycopg parses nothing."""


@contextmanager
def prepared_cursor(*, native: bool = False, binary: bool = False) -> Iterator[CursorWrapper]:
    """Like ``connection.cursor()``, but binding server-side so statements can be prepared;
    ``native``: for statements written with PostgreSQL's placeholders (``$1``)."""
    # The ordinary cursor first: it runs Django's per-request connection health check and
    # thread check, and opens the connection if needed.
    with connection.cursor():
        raw = _raw_cursor(connection.connection, native=native, binary=binary)
        wrapped = (
            connection.make_debug_cursor(raw)
            if connection.queries_logged
            else connection.make_cursor(raw)
        )
        with wrapped as cursor:
            yield cursor


def _raw_cursor(raw_connection: Any, *, native: bool, binary: bool) -> Any:
    cursor = (_NativeCursor if native else ServerBindingCursor)(raw_connection)
    if binary:
        cursor.format = psycopg.pq.Format.BINARY
    return cursor


def generic_plans(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: prepared statements use their generic plan, and take
    :class:`BinaryVector` parameters."""
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
    connection.connection.adapters.register_dumper(BinaryVector, _BinaryVectorDumper)


class BinaryVector:
    """A vector parameter in pgvector's binary form (its dimensions, a reserved zero, then
    each element as a big-endian float4, the nearest to the element), for a ``::vector``
    cast in a statement run on a server-binding cursor. ``vector_literal`` writes the same
    vector in text."""

    __slots__ = ("data",)

    def __init__(self, vector: Sequence[float]):
        self.data = struct.pack(f">HH{len(vector)}f", len(vector), 0, *vector)


def vector_literal(vector: Sequence[float]) -> str:
    """A vector in pgvector's text form, for a ``%s::vector`` parameter: each element rounded
    to the nearest float4 and written with the nine significant digits that give that float4
    back, so that it is exactly the vector ``BinaryVector`` sends (a query ranked through
    either form finds the same distances)."""
    dimensions = len(vector)
    rounded = struct.unpack(f"{dimensions}f", struct.pack(f"{dimensions}f", *vector))
    return _vector_format(dimensions) % rounded


@cache
def _vector_format(dimensions: int) -> str:
    # One formatting operation for the whole vector: a third faster than one per element.
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


class StoredVector(Vector):
    """A model's vector, written by the ORM in ``vector_literal``'s text: pgvector's field
    writes each element with ``str()``, which took 2.5 times as long (129 µs against 50 for
    384 dimensions) and makes a longer text for PostgreSQL to parse. The same float4
    elements either way: both round each element to float4 first, and both texts read back
    as that float4."""

    def to_text(self) -> str:
        return vector_literal(self.to_list())


class _BinaryVectorDumper(Dumper):
    format = psycopg.pq.Format.BINARY
    oid = 0  # unknown here: PostgreSQL takes the type from the statement's cast

    def dump(self, obj: BinaryVector) -> bytes:
        return obj.data


Params = Mapping[str, Any] | Sequence[Any]


_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")


def native_sql(sql: str) -> tuple[str, tuple[str, ...] | None]:
    """``sql`` with PostgreSQL's placeholders instead of psycopg's, and the parameter names in
    their order (``None`` when its placeholders are positional ``%s``); ``%%`` becomes ``%``."""
    names: list[str] = []
    positional = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal positional
        if match.group(0) == "%%":
            return "%"
        name = match.group(1)
        if name is None:
            positional += 1
            return f"${positional}"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    native = _PLACEHOLDER.sub(swap, sql)
    if names and positional:
        raise ValueError("a statement mixes named and positional placeholders")
    return native, (tuple(names) if names else None)


@dataclass(frozen=True)
class PreparedStatement:
    """A statement of the hot path, run prepared on a server-binding cursor; ``sql`` as written
    (psycopg's placeholders), ``native`` converted once (PostgreSQL's)."""

    name: str
    sql: str
    native: str
    names: tuple[str, ...] | None
    binary: bool = False

    def _args(self, params: Params) -> tuple[Any, ...]:
        if isinstance(params, Mapping):
            assert self.names is not None, f"{self.name} takes positional parameters"
            return tuple(params[name] for name in self.names)
        return tuple(params)

    def fetchall(self, params: Params) -> list[tuple[Any, ...]]:
        with self._executed(params) as cursor:
            return cursor.fetchall()

    def fetchone(self, params: Params) -> tuple[Any, ...] | None:
        with self._executed(params) as cursor:
            return cursor.fetchone()

    @contextmanager
    def _executed(self, params: Params) -> Iterator[Any]:
        """A cursor that has run the statement: the connection's kept one, or Django's."""
        db = connections[DEFAULT_DB_ALIAS]
        cursor = _kept_cursor(db, self.binary)
        if cursor is None:
            with prepared_cursor(native=True, binary=self.binary) as wrapped:
                wrapped.execute(self.native, self._args(params))
                yield wrapped
            return
        with db.wrap_database_errors:
            cursor.execute(self.native, self._args(params))
            yield cursor


def _kept_cursor(db: Any, binary: bool) -> _NativeCursor | None:
    """The connection's own cursor for prepared statements (one per result format, kept by
    the backend in ``kept_cursors`` until the connection is replaced); ``None`` while Django
    must see each statement (queries logged, as under ``DEBUG`` or a test's query count, or
    an execute wrapper installed): those run through Django's cursor wrapper instead.

    Django's wrapper, and a new psycopg cursor per statement, cost more instructions than
    the hot path's statements' own Python work (0.43 M of a recall's 6.8 M, three
    statements). The checks Django's cursor makes are made here too: the connection's health
    check, opening it, the thread it belongs to, a transaction that must be rolled back, and
    database errors raised as Django's."""
    if db.queries_logged or db.execute_wrappers:
        return None
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    db.validate_no_broken_transaction()
    cursor: _NativeCursor | None = db.kept_cursors.get(binary)
    if cursor is None or cursor.closed:
        cursor = db.kept_cursors[binary] = _raw_cursor(db.connection, native=True, binary=binary)
    return cursor


_registry: dict[str, PreparedStatement] = {}


def prepared_statement(name: str, sql: str, *, binary: bool = False) -> PreparedStatement:
    """Declare a statement that runs prepared, on its generic plan: its plan must not depend on
    the parameters' values (see above). Declaring the same name again returns the statement
    declared first, and refuses different SQL under that name."""
    known = _registry.get(name)
    if known is not None:
        if known.sql != sql:
            raise ValueError(f"prepared statement {name!r} is already declared with other SQL")
        return known
    native, names = native_sql(sql)
    statement = _registry[name] = PreparedStatement(name, sql, native, names, binary)
    return statement


def prepared_statements() -> tuple[PreparedStatement, ...]:
    """Every statement declared so far, in the order they were declared."""
    return tuple(_registry.values())
