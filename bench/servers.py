"""The web servers the recall benchmark can run (``BENCH_SERVER``), and starting and stopping
one on a dataset."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.common import ROOT

PORT = 8765

# The server the benchmark runs (BENCH_SERVER), two workers each: by default the production
# server as `make serve` runs it (portal/serve.py, granian), without its access log. The others
# are the ones it was compared with (docs/performance.md, "The server"); gunicorn's need
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
    pgdata: Path, *, embedder: str | None = "bench.embedder.ClusterEmbedder", port: int = PORT
) -> subprocess.Popen[bytes]:
    """The server as the benchmark serves it; ``embedder=None``: the portal's default
    embedder."""
    env = {
        **os.environ,
        "EMBEDDED_PGDATA": str(pgdata),
        "PYTHONPATH": str(ROOT),
        "LOG_LEVEL": "WARNING",
    }
    if embedder is not None:
        env["RECALL_EMBEDDER"] = embedder
    else:
        env.pop("RECALL_EMBEDDER", None)
    bind = (["--host", "127.0.0.1", "--port", str(port)] if SERVER.startswith(("granian", "serve"))
            else ["-b", f"127.0.0.1:{port}"])  # fmt: skip
    server = subprocess.Popen([sys.executable, *SERVERS[SERVER], *bind], cwd=ROOT, env=env)
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
