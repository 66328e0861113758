"""A real Redis server and real Celery worker processes for the tests that need them.

``redis_server`` starts Debian's ``redis-server`` (``make test`` installs it) on a free port
for the session. ``celery_worker`` points the test process's Celery app at it (tasks are
sent, no longer run eagerly) and starts ``celery -A portal worker`` processes on the test
database; a worker (or only its pool's child) can be killed with SIGKILL mid-task and another
started, as in production. ``RedisServer`` is a server of a test's own, which it can restart
on the same port. Such tests need ``django_db(transaction=True)``: the worker only sees
committed rows.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 60


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], *, timeout: float, what: str, every: float = 0.1) -> Any:
    """Poll ``check`` until it returns something true; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"Timed out after {timeout:g} s waiting for {what}.")
        time.sleep(every)


class RedisServer:
    """One ``redis-server`` on a port of its own, which can be stopped and started again on
    that port (a restart). ``persistent`` turns on the append-only file, as the deployment
    guide asks, so queued tasks outlive a restart."""

    def __init__(self, *, persistent: bool = False):
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(
                "redis-server is not installed: `make test` installs Debian's redis-server as"
                " root; otherwise run `apt-get install redis-server`."
            )
        self.binary = binary
        self.persistent = persistent
        self.port = _free_port()
        self.folder = tempfile.mkdtemp(prefix="crp-test-redis-")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.persistent
            else ["--appendonly", "no"]
        )
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             *persistence, "--dir", self.folder, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(self.up, timeout=20, what="redis-server to answer")

    def up(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=2).ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        """Shut the server down (SIGTERM: it writes its append-only file first)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    server = RedisServer()
    try:
        yield server.url
    finally:
        server.close()


def _database_url() -> str:
    """The test database, as a URL another process can connect with."""
    from django.db import connection

    params = connection.get_connection_params()
    user = quote(str(params.get("user") or ""))
    password = quote(str(params.get("password") or ""))
    auth = f"{user}:{password}@" if password else f"{user}@"
    host = params.get("host") or ""
    port = params.get("port") or ""
    name = quote(str(connection.settings_dict["NAME"]))
    if host.startswith("/"):  # a Unix socket directory (the embedded server)
        return f"postgresql://{auth}/{name}?host={quote(host)}" + (f"&port={port}" if port else "")
    return f"postgresql://{auth}{host}{':' + str(port) if port else ''}/{name}"


class Worker:
    """One ``celery -A portal worker`` process (and its pool child), in its own group."""

    def __init__(self, env: dict[str, str], log: Path):
        self.log_path = log
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", "prefork",
             "--concurrency", "1", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
             "--hostname", f"test-{os.getpid()}-{time.monotonic_ns()}@%h"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        wait_until(self._ready, timeout=READY_TIMEOUT, what="the Celery worker to start")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"The Celery worker exited at start:\n{self.log()}")
        return " ready." in self.log()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def pool_pids(self) -> list[int]:
        """The pool's child processes (the ones running tasks)."""
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the process ended meanwhile
            if int(fields[1]) == self.process.pid:
                children.append(int(stat.parent.name))
        return children

    def kill_pool(self) -> list[int]:
        """SIGKILL the pool's children only: the worker itself sees them die (and starts
        new ones), as when a task's process is killed by the OOM killer."""
        pids = self.pool_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return pids

    def kill(self) -> None:
        """SIGKILL the worker and its pool: no shutdown, no acknowledgement, as a crash."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


class Workers:
    """Starts workers on demand for one test; stops every one at the end."""

    def __init__(self, broker: str, extra_env: dict[str, str], folder: Path):
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "DATABASE_URL": _database_url(),
            "DATABASE_OWNER_URL": "",  # workers act as the application role alone
            "CELERY_BROKER_URL": broker,
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        self.folder = folder
        self.started: list[Worker] = []

    def start(self, **env: str) -> Worker:
        worker = Worker({**self.env, **env}, self.folder / f"worker-{len(self.started) + 1}.log")
        self.started.append(worker)
        return worker

    def logs(self) -> str:
        return "\n".join(w.log() for w in self.started)

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()


def _forget_broker_connections() -> None:
    """Drop the Celery app's cached connection and producer pools: they keep the broker URL
    they were made with, so a test that sends elsewhere needs fresh ones, before and after."""
    from kombu import pools

    from portal.celery import app

    pools.reset()  # closes them and empties kombu's registry, which hands out pools by URL
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@contextmanager
def sending_to(broker: str) -> Iterator[str]:
    """The test process sends tasks to ``broker`` instead of running them itself."""
    from portal.celery import app

    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    if app.conf.broker_url != broker:
        _forget_broker_connections()
    app.conf.update(broker_url=broker, task_always_eager=False)
    try:
        yield broker
    finally:
        app.conf.update(saved)
        if saved["broker_url"] != broker:
            _forget_broker_connections()


@pytest.fixture
def celery_broker(redis_server: str) -> Iterator[str]:
    """The test process sends tasks to the session's Redis instead of running them itself
    (its connections stay open: the next test sends to the same server)."""
    import redis

    redis.Redis.from_url(redis_server).flushdb()
    with sending_to(redis_server):
        yield redis_server


@pytest.fixture
def celery_workers(
    celery_broker: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Workers]:
    """Start workers with ``celery_workers.start()``. Workers batch slowly (10 memories per
    batch, 40 ms apart) so that a test can watch, or kill, a run part-way."""
    marker = request.node.get_closest_marker("worker_env")
    extra = {"MAINTENANCE_BATCH_SIZE": "10", "MAINTENANCE_BATCH_PAUSE_MS": "40"}
    if marker is not None:
        extra.update(marker.kwargs)
    workers = Workers(celery_broker, extra, tmp_path)
    try:
        yield workers
    finally:
        workers.stop_all()
        print(workers.logs())  # shown by pytest when the test failed
