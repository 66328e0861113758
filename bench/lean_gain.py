"""What the recall's lean path (recall/api/lean.py) saves, with the default embedder.

The usual recall, answered by ``LeanRecall`` and by Django's handler alone, in this process,
in alternating rounds (so the machine's drift falls on both alike), on a throw-away embedded
PostgreSQL with the demo loaded: once with a new query each call (every query embedded by the
model) and once with one query repeated (the query-vector cache answers). Prints and writes
``bench/results/latest/lean-gain.json``: each path's median of the rounds' p50s, the gain,
and the spread of the rounds' p50s (the noise the gain is judged against).

    .venv/bin/python bench/lean_gain.py [--rounds 10] [--calls 40]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def setup(folder: Path) -> dict[str, Any]:
    os.environ["EMBEDDED_PGDATA"] = str(folder / "pg")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["API_RATE_PER_MINUTE"] = "100000000"
    os.environ["RECALL_RATE_PER_MINUTE"] = "100000000"
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from console.services import api_token_create
    from portal.db.scope import scope_all_by_default
    from portal.models import Workspace

    scope_all_by_default()
    call_command("migrate", verbosity=0)
    call_command("load_demo", verbosity=0)
    workspace = Workspace.objects.get(slug="acme")
    _, token = api_token_create(workspace=workspace, name="lean-bench", role="editor")
    workload = workspace.workloads.get(name="support-assistant")
    return {"token": token, "workload": str(workload.pk)}


def environ_for(token: str, body: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    return {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/v1/memory/actors/user:ada/recall",
        "QUERY_STRING": "", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(raw)), "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1",
        "wsgi.input": io.BytesIO(raw), "wsgi.url_scheme": "http", "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0), "wsgi.multithread": False, "wsgi.multiprocess": True,
        "wsgi.run_once": False, "HTTP_AUTHORIZATION": f"Bearer {token}",
    }  # fmt: skip


def timed(app: Any, environ: dict[str, Any]) -> float:
    statuses: list[str] = []
    started = time.perf_counter()
    body = b"".join(app(environ, lambda status, headers, *exc: statuses.append(status)))
    elapsed = time.perf_counter() - started
    if not statuses or not statuses[0].startswith("200"):
        raise SystemExit(f"recall answered {statuses}: {body[:300]!r}")
    return elapsed * 1000


def measure(paths: dict[str, Any], fixture: dict[str, Any], *, rounds: int, calls: int,
            unique: bool) -> dict[str, Any]:  # fmt: skip
    counter = 0

    def body() -> dict[str, Any]:
        nonlocal counter
        counter += 1
        query = "how should I word a refund reply to Ada"
        return {
            "workloadId": fixture["workload"], "environment": "prod", "topK": 5,
            "query": f"{query} (case {counter})" if unique else query,
        }  # fmt: skip

    for app in paths.values():  # warm: the lean path learns the headers of this kind of call
        for _ in range(10):
            timed(app, environ_for(fixture["token"], body()))
    p50s: dict[str, list[float]] = {name: [] for name in paths}
    for n in range(rounds):
        order = list(paths) if n % 2 == 0 else list(reversed(paths))
        for name in order:
            times = [
                timed(paths[name], environ_for(fixture["token"], body())) for _ in range(calls)
            ]
            p50s[name].append(statistics.median(times))
    medians = {name: statistics.median(values) for name, values in p50s.items()}
    gain = medians["django"] - medians["lean"]
    return {
        "p50ms": {name: round(value, 3) for name, value in medians.items()},
        "roundP50sMs": {name: [round(v, 3) for v in values] for name, values in p50s.items()},
        "gainMs": round(gain, 3),
        "gainPct": round(100 * gain / medians["django"], 1),
        "spreadMs": {name: round(max(values) - min(values), 3) for name, values in p50s.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="crp-lean-bench-"))
    try:
        fixture = setup(folder)
        from django.core.wsgi import get_wsgi_application
        from django.db import connection

        from recall.api.lean import LeanRecall
        from recall.runtime import embedder

        django_app = get_wsgi_application()
        paths = {"lean": LeanRecall(django_app), "django": django_app}
        results = {
            "embedder": embedder().model_name,
            "rounds": args.rounds,
            "callsPerRound": args.calls,
            "newQueryEachCall": measure(
                paths, fixture, rounds=args.rounds, calls=args.calls, unique=True
            ),
            "repeatedQuery": measure(
                paths, fixture, rounds=args.rounds, calls=args.calls, unique=False
            ),
        }
        connection.close()
    finally:
        from portal.embedded_db import release_server

        release_server(folder / "pg")  # stops the server this run started
        shutil.rmtree(folder, ignore_errors=True)
    out = ROOT / "bench" / "results" / "latest" / "lean-gain.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
