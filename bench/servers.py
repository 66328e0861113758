"""The web servers the recall benchmark can run (``BENCH_SERVER``), starting and stopping one on
a dataset, and the client that measures the recall endpoint on it (``http_run``)."""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import ROOT

PORT = 8765

# The server the benchmark runs (BENCH_SERVER), two workers each: by default the production
# server as `make serve` runs it (portal/serve.py, granian), without its access log. The others
# are the ones it was compared with (docs/performance.md, "The web server"); gunicorn's need
# `pip install gunicorn`.
SERVERS = {
    "serve": ["-m", "portal.serve", "--workers", "2", "--log-level", "warning"],
    "gunicorn": ["-m", "gunicorn", "portal.wsgi", "-w", "2", "--log-level", "warning"],
    "gunicorn-gthread": ["-m", "gunicorn", "portal.wsgi", "-w", "2", "--threads", "2",
                         "--log-level", "warning"],
    "gunicorn-gthread1": ["-m", "gunicorn", "portal.wsgi", "-w", "2", "--threads", "1",
                          "--worker-class", "gthread", "--log-level", "warning"],
    "granian": ["-m", "granian", "--interface", "wsgi", "--workers", "2", "--blocking-threads",
                "1", "--log-level", "warning", "--no-ws", "portal.wsgi:application"],
    "granian-st": ["-m", "granian", "--interface", "wsgi", "--workers", "2", "--blocking-threads",
                   "1", "--runtime-threads", "1", "--runtime-mode", "st", "--http", "1",
                   "--log-level", "warning", "--no-ws", "portal.wsgi:application"],
}  # fmt: skip
SERVER = os.environ.get("BENCH_SERVER", "serve")
SERVER_NAMES = {"serve": "granian as `make serve` runs it (`portal/serve.py`)"}
if SERVER not in SERVERS:
    raise SystemExit(f"BENCH_SERVER must be one of {', '.join(SERVERS)}, not {SERVER!r}.")


def start_server(
    pgdata: Path,
    *,
    portal_embedder: bool = False,
    port: int = PORT,
    workers: int = 2,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """The server as the benchmark serves it, embedding with the dataset's embedder (the
    ``RECALL_EMBEDDER`` ``bench.common.configure`` set) or, ``portal_embedder``, with the
    portal's default; ``workers`` processes (``make serve``'s two by default)."""
    env = {
        **os.environ,
        "EMBEDDED_PGDATA": str(pgdata),
        "PYTHONPATH": str(ROOT),
        "LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    if portal_embedder:
        env.pop("RECALL_EMBEDDER", None)
    bind = (["--host", "127.0.0.1", "--port", str(port)] if SERVER.startswith(("granian", "serve"))
            else ["-b", f"127.0.0.1:{port}"])  # fmt: skip
    command = list(SERVERS[SERVER])
    flag = next(i for i, arg in enumerate(command) if arg in ("--workers", "-w"))
    command[flag + 1] = str(workers)
    server = subprocess.Popen([sys.executable, *command, *bind], cwd=ROOT, env=env)
    for _ in range(100):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            pass
        time.sleep(0.2)
    server.terminate()
    raise SystemExit(f"{SERVER} did not become ready")


def server_stopped(server: subprocess.Popen[bytes]) -> None:
    """Stop the server; one that waits for idle keep-alive connections is killed after 10 s."""
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(10)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(latencies_ms: list[float], seconds: float) -> dict[str, float]:
    return {
        "requests": len(latencies_ms),
        "p50Ms": round(pct(latencies_ms, 50), 2),
        "p95Ms": round(pct(latencies_ms, 95), 2),
        "p99Ms": round(pct(latencies_ms, 99), 2),
        "meanMs": round(statistics.fmean(latencies_ms), 2),
        "throughputPerS": round(len(latencies_ms) / seconds, 1),
    }


def http_run(
    token: str, base: dict[str, Any], jobs: list[tuple[str, str]], *, concurrency: int,
    seconds: float | None = None, before_each: Callable[[], None] | None = None,
    latencies_kept: list[float] | None = None, warm: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Latency and throughput of the recall endpoint; ``before_each`` runs untimed before every
    request (concurrency 1 only); each latency is also appended to ``latencies_kept``.
    ``warm``: the first 20 jobs are sent once, untimed, first (off where every measured query
    must be new to the server's query-vector cache)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds if seconds else None

    def worker(offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        i = offset
        while True:
            if deadline is None and i >= len(jobs):
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            actor, query = jobs[i % len(jobs)]
            payload = json.dumps({**base, "query": query})
            if before_each is not None:
                before_each()
            t0 = time.perf_counter()
            try:
                conn.request("POST", f"/v1/memory/actors/{actor}/recall", payload, headers)
                response = conn.getresponse()
                data = response.read()
                status = response.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
                status, data = 599, b""
            elapsed = (time.perf_counter() - t0) * 1000
            with lock:
                if status == 200:
                    latencies.append(elapsed)
                else:
                    errors.append(status)
            if response.getheader("Connection", "").lower() == "close" if status == 200 else True:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
            i += concurrency
            del data

    # Warm both workers (connections, caches) before measuring.
    for actor, query in jobs[:20] if warm else []:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        c.request("POST", f"/v1/memory/actors/{actor}/recall",
                  json.dumps({**base, "query": query}), headers)  # fmt: skip
        c.getresponse().read()
        c.close()
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if latencies_kept is not None:
        latencies_kept.extend(latencies)
    result = summary(latencies, time.perf_counter() - started)
    result["concurrency"] = concurrency
    result["errors"] = len(errors)
    return result
