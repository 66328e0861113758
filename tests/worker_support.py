"""A real Redis server and real Celery worker processes for the tests that need them.

``redis_server`` starts Debian's ``redis-server`` (``make test`` installs it) on a free port
for the session. ``celery_worker`` points the test process's Celery app at it (tasks are
sent, no longer run eagerly) and starts ``celery -A portal worker`` processes on the test
database; a worker can be killed with SIGKILL mid-task and another started, as in
production. Such tests need ``django_db(transaction=True)``: the worker only sees committed
rows.
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


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server is not installed: `make test` installs Debian's redis-server as root;"
            " otherwise run `apt-get install redis-server`."
        )
    import redis

    port = _free_port()
    folder = tempfile.mkdtemp(prefix="crp-test-redis-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", folder, "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)

    def up() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    try:
        wait_until(up, timeout=20, what="redis-server to answer")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


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


@pytest.fixture
def celery_broker(redis_server: str) -> Iterator[str]:
    """The test process sends tasks to Redis instead of running them itself."""
    from portal.celery import app

    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    app.conf.update(broker_url=redis_server, task_always_eager=False)
    import redis

    redis.Redis.from_url(redis_server).flushdb()
    try:
        yield redis_server
    finally:
        # The connection pool stays open: the next test sends to the same server.
        app.conf.update(saved)


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
