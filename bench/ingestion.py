"""The recall benchmark's ingestion: batch imports over HTTP with the portal's default
embedder, from one client and then two, against the server ``make serve`` runs
(``bench/servers.py``). Its memories are deleted afterwards, so the dataset stays the same."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

from bench.large_actor import BENCH_ROW
from bench.servers import PORT, server_stopped, start_server, summary

INGEST_ACTOR = "user:ingest-bench"
INGEST_BATCH = 500
INGEST_PORT = PORT + 1


def ingestion(pgdata: Path, token: str, *, batches: int) -> dict[str, Any]:
    """Batch import over HTTP with the portal's default embedder (no ``RECALL_EMBEDDER``),
    tasks eager as ``make run`` serves: ``POST /v1/memory/actors/{id}/memories`` with
    ``{"memories": [...]}`` of ``INGEST_BATCH`` memories, each batch one transaction with its
    audit event and its embeddings. ``batches`` from one client, then as many from
    ``INGEST_CLIENTS`` clients at once, each importing for an actor of its own (the server
    has two workers). The memories are deleted afterwards."""
    server = start_server(pgdata, portal_embedder=True, port=INGEST_PORT)
    try:
        # the first batch of each client warms a worker, untimed
        one = _ingest_phase(token, batches=batches, clients=1, phase="a")
        several = _ingest_phase(token, batches=batches, clients=INGEST_CLIENTS, phase="b")
    finally:
        server_stopped(server)
        ingested_removed()
    return {**one, f"concurrency{INGEST_CLIENTS}": several}


INGEST_CLIENTS = 2


def _ingest_phase(token: str, *, batches: int, clients: int, phase: str) -> dict[str, Any]:
    """``batches`` batches shared by ``clients`` clients (threads), each with its connection
    and its actor; the clock starts once every client's first (untimed) batch is answered."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    errors: list[int] = []
    first_errors: list[str] = []
    warmed = threading.Barrier(clients)
    lock = threading.Lock()
    started: list[float] = []

    def client(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", INGEST_PORT, timeout=120)
        mine = range(c, batches, clients)
        for n in [-1, *mine]:  # -1: the untimed first batch
            items = [
                {"content": f"{BENCH_ROW} ingest {phase}{c}/{n}-{i}: the customer prefers topic"
                 f" {i % 97} summaries in the morning, release {n * INGEST_BATCH + i}",
                 "memoryType": "preference", "sourceKind": "import"}
                for i in range(INGEST_BATCH)
            ]  # fmt: skip
            t0 = time.perf_counter()
            conn.request(
                "POST", f"/v1/memory/actors/{INGEST_ACTOR}-{c}/memories",
                json.dumps({"memories": items}), headers,
            )  # fmt: skip
            response = conn.getresponse()
            answer = response.read()
            elapsed = (time.perf_counter() - t0) * 1000
            with lock:
                if response.status != 201:
                    first_errors.append(f"{response.status}: {answer[:300]!r}")
                    if n >= 0:
                        errors.append(response.status)
                elif n >= 0:
                    latencies.append(elapsed)
            if n == -1:
                if warmed.wait() == 0:
                    started.append(time.perf_counter())
                warmed.wait()  # every client starts once the clock has

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started[0]
    if not latencies:
        raise SystemExit(f"every ingestion batch failed, the first with {first_errors[0]}")
    return {
        "batchSize": INGEST_BATCH,
        "batches": len(latencies),
        "clients": clients,
        "errors": len(errors),
        "embedder": "minilm-onnx, the portal's default",
        "perBatch": summary(latencies, seconds),
        "memoriesPerS": round(len(latencies) * INGEST_BATCH / seconds, 1),
    }


def ingested_removed() -> None:
    """The ingestion run's memories and actor, so the dataset is the same for the next run."""
    from django.db import connection

    kind, _, name = INGEST_ACTOR.partition(":")
    names = [f"{name}-{c}" for c in range(INGEST_CLIENTS)]
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM recall_memoryrecord WHERE actor_id IN"
            " (SELECT id FROM recall_actor WHERE kind = %s AND name = ANY(%s))",
            [kind, names],
        )
        cursor.execute("DELETE FROM recall_actor WHERE kind = %s AND name = ANY(%s)", [kind, names])
