"""A PostgreSQL backend that starts the embedded server on first connection.

Starting lazily keeps ``manage.py check`` and settings imports free of side effects, and
lets the test suite point the connection at a temporary cluster before anything connects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db.backends.postgresql import base

from portal import embedded_db


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        embedded = self.settings_dict.get("EMBEDDED_PGDATA")
        if embedded:
            params["host"] = embedded_db.ensure_server(
                Path(embedded),
                temporary=bool(self.settings_dict.get("EMBEDDED_TEMPORARY")),
                shared_buffers=self.settings_dict.get("EMBEDDED_SHARED_BUFFERS"),
            )
        return params
