"""A PostgreSQL backend that starts the embedded server on first connection, and logs in as
the owner or the application role (``portal.db.roles``).

Starting lazily keeps ``manage.py check`` and settings imports free of side effects, and
lets the test suite point the connection at a temporary cluster before anything connects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db.backends.postgresql import base, operations

from portal import embedded_db
from portal.db import roles


class DatabaseOperations(operations.DatabaseOperations):
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

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        embedded = self.settings_dict.get("EMBEDDED_PGDATA")
        if embedded:
            params["host"] = embedded_db.ensure_server(
                Path(embedded),
                temporary=bool(self.settings_dict.get("EMBEDDED_TEMPORARY")),
                shared_buffers=self.settings_dict.get("EMBEDDED_SHARED_BUFFERS"),
            )
        roles.connection_params_for_role(self.settings_dict, params)
        return params

    @contextmanager
    def _nodb_cursor(self) -> Iterator[Any]:
        # Creating and dropping databases (the test suite's) is the owner's to do.
        if roles.owner_settings(self.settings_dict) is None or roles.owner_mode():
            with super()._nodb_cursor() as cursor:
                yield cursor
            return
        with roles.owner_logins(), super()._nodb_cursor() as cursor:
            yield cursor
