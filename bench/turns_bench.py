"""Per-turn context assembly against a recall of the same query, on the benchmark dataset.

    python bench/generate.py --memories 100000 --large-actor 20000 --label 100k
    python bench/turns_bench.py --label 100k [--turns 20 200]

For each session length, one session of a typical actor under the ``typical`` workload
(its stored layout configuration, the seed's defaults here) is played over HTTP under the
server ``make serve`` runs: every turn posts the assistant's previous reply and the user's
new message to ``POST /v1/sessions/{id}/turns`` (the context assembled for it: recall,
layout, prompt, budget status, compaction monitor), and a recall of the same message through
``POST /v1/memory/actors/{id}/recall`` with the topK the turn's recall used runs beside it,
the two in alternating order.
Both find the query's vector in the server's cache: each message is recalled once, untimed,
before its turn, on the server's one worker (``--workers 1``: one process, one cache; the
requests come one at a time either way), so neither pays the query's embedding
(``make bench`` times that apart) and the ratio is the assembly's own cost.

Then the statements: the same session length played in this process through the WSGI
application as served (``portal.wsgi``, the recall's lean path included), every statement
counted (``connection.execute_wrapper``), per turn and per recall. A turn's transaction
also costs the BEGIN and COMMIT psycopg sends around it, two round trips not counted as
statements (the recall writes in autocommit).

Writes ``bench/results/latest/turns-<label>.json`` (``bench/update_docs.py`` publishes it)
and prints a summary. The sessions, their turns and any memory a compaction wrote are removed
afterwards; their audit events stay, as the recall benchmark's do.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import RESULTS, ROOT, configure, interpreter  # noqa: E402
from bench.figures import ratio  # noqa: E402
from bench.servers import PORT, pct, server_stopped, start_server, summary  # noqa: E402

# The targets: a turn's p50 over the recall's, per session length.
TARGETS = {20: 1.5, 200: 2.0}
EXTERNAL_PREFIX = "bench-turns-"


def message(turn: int) -> str:
    """The user's message of a turn: a question naming a topic of the dataset."""
    return f"topic-{(turn * 37) % 512} what did we agree about the plans, turn {turn}"


def reply(turn: int) -> str:
    """The assistant's answer to the message of ``turn`` (posted with the next turn)."""
    return (
        f"For topic-{(turn * 37) % 512} we agreed to keep the customer's preferences and to"
        f" revisit the plans next week (answer {turn})."
    )


def turn_messages(turn: int) -> list[dict[str, str]]:
    earlier = [{"role": "assistant", "content": reply(turn - 1)}] if turn > 1 else []
    return [*earlier, {"role": "user", "content": message(turn)}]


class Client:
    """One keep-alive connection to the server, JSON in and out."""

    def __init__(self, token: str, port: int = PORT):
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
        t0 = time.perf_counter()
        self.conn.request("POST", path, json.dumps(body), self.headers)
        response = self.conn.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - t0) * 1000
        if response.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        return response.status, json.loads(data) if data else {}, elapsed


def checked(status: int, answer: dict[str, Any], expected: int, what: str) -> dict[str, Any]:
    if status != expected:
        raise SystemExit(f"{what} answered {status}: {json.dumps(answer)[:400]}")
    return answer


def session_played(
    client: Client, *, turns: int, actor: str, workload: str, nonce: str, top_k: list[int]
) -> dict[str, Any]:
    """One session of ``turns`` turns, each beside a recall of its message; latencies.
    ``top_k``: the topK of the turns' recalls, as last seen (updated in place)."""
    start = {"actorId": actor, "workloadId": workload, "environment": "prod",
             "externalId": f"{EXTERNAL_PREFIX}{nonce}-{turns}"}  # fmt: skip
    session = checked(*client.post("/v1/sessions", start)[:2], 201, "POST /v1/sessions")
    # The recall beside each turn asks for the topK the turn's own recall used (its
    # retrieval plan's; the latest turn's answer says it), so the two read the same rows.
    recall_body = {"workloadId": workload, "environment": "prod"}
    recall_path = f"/v1/memory/actors/{actor}/recall"
    turn_ms: list[float] = []
    recall_ms: list[float] = []
    compactions = 0
    entries: list[int] = []
    for n in range(1, turns + 1):
        query = message(n)
        # untimed: the query's vector into the worker's cache, for both calls alike
        warm = {**recall_body, "query": query, "topK": top_k[0]}
        checked(*client.post(recall_path, warm)[:2], 200, "recall")

        def turn(n: int = n) -> None:
            nonlocal compactions
            status, answer, ms = client.post(
                f"/v1/sessions/{session['id']}/turns", {"messages": turn_messages(n)}
            )
            checked(status, answer, 201, f"turn {n}")
            turn_ms.append(ms)
            compactions += bool(answer["compaction"] and answer["compaction"].get("runId"))
            entries.append(len(answer["recall"]["memoryIds"]))
            top_k[0] = answer["recall"]["topK"]

        def recall(query: str = query) -> None:
            body = {**recall_body, "query": query, "topK": top_k[0]}
            status, answer, ms = client.post(recall_path, body)
            checked(status, answer, 200, "recall")
            recall_ms.append(ms)

        for call in (turn, recall) if n % 2 else (recall, turn):
            call()
    return {
        "sessionId": session["id"],
        "turns": turns,
        "turn": summary(turn_ms, sum(turn_ms) / 1000),
        "recall": summary(recall_ms, sum(recall_ms) / 1000),
        "turnP50OverRecallP50": ratio(pct(turn_ms, 50), pct(recall_ms, 50)),
        "target": TARGETS.get(turns),
        "lastTenTurnsP50Ms": round(pct(turn_ms[-10:], 50), 2),
        "compactionRuns": compactions,
        "recallEntriesMean": round(statistics.fmean(entries), 1),
        "recallTopK": top_k[0],
    }


@contextmanager
def statements_counted() -> Iterator[list[str]]:
    """Every statement this process's connection runs inside the block (prepared ones too:
    ``portal.db.cursors`` wraps them as Django's own)."""
    from django.db import connection

    seen: list[str] = []

    def count(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        seen.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(count):
        yield seen


def wsgi_post(app: Any, path: str, body: dict[str, Any], token: str) -> tuple[int, Any]:
    """A POST through the WSGI application in this process, as the server hands it one."""
    payload = json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "localhost",
        "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "localhost",
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(payload)),
        "HTTP_AUTHORIZATION": f"Bearer {token}", "wsgi.input": io.BytesIO(payload),
        "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr, "wsgi.multithread": False,
        "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0),
        "REMOTE_ADDR": "127.0.0.1",
    }  # fmt: skip
    status: list[str] = []
    chunks = app(environ, lambda s, headers, exc_info=None: status.append(s))
    data = b"".join(chunks)
    getattr(chunks, "close", lambda: None)()
    return int(status[0].split()[0]), json.loads(data) if data else None


def statements(
    *, turns: int, token: str, actor: str, workload: str, nonce: str, top_k: int
) -> dict[str, Any]:
    """Statements per turn and per recall of the same message, a session of ``turns`` played
    in this process through the served WSGI application."""
    from portal.wsgi import application

    start = {"actorId": actor, "workloadId": workload, "environment": "prod",
             "externalId": f"{EXTERNAL_PREFIX}{nonce}-sql-{turns}"}  # fmt: skip
    status, session = wsgi_post(application, "/v1/sessions", start, token)
    checked(status, session, 201, "POST /v1/sessions (in process)")
    recall_body = {"workloadId": workload, "environment": "prod", "topK": top_k}
    per_turn: list[int] = []
    per_recall: list[int] = []
    for n in range(1, turns + 1):
        body = {**recall_body, "query": message(n)}
        wsgi_post(application, f"/v1/memory/actors/{actor}/recall", body, token)  # warm, cache
        with statements_counted() as seen:
            status, answer = wsgi_post(
                application, f"/v1/sessions/{session['id']}/turns",
                {"messages": turn_messages(n)}, token,
            )  # fmt: skip
        checked(status, answer, 201, f"turn {n} (in process)")
        per_turn.append(len(seen))
        with statements_counted() as seen:
            status, answer = wsgi_post(
                application, f"/v1/memory/actors/{actor}/recall", body, token
            )
        checked(status, answer, 200, "recall (in process)")
        per_recall.append(len(seen))
    return {
        "turns": turns,
        "perTurn": {
            "first": per_turn[0],
            "median": statistics.median(per_turn),
            "max": max(per_turn),
            "last": per_turn[-1],
        },
        "perRecall": {"median": statistics.median(per_recall), "max": max(per_recall)},
    }


def sessions_removed(workspace_id: int, actor_pk: int, memories_before: int) -> dict[str, int]:
    """The benchmark's sessions (their turns, contexts and compaction runs go with them) and
    the memories their compactions wrote for the actor, so the dataset stays as generated."""
    from django.db import connection

    from chat.models import Session
    from portal.db.roles import as_owner

    sessions, _ = Session.objects.filter(
        workspace_id=workspace_id, external_id__startswith=EXTERNAL_PREFIX
    ).delete()
    with as_owner(), connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM recall_memoryrecord WHERE actor_id = %s AND id > %s",
            [actor_pk, memories_before],
        )
        memories = cursor.rowcount
    return {"rowsDeleted": sessions, "memoriesDeleted": memories}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="100k")
    parser.add_argument("--turns", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--actor", default="u000001", help="a typical actor of the dataset")
    args = parser.parse_args()
    pgdata = configure(args.label)
    info = json.loads((pgdata.parent / f"{args.label}.json").read_text())

    from django.db import connection
    from django.db.models import Max

    from portal.models import Workspace
    from recall.hits import hits_fold
    from recall.models import Actor, MemoryRecord
    from team.services import api_token_create

    workspace = Workspace.objects.get(slug="bench")
    _, token = api_token_create(workspace=workspace, name="bench", role="editor", replace=True)
    actor = Actor.objects.get(workspace=workspace, kind="user", name=args.actor)
    actor_id = f"user:{args.actor}"
    memories_before = MemoryRecord.objects.aggregate(last=Max("id"))["last"] or 0
    workload = info["typicalWorkload"]
    nonce = time.strftime("%Y%m%d%H%M%S")
    sessions_removed(workspace.pk, actor.pk, memories_before)  # a run stopped half-way
    hits_fold(workspace_id=workspace.pk)
    connection.close()

    load_before = os.getloadavg()
    results: dict[str, Any] = {
        "label": args.label,
        "dataset": info,
        "machine": {"cpus": os.cpu_count(), **interpreter(), "workers": 1},
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "actor": actor_id,
    }
    server = start_server(pgdata, workers=1)
    try:
        client = Client(token)
        # a short session first, untimed: the worker's connections, statements and caches
        top_k = [10]  # until the first turn says what its recall asks for
        session_played(
            client, turns=5, actor=actor_id, workload=workload, nonce=f"{nonce}-w", top_k=top_k
        )
        results["sessions"] = [
            session_played(
                client, turns=n, actor=actor_id, workload=workload, nonce=nonce, top_k=top_k
            )
            for n in args.turns
        ]
    finally:
        server_stopped(server)
    try:
        results["statements"] = [
            statements(
                turns=n,
                token=token,
                actor=actor_id,
                workload=workload,
                nonce=nonce,
                top_k=results["sessions"][-1]["recallTopK"],
            )  # fmt: skip
            for n in args.turns
        ]
    finally:
        results["cleanup"] = sessions_removed(workspace.pk, actor.pk, memories_before)
    results["machine"]["loadavg"] = {"before": load_before, "after": os.getloadavg()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"turns-{args.label}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    print(f"\nwritten to {out.relative_to(ROOT)}")


def markdown(r: dict[str, Any]) -> str:
    """The results as a table (``bench/update_docs.py`` puts it in docs/performance.md)."""
    sql = {s["turns"]: s for s in r.get("statements", [])}
    lines = [
        f"Dataset `{r['label']}` ({r['dataset'].get('embedder', 'cluster')} vectors), actor"
        f" `{r['actor']}`, one server worker; load average {r['machine']['loadavg']['before'][0]:.2f}.",
        "",
        "| session | turn p50 / p99 ms | recall p50 / p99 ms | turn ÷ recall p50 | target |"
        " statements a turn (median, max) | a recall | compactions |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for s in r["sessions"]:
        counted = sql.get(s["turns"])
        statements_words = (
            f"{counted['perTurn']['median']:g}, {counted['perTurn']['max']}" if counted else "—"
        )
        recall_words = f"{counted['perRecall']['median']:g}" if counted else "—"
        met = s["target"] is not None and s["turnP50OverRecallP50"] <= s["target"]
        target = f"≤ {s['target']}× {'met' if met else '**missed**'}" if s["target"] else "—"
        lines.append(
            f"| {s['turns']} turns | {s['turn']['p50Ms']} / {s['turn']['p99Ms']} |"
            f" {s['recall']['p50Ms']} / {s['recall']['p99Ms']} | {s['turnP50OverRecallP50']}× |"
            f" {target} | {statements_words} |"
            f" {recall_words} | {s['compactionRuns']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
