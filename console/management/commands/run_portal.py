"""What ``make run`` does: check the embedder's model files, migrate, load the demo, embed
again what another embedder embedded (``console/reembed.py``), say how to log in, then serve
with Django's autoreloading development server until the run is ended.

This process holds the embedded PostgreSQL for the whole run: it starts it for the
migration and stays on its list of users while the development server runs. Whatever ends
the run (Ctrl-C, SIGTERM, SIGHUP, the server exiting on its own, an error before it starts)
first stops the server's processes, then lets go of the embedded PostgreSQL, which stops it
unless another live process still uses it. ``runserver`` alone cannot promise that: on
SIGTERM its reloader SIGKILLs the process that serves (and holds the database), and a SIGTERM
it is not given (make's shell line, which does not pass it on) leaves everything running.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from contextlib import suppress
from io import StringIO
from pathlib import Path
from types import FrameType
from typing import Any

import psutil
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from console.management.commands.load_demo import DEMO_PASSWORD, SLUG
from console.reembed import memories_reembed
from portal import embedded_db

# How long the development server's processes get to exit after SIGTERM before SIGKILL.
STOP_TIMEOUT_S = 10.0
# How long Ctrl-C's processes get to exit by themselves before the stop signals them.
GROUP_EXIT_GRACE_S = 3.0
# How long the reloader gets to exit by itself once the server it ran has exited.
RELOADER_EXIT_S = 3.0
# The signals that end the run. One a parent process ignores stays ignored, as `nohup` asks.
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Command(BaseCommand):
    help = (
        "Migrate, load the demo workspace and serve the portal with autoreload (make run); "
        "every way the run ends stops the development server, then the embedded PostgreSQL."
    )

    # runserver runs them, in the process that serves.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="Port on 127.0.0.1")
        parser.add_argument(
            "--no-demo",
            action="store_true",
            help="Serve the database as it is: no demo workspace, no API token (memories "
            "another embedder embedded are still embedded again)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for signum in ENDING_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, _end_run)
        server: DevServer | None = None
        exit_code = 0
        grace = 0.0
        try:
            # A damaged model file stops the run here, with its message, before any work.
            call_command("check", tags=["recall"], stdout=StringIO())
            call_command("migrate", interactive=False, verbosity=options["verbosity"])
            token = None if options["no_demo"] else self._demo()
            memories_reembed(write=self._say)
            # The server's processes open their own connections; this one only holds the
            # embedded PostgreSQL (on its list of users) until the run ends.
            connections.close_all()
            self._say_how_to_log_in(options["port"], token)
            server = DevServer(options["port"])
            exit_code = server.wait()
        except RunEnded as ended:
            exit_code = ended.exit_code
            # Ctrl-C reached the server's processes too (the terminal signals the whole
            # group): they are already exiting, and a SIGTERM now would cut their exit short.
            grace = GROUP_EXIT_GRACE_S if ended.signum == signal.SIGINT else 0.0
        finally:
            # The run is ending: a second Ctrl-C must not cut the stop short. Every step
            # below is bounded by a timeout.
            for signum in ENDING_SIGNALS:
                signal.signal(signum, signal.SIG_IGN)
            if server is not None:
                server.stop(grace=grace)
            self._let_go_of_the_database()
        if exit_code:
            raise SystemExit(exit_code)

    def _demo(self) -> str:
        call_command("load_demo", stdout=self.stdout)
        out = StringIO()
        call_command(
            "create_api_token",
            workspace=SLUG,
            role="editor",
            name="make-run",
            replace=True,
            stdout=out,
            stderr=StringIO(),
        )
        return out.getvalue().strip().splitlines()[-1]

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _say_how_to_log_in(self, port: int, token: str | None) -> None:
        base = f"http://127.0.0.1:{port}"
        if token is None:
            lines = [f"  Portal:    {base}/"]
        else:
            password = DEMO_PASSWORD
            lines = [
                f"  Portal:    {base}/   log in as operator / {password}",
                f"             (also editor / {password} and viewer / {password})",
            ]
        lines.append(f"  API docs:  {base}/v1/docs/")
        if token is not None:
            lines += [
                f"  API token (workspace {SLUG}, editor): {token}",
                f'  Try:       curl -H "Authorization: Bearer {token}" {base}/v1/workspaces/',
            ]
        self.stdout.write("\n".join(["", *lines, ""]))
        self.stdout.flush()

    def _let_go_of_the_database(self) -> None:
        pgdata = connections["default"].settings_dict.get("EMBEDDED_PGDATA")
        if not pgdata:
            return
        connections.close_all()
        others = embedded_db.release_server(Path(pgdata))
        if others is None:  # the run ended before it used the database
            return
        if others:
            pids = ", ".join(map(str, others))
            self.stdout.write(
                f"The embedded PostgreSQL in {pgdata} keeps running: still used by process "
                f"{pids}; it stops when the last of them exits."
            )
        else:
            self.stdout.write(f"Stopped the embedded PostgreSQL in {pgdata}.")


class RunEnded(BaseException):
    """A signal ended the run: a stop someone asked for (Ctrl-C, a service manager's SIGTERM,
    a closed terminal), so the run exits 0 once it has stopped everything, and make says
    nothing of a failure. Not an ``Exception``, so that no ``except Exception`` on the way
    (the embedded server's start wraps its errors) mistakes it for a failure."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 0


def _end_run(signum: int, frame: FrameType | None) -> None:
    raise RunEnded(signum)


class DevServer:
    """``manage.py runserver`` in a child process, and the processes it starts.

    The reloader (the child) serves from a grandchild it replaces on every code change. The
    tree is re-read every second so that the stop reaches the current grandchild even if the
    reloader has exited first (the grandchild is then no longer anyone's descendant).
    """

    def __init__(self, port: int) -> None:
        manage = Path(settings.BASE_DIR) / "manage.py"
        self.process = subprocess.Popen(
            [sys.executable, str(manage), "runserver", f"127.0.0.1:{port}"],
            preexec_fn=ends_with_its_parent,
        )
        self.descendants: dict[int, psutil.Process] = {}

    def wait(self) -> int:
        """Until the server exits on its own; its exit code, as a shell reports it."""
        while True:
            try:
                code = self.process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self._note_descendants()
                continue
            return 128 - code if code < 0 else code

    def stop(self, *, grace: float = 0.0) -> None:
        """The serving grandchildren first, so that each leaves the database's list of users
        itself (the reloader would SIGKILL them), then the reloader; SIGKILL after a while.
        ``grace``: seconds to let processes that are already exiting finish on their own."""
        self._note_descendants()
        if grace:
            with suppress(psutil.NoSuchProcess):
                psutil.wait_procs([psutil.Process(self.process.pid)], timeout=grace)
            psutil.wait_procs(list(self.descendants.values()), timeout=grace)
        serving = [p for p in self.descendants.values() if _terminated(p)]
        _, stuck = psutil.wait_procs(serving, timeout=STOP_TIMEOUT_S)
        # The reloader exits by itself once what it serves exited; a SIGTERM while it does
        # interrupts its exit (a traceback of its SIGTERM handler). So it gets a moment first.
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(RELOADER_EXIT_S)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for process in stuck:
            with suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(stuck, timeout=STOP_TIMEOUT_S)

    def _note_descendants(self) -> None:
        with suppress(psutil.NoSuchProcess):
            for process in psutil.Process(self.process.pid).children(recursive=True):
                self.descendants.setdefault(process.pid, process)


def ends_with_its_parent() -> None:
    """In the reloader, before it starts: Linux sends it SIGTERM if this process dies, even
    by SIGKILL, so that a killed run does not leave the development server holding its port
    (and the database: the next run takes that over)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _terminated(process: psutil.Process) -> bool:
    """Send SIGTERM if the process still runs; whether it did."""
    try:
        if not process.is_running():
            return False
        process.terminate()
    except psutil.NoSuchProcess:
        return False
    return True
