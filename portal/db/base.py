"""A PostgreSQL backend that starts the embedded server on first connection, and logs in as
the owner or the application role (``portal.db.roles``).

Starting lazily keeps ``manage.py check`` and settings imports free of side effects, and
lets the test suite point the connection at a temporary cluster before anything connects.
"""

from __future__ import annotations

import select
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db.backends.postgresql import base, operations
from django.db.backends.utils import debug_transaction  # type: ignore[attr-defined]  # not in django-stubs 5.2

from portal import embedded_db
from portal.db import roles


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor: Any, sql: str, params: Any) -> str:
        # psycopg tells the text of a statement only when it does not run it prepared: the
        # query log (DEBUG, a test's query count) shows the statement's own text instead.
        query: str | None = super().last_executed_query(cursor, sql, params)
        return sql if query is None else query

    def execute_sql_flush(self, sql_list: Iterable[str]) -> None:
        # Emptying every table (the test suite's flush) is the owner's to do: the application
        # role may not truncate, and may never empty the audit trail.
        if roles.owner_settings(self.connection.settings_dict) is None or roles.owner_mode():
            super().execute_sql_flush(sql_list)
            return
        owner = self.connection.copy()
        try:
            with roles.owner_logins():
                owner.ops.execute_sql_flush(sql_list)
        finally:
            owner.close()


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    health_check_done: bool  # Django's own flag, reset at the start of every request
    # The cursors prepared statements run on, one per result format (portal.db.cursors): made
    # for each connection, dropped with it.
    kept_cursors: dict[bool, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept_cursors = {}

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        self.kept_cursors = {}
        return super().get_new_connection(conn_params)

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        socket_dir = embedded_db.ensure_server_for(self.settings_dict)
        if socket_dir is not None:
            params["host"] = socket_dir
        roles.connection_params_for_role(self.settings_dict, params)
        return params

    # psycopg deallocates every statement the connection prepared after a ROLLBACK, whether its
    # own rollback() sends it or a cursor does (the command tag of ROLLBACK TO SAVEPOINT is
    # "ROLLBACK" too), in case the transaction dropped or altered what one of them reads. The
    # portal changes its schema in migrations only, never in a transaction a request rolls
    # back, so both are sent as commands psycopg does not look at: otherwise every request that
    # fails inside a transaction or a savepoint (a 409 raised in `atomic`, a lost
    # `get_or_create` race) costs its worker's next recalls their prepared statements, the read
    # planned afresh for three recalls (8 ms each instead of 3, measured).

    def _rollback(self) -> None:
        if self.connection is not None and not self._psycopg_managed():
            self._command("ROLLBACK", unless_idle=True)
        else:
            super()._rollback()  # type: ignore[misc]  # not in django-stubs

    def _savepoint_rollback(self, sid: str) -> None:
        self.ensure_connection()
        if self._psycopg_managed():
            super()._savepoint_rollback(sid)  # type: ignore[misc]  # not in django-stubs
        else:
            self._command(self.ops.savepoint_rollback_sql(sid))

    def _psycopg_managed(self) -> bool:
        # A pipeline, or psycopg's own transaction blocks (neither is used here): psycopg's
        # rollback keeps their state, so it runs as it is (pyproject pins psycopg to the
        # versions whose private `_exec_command`, `_pipeline` and `_num_transactions` these
        # read; tests/portal/test_native_sql.py checks the statements survive).
        connection = self.connection
        return bool(connection._pipeline or connection._num_transactions)

    def _command(self, sql: str, *, unless_idle: bool = False) -> None:
        connection = self.connection
        with debug_transaction(self, sql), self.wrap_database_errors, connection.lock:
            idle = connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
            if not (unless_idle and idle):
                connection.wait(connection._exec_command(sql))

    def close_if_health_check_failed(self) -> None:
        # Django's check is a `SELECT 1` round trip at the start of every request that reuses
        # the connection (on the recall hot path, one statement in four). A connection the
        # server has ended (a restart, a terminated backend, an idle timeout) says so on its
        # socket: the server's last message, or end of file. So a connection with nothing to
        # read is taken as usable without asking, and one with anything unasked for waiting
        # gets Django's own check, which closes it when it fails.
        if not self.health_check_done and self._socket_quiet():
            self.health_check_done = True
        super().close_if_health_check_failed()

    def _socket_quiet(self) -> bool:
        """True when the open connection's socket has nothing to read: nothing was sent that
        no query asked for (between requests, no query is in flight)."""
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        try:
            readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
        except (OSError, ValueError, psycopg.OperationalError):
            return False
        return not readable

    @contextmanager
    def _nodb_cursor(self) -> Iterator[Any]:
        # Creating and dropping databases (the test suite's) is the owner's to do.
        if roles.owner_settings(self.settings_dict) is None or roles.owner_mode():
            with super()._nodb_cursor() as cursor:
                yield cursor
            return
        with roles.owner_logins(), super()._nodb_cursor() as cursor:
            yield cursor
