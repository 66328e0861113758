"""Who stops the embedded PostgreSQL: its list of users, a killed user, and every way
``make run`` (``manage.py run_portal``) can end. The servers here are real, each in its own
temporary data folder, driven from subprocesses as a terminal or make would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from portal import embedded_db
from tests.conftest import server_folder

REPO = Path(__file__).resolve().parents[2]

# Starts (or reuses) the server, says so, then holds it or exits normally.
USER = """
import sys, time
from pathlib import Path
from portal import embedded_db
embedded_db.ensure_server(Path(sys.argv[1]))
print("ready", flush=True)
if sys.argv[2] == "hold":
    time.sleep(600)
"""


def handles(pgdata: Path) -> list[int]:
    return json.loads((pgdata / embedded_db.HANDLES_FILE).read_text() or "[]")


def postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def gone(pid: int, within: float = 10.0) -> bool:
    # pg_ctl's stop returns once the pid file is removed; the process exits just after.
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def environment(pgdata: Path) -> dict[str, str]:
    env = {**os.environ, "EMBEDDED_PGDATA": str(pgdata), "EMBEDDED_PG_SHARED_BUFFERS": "32MB"}
    env.pop("DATABASE_URL", None)
    env.pop("DATABASE_OWNER_URL", None)
    return env


def signals_as_a_terminal_leaves_them() -> None:
    # A test runner started in the background may ignore SIGINT; a terminal's job does not.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


class ForgettingDepartedUsersTests:
    """The list clean-up alone, on a list file without a server."""

    def server(self, pgdata: Path) -> SimpleNamespace:
        return SimpleNamespace(pgdata=pgdata, _lock=threading.Lock())

    def test_it_keeps_live_processes_and_drops_those_that_have_exited(self, tmp_path):
        exited = subprocess.Popen([sys.executable, "-c", "pass"])
        exited.wait()
        (tmp_path / embedded_db.HANDLES_FILE).write_text(json.dumps([os.getpid(), exited.pid]))

        assert embedded_db._forget_departed(self.server(tmp_path)) == [os.getpid()]
        assert handles(tmp_path) == [os.getpid()]

    def test_it_drops_a_pid_reused_by_a_process_started_after_the_list_was_written(self, tmp_path):
        listed = tmp_path / embedded_db.HANDLES_FILE
        listed.write_text(json.dumps([os.getpid()]))
        long_before_this_process = psutil.Process().create_time() - 3600
        os.utime(listed, (long_before_this_process, long_before_this_process))

        assert embedded_db._forget_departed(self.server(tmp_path)) == []

    def test_a_list_cut_short_by_a_killed_writer_is_reset(self, tmp_path):
        (tmp_path / embedded_db.HANDLES_FILE).write_text("[12")

        assert embedded_db._forget_departed(self.server(tmp_path)) == []
        assert handles(tmp_path) == []

    def test_no_list_means_no_users(self, tmp_path):
        assert embedded_db._forget_departed(self.server(tmp_path)) == []


class KilledUserTests:
    def test_a_start_after_a_killed_user_forgets_it_and_its_exit_stops_the_server(self, server_tmp):
        pgdata = server_tmp / "pg"
        killed = subprocess.Popen(
            [sys.executable, "-c", USER, str(pgdata), "hold"],
            cwd=REPO,
            env=environment(pgdata),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert killed.stdout is not None and killed.stdout.readline() == "ready\n"
        finally:
            killed.kill()
            killed.wait()
        # What SIGKILL (or SIGTERM before this fix) left: the server runs, its user is dead.
        left_running = postmaster(pgdata)
        assert psutil.pid_exists(left_running)
        assert handles(pgdata) == [killed.pid]

        later = subprocess.run(
            [sys.executable, "-c", USER, str(pgdata), "exit"],
            cwd=REPO,
            env=environment(pgdata),
            capture_output=True,
            text=True,
            timeout=120,
        )

        assert later.returncode == 0, later.stderr
        assert gone(left_running)
        assert handles(pgdata) == []


@pytest.fixture(scope="module")
def run_folder() -> Iterator[Path]:
    """One data folder for the runs below: the first run migrates it, the next ones reuse it
    (each a second start after the one before was stopped)."""
    folder = server_folder("run")
    yield folder / "pg"
    shutil.rmtree(folder, ignore_errors=True)


class Run:
    """``manage.py run_portal`` as ``make run`` starts it, on a free port."""

    def __init__(
        self, pgdata: Path, log: Path, *, demo: bool = False, new_group: bool = False, **env: str
    ) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "run_portal", "--port", str(self.port)]
            + ([] if demo else ["--no-demo"]),
            cwd=REPO,
            env={**environment(pgdata), "DJANGO_DEBUG": "true", **env},
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            preexec_fn=signals_as_a_terminal_leaves_them,
            process_group=0 if new_group else None,  # a terminal's job: a group of its own
        )
        self.serving = self._wait_until_ready()

    def _wait_until_ready(self) -> list[psutil.Process]:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2):
                    return psutil.Process(self.process.pid).children(recursive=True)
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"run_portal never answered:\n{self.output()}")

    def ended(self) -> int:
        return self.process.wait(timeout=60)

    def output(self) -> str:
        return self.log.read_text()


class RunPortalTests:
    @pytest.mark.parametrize(
        "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
    )
    def test_every_ending_signal_stops_the_server_and_then_postgresql(
        self, run_folder, tmp_path, signum
    ):
        run = Run(run_folder, tmp_path / "run.log")
        server = postmaster(run_folder)
        assert run.serving, "runserver's reloader and the process that serves"

        run.process.send_signal(signum)

        assert run.ended() == 0, run.output()  # a stop asked for, not a failure
        assert not [p.pid for p in run.serving if p.is_running()], run.output()
        assert gone(server), run.output()
        assert handles(run_folder) == []
        assert "Stopped the embedded PostgreSQL" in run.output()
        # The reloader exits once what it serves has: not interrupted doing so (a traceback).
        assert "Traceback" not in run.output(), run.output()

    def test_ctrl_c_in_a_terminal_ends_the_run_quietly(self, run_folder, tmp_path):
        # A terminal's Ctrl-C signals the whole group: runserver's processes are exiting
        # already when the run stops them, and a SIGTERM then printed a traceback.
        run = Run(run_folder, tmp_path / "run.log", new_group=True)

        os.killpg(run.process.pid, signal.SIGINT)

        assert run.ended() == 0, run.output()
        assert "Traceback" not in run.output(), run.output()
        assert "Stopped the embedded PostgreSQL" in run.output()

    def test_a_server_that_exits_on_its_own_ends_the_run_and_stops_postgresql(
        self, run_folder, tmp_path
    ):
        run = Run(run_folder, tmp_path / "run.log")
        server = postmaster(run_folder)
        reloader = next(p for p in run.serving if p.ppid() == run.process.pid)

        reloader.terminate()  # runserver's own SIGTERM: it exits 0, killing what it serves from

        assert run.ended() == 0, run.output()
        assert gone(server), run.output()
        assert handles(run_folder) == []
