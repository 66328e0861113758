"""The production web server, as ``make serve`` runs it: granian serving ``portal.wsgi``.

    python -m portal.serve [--host 127.0.0.1] [--port 8000 | --uds PATH] [--workers 2]
                           [--access-log FILE] [--log-level info]

Why granian, and why this shape (measured against gunicorn's sync and threaded workers on the
recall benchmark: docs/performance.md, "The web server"): HTTP is parsed and connections are kept
alive in compiled code, and each worker process runs one Python thread on a single-threaded
runtime, so a worker serves one request at a time as a sync worker does, without closing the
connection after every response or parsing HTTP in Python.

Behind a proxy on the same machine, ``--uds PATH`` serves on a Unix socket instead, which every
worker accepts from, and a worker takes a connection only while it has no request: a worker
busy with a long request (an audit export or check, a large import) leaves new connections to
the others. On TCP each worker listens on a socket of its own (the kernel shares connections
out among them, busy or not), and takes connections whatever it is doing; a connection given
to a worker busy for a minute waits that minute (docs/deploy.md, "The web server"). The proxy
must open a connection per request (no upstream keep-alive): a kept-alive connection holds
its worker's one place.

The access log names the method and the path, never the query string (it holds search text
and actor names), with the status and the time taken.

granian starts every request's WSGI environ from the process's environment variables, as CGI
did, so Django's ``request.META`` would hold the secret key, the database URL and the audit
keys. The application granian runs here (``application``, below) takes them out first.

With the embedded PostgreSQL (no ``DATABASE_URL``), this process joins the server's list of
users before the workers start and leaves it when they have stopped. The workers end without
running Python's exit handlers, so they never leave the list themselves; the server stops
when this process, the last live one on the list, leaves (``portal.embedded_db``).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

ACCESS_LOG_FORMAT = '%(addr)s "%(method)s %(path)s %(protocol)s" %(status)d %(dt_ms).1fms'
UDS_PERMISSIONS = 0o660


def granian_options(
    *, host: str, port: int, workers: int, access_log: str | None, log_level: str = "info",
    uds: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The server's settings (``granian.Granian``'s keywords), on ``host:port`` or on the Unix
    socket ``uds``. The benchmark's ``granian-st`` (bench/servers.py) runs the same from
    granian's command line, on Django's application."""
    from granian.constants import HTTPModes, Interfaces, RuntimeModes
    from granian.log import LogLevels

    # On a Unix socket every worker accepts from the one socket, and takes a connection only
    # while it has none (backpressure 1): the others take the rest. The proxy's user (nginx's
    # group) connects; nobody else.
    where: dict[str, Any] = (
        {"address": host, "port": port} if uds is None
        else {"uds": uds, "uds_permissions": UDS_PERMISSIONS, "backpressure": 1}
    )  # fmt: skip
    options: dict[str, Any] = {
        "target": "portal.serve:application",
        "interface": Interfaces.WSGI,
        **where,
        "workers": workers,
        # One Python thread per worker, on a single-threaded runtime: one request at a time.
        "blocking_threads": 1,
        "runtime_threads": 1,
        "runtime_mode": RuntimeModes.st,
        "http": HTTPModes.http1,  # behind a proxy speaking HTTP/1.1 (docs/deploy.md)
        "websockets": False,
        # A worker that does not stop within this many seconds of a shutdown is killed.
        "workers_kill_timeout": 30,
        # A worker that dies (killed for its memory, say) is started again, as gunicorn did;
        # left off, granian would stop the whole server.
        "respawn_failed_workers": True,
        "log_level": LogLevels(log_level),
        "log_access": access_log is not None,
        "log_access_format": ACCESS_LOG_FORMAT,
    }
    if access_log not in (None, "-"):
        options["log_dictconfig"] = {
            "handlers": {
                "access": {
                    "class": "logging.FileHandler",
                    "filename": access_log,
                    "formatter": "access",
                },
                "console": {
                    "class": "logging.StreamHandler",
                    "formatter": "generic",
                    "stream": "ext://sys.stdout",
                },
            }
        }
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portal.serve", description=__doc__)
    parser.add_argument("--host", help="default 127.0.0.1")
    parser.add_argument("--port", type=int, help="default 8000")
    parser.add_argument(
        "--uds", metavar="PATH", type=Path,
        help="serve on this Unix socket instead of --host and --port (behind a proxy on the"
        " same machine: a worker busy with a long request then leaves new connections to the"
        " others); its group may connect",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--access-log", metavar="FILE", help="write the access log to FILE ('-': standard output)"
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"],
        help="the server's own messages (workers started and stopped)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.uds is not None and (args.host is not None or args.port is not None):
        parser.error(
            "--uds serves on a Unix socket instead of --host and --port: give one or the other"
        )
    args.host = "127.0.0.1" if args.host is None else args.host
    args.port = 8000 if args.port is None else args.port
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.access_log not in (None, "-"):
        try:
            with open(args.access_log, "a"):
                pass
        except OSError as exc:
            parser.error(f"cannot write the access log {args.access_log}: {exc.strerror}")
    # Said in one line here, rather than in granian's backtrace once it has started.
    if args.uds is not None:
        problem = _socket_path_problem(args.uds)
        if problem:
            parser.error(f"cannot listen on {args.uds}: {problem}")
    else:
        try:
            with socket.create_server((args.host, args.port)):
                pass
        except OSError as exc:
            parser.error(f"cannot listen on {args.host}:{args.port}: {exc.strerror}")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from granian import Granian

    pgdata = _join_embedded_database()
    try:
        Granian(
            **granian_options(
                host=args.host,
                port=args.port,
                workers=args.workers,
                access_log=args.access_log,
                log_level=args.log_level,
                uds=args.uds,
            )
        ).serve()
    finally:
        _leave_embedded_database(pgdata)
    return 0


def _socket_path_problem(path: Path) -> str:
    """Why a Unix socket cannot be made at ``path`` ("" if it can). A socket file no server
    answers on (left by one that was killed) is removed, as granian would fail on it."""
    if path.exists() or path.is_symlink():
        if not path.is_socket():
            return "the path exists and is not a socket"
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()  # stale
        except OSError as exc:
            return exc.strerror or str(exc)
        else:
            return "another server is listening on it"
        finally:
            probe.close()
    directory = path.parent
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{directory} is not writable"
    return ""


def _join_embedded_database() -> str | None:
    """With the embedded server: start or reuse it from this process, which stays on its list
    of users while the workers run (the workers, forked from this process, reuse it)."""
    from django.db import connections

    from portal import embedded_db

    settings = connections["default"].settings_dict
    # The server itself, not a connection: its roles may not exist before the first migrate.
    if embedded_db.ensure_server_for(settings) is None:
        return None
    return str(settings["EMBEDDED_PGDATA"])


def _leave_embedded_database(pgdata: str | None) -> None:
    if pgdata is None:
        return
    from django.db import connections

    from portal import embedded_db

    connections.close_all()
    others = embedded_db.release_server(Path(pgdata))
    logger = logging.getLogger(__name__)
    if others:
        logger.warning(
            "The embedded PostgreSQL in %s keeps running: still used by process %s.",
            pgdata,
            ", ".join(map(str, others)),
        )


@cache
def _process_variables() -> tuple[tuple[str, str], ...]:
    """The process's environment variables (name, value), as granian copies them."""
    return tuple(os.environ.items())


def without_process_variables(environ: dict[str, Any]) -> dict[str, Any]:
    """``environ`` (in place) without what it holds only because the process's environment
    does: every variable whose value is the process's. A request that sets a name itself (a
    header, its content type) keeps its own value; a process's ``HTTP_PROXY`` is not taken
    for a request's ``Proxy`` header."""
    for name, value in _process_variables():
        if environ.get(name) == value:
            del environ[name]
    return environ


# Taken when a worker imports this module, before granian copies the environment for its
# requests (and before Django's set-up could change a variable).
_process_variables()


@cache
def _django() -> Callable[..., Iterable[bytes]]:
    from portal.wsgi import application as portal_application

    return portal_application


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The portal's WSGI application (Django's), given the request's environ only (see
    above)."""
    return _django()(without_process_variables(environ), start_response)


if __name__ == "__main__":
    sys.exit(main())
