"""``make load``: the load scenario (``locustfile.py``) against the production server, on a
database of its own.

1. A throw-away embedded PostgreSQL in a new temporary folder (never the demo's
   ``.pgdata``): migrated, the demo workspace loaded, an editor token issued, static files
   collected.
2. granian as ``make serve`` runs it (``portal.serve``, ``--workers``, DEBUG off, production settings apart
   from the HTTPS redirect: plain HTTP on 127.0.0.1), with the API throttles raised out of
   reach: the limits would otherwise measure the throttle (every call is still counted).
3. ``locust --headless`` for the duration, ramping users up at a bounded rate.
4. The figures per operation (requests, error rate, p50/p95/p99, requests/s; 409s on saves
   counted as handled) go to ``bench/results/latest/load.json`` and are printed as a table.

However the run ends (done, Ctrl-C, SIGTERM, SIGHUP, an error), locust and the server are
stopped, then the database, whose folder is deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from contextlib import suppress
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS  # noqa: E402
from bench.load import scenario  # noqa: E402

# Far beyond what the run sends, so no call is refused (portal/throttling.py).
UNLIMITED = "100000000"
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0


class RunEnded(BaseException):
    """A signal ended the run (not an ``Exception``: nothing on the way may swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum


def _end_run(signum: int, frame: FrameType | None) -> None:
    raise RunEnded(signum)


def parse_duration(text: str) -> int:
    """``120``, ``90s``, ``2m``, ``1m30s``, ``1h`` -> seconds."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?", text.strip())
    if not parts or not text.strip():
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 120, 90s, 2m, 1m30s)")
    hours, minutes, seconds = (int(p or 0) for p in parts.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise argparse.ArgumentTypeError("the duration must be positive")
    return total


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=int(os.environ.get("LOAD_USERS", 50)))
    parser.add_argument(
        "--duration",
        type=parse_duration,
        default=parse_duration(os.environ.get("LOAD_DURATION", "2m")),
        help="e.g. 2m, 90s, 1m30s (default 2m)",
    )
    parser.add_argument(
        "--spawn-rate",
        type=float,
        default=float(os.environ.get("LOAD_SPAWN_RATE", 5)),
        help="users started per second (at most 20)",
    )
    parser.add_argument("--workers", type=int, default=int(os.environ.get("SERVE_WORKERS", 2)))
    parser.add_argument(
        "--max-error-rate",
        type=float,
        default=0.01,
        help="exit 1 if more than this share of the requests failed (default 0.01)",
    )
    args = parser.parse_args(argv)
    if args.users < 1 or args.workers < 1 or not 0 < args.spawn_rate <= 20:
        parser.error("--users and --workers must be at least 1, --spawn-rate in (0, 20]")

    for signum in ENDING_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _end_run)
    workdir = Path(tempfile.mkdtemp(prefix="crp-load-"))
    run = LoadRun(workdir, args)
    try:
        return run.execute()
    except RunEnded as ended:
        print(f"\nLoad run ended by {ended}.", file=sys.stderr)
        return ended.exit_code
    finally:
        for signum in ENDING_SIGNALS:  # the clean-up is bounded; a second Ctrl-C waits for it
            signal.signal(signum, signal.SIG_IGN)
        run.stop()
        shutil.rmtree(workdir, ignore_errors=True)


class LoadRun:
    def __init__(self, workdir: Path, args: argparse.Namespace) -> None:
        self.workdir = workdir
        self.args = args
        self.pgdata = workdir / "pgdata"
        self.static = workdir / "static"
        self.access_log = workdir / "access.log"
        self.server: subprocess.Popen[bytes] | None = None
        self.locust: subprocess.Popen[bytes] | None = None
        self.database_started = False

    # --- the steps ----------------------------------------------------------------------

    def execute(self) -> int:
        RESULTS.mkdir(parents=True, exist_ok=True)
        token = self.prepare_database()
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        self.start_server(port)
        self.wait_until_ready(base_url)
        found = scenario.discover(base_url, token)
        load_before = os.getloadavg()
        started = datetime.now(UTC)
        stats = self.run_locust(base_url, token, found)
        results = self.summarise(stats, started, load_before)
        out = RESULTS / "load.json"
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(table(results))
        print(f"\nWritten to {out.relative_to(ROOT)}")
        total = results["total"]
        if total["errorRate"] > self.args.max_error_rate:
            print(
                f"Error rate {total['errorRate']:.2%} is over {self.args.max_error_rate:.2%}.",
                file=sys.stderr,
            )
            return 1
        return 0

    def prepare_database(self) -> str:
        """Start the throw-away server, migrate, load the demo, issue a token."""
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("DJANGO_PRODUCTION", None)  # load_demo refuses production settings
        os.environ["EMBEDDED_PGDATA"] = str(self.pgdata)
        os.environ["DJANGO_STATIC_ROOT"] = str(self.static)
        # One secret key and one audit chain key for the run, shared by this process (which
        # loads the demo) and the server, so that both extend the same keyed chain.
        os.environ["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
        os.environ["AUDIT_HMAC_KEYS"] = f"load:{secrets.token_hex(32)}"
        os.environ.pop("AUDIT_HMAC_KEY_ID", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.db import connections

        from portal import embedded_db

        self.check_paths()
        print(f"Database: a throw-away embedded PostgreSQL in {self.pgdata}", flush=True)
        # Temporary: deleted when the last process using it lets go (this one, at the end).
        self.database_started = True  # before: a signal may arrive while it starts
        embedded_db.ensure_server(
            self.pgdata,
            temporary=True,
            shared_buffers=settings.DATABASES["default"].get("EMBEDDED_SHARED_BUFFERS"),
        )
        call_command("migrate", interactive=False, verbosity=0)
        call_command("load_demo")
        call_command("collectstatic", interactive=False, verbosity=0)
        out = StringIO()
        call_command(
            "create_api_token",
            workspace=scenario.WORKSPACE,
            role="editor",
            name="load",
            stdout=out,
            stderr=StringIO(),
        )
        # The server's processes open their own connections; this one only holds the database.
        connections.close_all()
        return out.getvalue().strip().splitlines()[-1]

    def check_paths(self) -> None:
        """Every operation's path reaches the route it is meant for."""
        from django.urls import resolve

        for name, path in scenario.sample_paths().items():
            expected = next(op.url_name for op in scenario.OPERATIONS if op.name == name)
            found = resolve(path.split("?")[0]).url_name
            if found != expected:
                raise SystemExit(f"{name}: {path} resolves to {found!r}, not {expected!r}")

    def start_server(self, port: int) -> None:
        from console.management.commands.run_portal import ends_with_its_parent

        env = {
            **os.environ,
            "DJANGO_DEBUG": "false",
            "DJANGO_PRODUCTION": "true",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DJANGO_SECURE_SSL_REDIRECT": "false",  # plain HTTP on the loopback
            "API_RATE_PER_MINUTE": UNLIMITED,
            "RECALL_RATE_PER_MINUTE": UNLIMITED,
        }
        log = (RESULTS / "load-server.log").open("wb")
        print(f"Server: granian, {self.args.workers} workers, on 127.0.0.1:{port}", flush=True)
        self.server = subprocess.Popen(
            [
                sys.executable, "-m", "portal.serve",
                "--workers", str(self.args.workers),
                "--port", str(port),
                "--access-log", str(self.access_log),
            ],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=ends_with_its_parent,
        )  # fmt: skip

    def wait_until_ready(self, base_url: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.server is not None and self.server.poll() is not None:
                raise SystemExit(
                    "The server exited at start-up: bench/results/latest/load-server.log"
                )
            with suppress(OSError):
                with urllib.request.urlopen(base_url + "/readyz", timeout=5) as response:
                    if response.status == 200:
                        return
            time.sleep(0.3)
        raise SystemExit(f"The server was not ready within {READY_TIMEOUT_S:.0f} s.")

    def run_locust(self, base_url: str, token: str, found: scenario.Targets) -> dict[str, Any]:
        stats_file = self.workdir / "locust-stats.json"
        duration = self.args.duration
        env = {
            **os.environ,
            "LOAD_TOKEN": token,
            "LOAD_TARGETS": found.to_json(),
            "LOAD_STATS_JSON": str(stats_file),
        }
        print(
            f"Load: {self.args.users} users (spawned {self.args.spawn_rate:g}/s) for "
            f"{duration} s; locust's log in bench/results/latest/load-locust.log",
            flush=True,
        )
        log = (RESULTS / "load-locust.log").open("wb")
        self.locust = subprocess.Popen(
            [
                sys.executable, "-m", "locust",
                "-f", str(Path(__file__).with_name("locustfile.py")),
                "--headless", "--only-summary",
                "--users", str(self.args.users),
                "--spawn-rate", f"{self.args.spawn_rate:g}",
                "--run-time", f"{duration}s",
                "--stop-timeout", "10",
                "--host", base_url,
            ],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            self.locust.wait(timeout=duration + 120)
        except subprocess.TimeoutExpired:
            raise SystemExit("locust did not stop by itself; stopped it.") from None
        if not stats_file.exists():
            raise SystemExit(
                f"locust wrote no figures (exit code {self.locust.returncode}): "
                "bench/results/latest/load-locust.log"
            )
        return dict(json.loads(stats_file.read_text()))

    def summarise(
        self, stats: dict[str, Any], started: datetime, load_before: tuple[float, ...]
    ) -> dict[str, Any]:
        def with_rate(figures: dict[str, Any]) -> dict[str, Any]:
            requests = figures["requests"]
            return {**figures, "errorRate": figures["failures"] / requests if requests else 0.0}

        none = {k: 0 for k in stats["total"]}  # an operation the run never reached
        order = [op.name for op in scenario.OPERATIONS] + sorted(stats["operations"])
        operations = {
            name: with_rate(stats["operations"].get(name, none)) for name in dict.fromkeys(order)
        }
        return {
            "date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                # The machine is shared (other work may run): the load average before and after.
                "loadAverage1mBefore": round(load_before[0], 2),
                "loadAverage1mAfter": round(os.getloadavg()[0], 2),
            },
            "users": self.args.users,
            "spawnRate": self.args.spawn_rate,
            "durationSeconds": self.args.duration,
            "server": f"granian (portal.serve), {self.args.workers} workers, DEBUG off",
            "database": "embedded PostgreSQL (throw-away), demo workspace acme",
            "throttling": "API_RATE_PER_MINUTE and RECALL_RATE_PER_MINUTE set to " + UNLIMITED,
            "weights": {op.name: op.weight for op in scenario.OPERATIONS},
            "operations": operations,
            "total": with_rate(stats["total"]),
            "conflictsHandled": stats["conflicts"],
            "errors": stats["errors"],
            # From the access log: the run's calls and the few made to set it up.
            "serverStatuses": self.statuses(),
        }

    def statuses(self) -> dict[str, int]:
        """Responses per status code, from the server's access log."""
        counts: Counter[str] = Counter()
        with suppress(FileNotFoundError):
            for line in self.access_log.read_text(errors="replace").splitlines():
                match = re.search(r'" (\d{3}) ', line)
                if match:
                    counts[match.group(1)] += 1
        return dict(sorted(counts.items()))

    # --- the way out --------------------------------------------------------------------

    def stop(self) -> None:
        """locust, then the server (it leaves the database's list of users once its workers
        stopped), then the database: each step bounded."""
        for process in (self.locust, self.server):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.database_started:
            from django.db import connections

            from portal import embedded_db

            connections.close_all()
            # The database's own log outlives its folder: errors under load are explained there.
            with suppress(OSError):
                shutil.copyfile(self.pgdata / "log", RESULTS / "load-postgres.log")
            others = embedded_db.release_server(self.pgdata)
            if others:
                print(f"The throw-away database is still used by {others}.", file=sys.stderr)
            else:
                print("Stopped the server and the throw-away database.", flush=True)


def table(results: dict[str, Any]) -> str:
    header = (
        f"\nLoad: {results['users']} users, {results['durationSeconds']} s, {results['date']}, "
        f"{results['machine']['cpus']} CPUs (load average {results['machine']['loadAverage1mBefore']}"
        f" before, {results['machine']['loadAverage1mAfter']} after)\n"
    )
    lines = [
        "| operation | requests | error rate | p50 ms | p95 ms | p99 ms | requests/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [*results["operations"].items(), ("all", results["total"])]
    for name, f in rows:
        lines.append(
            f"| {name} | {f['requests']:,} | {f['errorRate']:.2%} | {f['p50Ms']} | {f['p95Ms']} "
            f"| {f['p99Ms']} | {f['requestsPerSecond']:.1f} |"
        )
    conflicts = results["conflictsHandled"].get("policy save", 0)
    footer = f"\n409 conflicts on policy saves (handled: re-read, saved again): {conflicts}"
    if results["errors"]:
        footer += "\nFailures: " + "; ".join(
            f"{e['operation']}: {e['error']} x{e['occurrences']}" for e in results["errors"]
        )
    return header + "\n".join(lines) + footer


if __name__ == "__main__":
    sys.exit(main())
