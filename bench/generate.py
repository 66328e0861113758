"""Generate a realistic benchmark dataset and load it fast with binary COPY.

    python bench/generate.py --memories 100000 [--large-actor 100000] [--embedder cluster]

Each memory's vector comes from ``--embedder``: ``minilm-onnx`` (the default, the portal's
own: the memory's text embedded by all-MiniLM-L6-v2 on onnxruntime, ~2.5 ms a memory on one
core) or ``cluster`` (``bench/embedder.py``'s clustered stand-in, instant). The dataset's
record (``bench/data/<label>.json``) names it, and a dataset of another embedder is refused,
never reused (``bench.common.configure``).

Typical actors hold 20-1,000 memories each with varied labels; the optional large actor
holds ``--large-actor`` memories of which about 1.5% pass the ``large-selective`` workload's
policy (sensitivity ``public``). The HNSW and covering indexes are dropped for the load and
rebuilt after it, then the table is vacuumed so index-only scans work.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import DEFAULT_EMBEDDER, EMBEDDERS, configure  # noqa: E402

SEGMENTS = ["memory"] * 6 + ["retrieval"] * 2 + ["tool_result", "system_policy"]
LIFECYCLE = ["active"] * 17 + ["stale", "suppressed", "expired"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--large-actor", type=int, default=0)
    parser.add_argument("--label", default=None)
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default=DEFAULT_EMBEDDER)
    args = parser.parse_args()
    label = args.label or f"{args.memories // 1000}k"
    pgdata = configure(label, embedder=args.embedder)
    marker = pgdata.parent / f"{label}.json"
    if marker.exists():  # migrated by configure
        print(f"dataset {label} already loaded: {marker.read_text()}")
        return
    load(args.memories, args.large_actor, label, marker, args.embedder)


def load(total: int, large: int, label: str, marker: Path, embedder: str) -> None:
    from django.core.management import call_command

    from portal.db.roles import as_owner

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    # The load (COPY, indexes dropped and built, VACUUM) is the database owner's to do.
    with as_owner():
        _load_as_owner(total, large, label, marker, started, embedder)


def _load_as_owner(
    total: int, large: int, label: str, marker: Path, started: float, embedder_name: str
) -> None:
    import numpy as np
    from django.db import connection
    from django.utils import timezone
    from pgvector.psycopg import register_vector

    from bench.embedder import TOPICS, centres, noisy
    from policies import algebra, services
    from portal.models import Workspace
    from recall.models import Actor, MemoryRecord
    from recall.runtime import embedder

    Workspace.objects.filter(slug="bench").exists() and sys.exit("workspace bench exists")
    workspace = services.workspace_create(slug="bench", name="Benchmark", author="bench")
    services.workspace_policy_save(
        workspace=workspace,
        document={**algebra.default_floor(), "relaxableAxes": ["diagnosticsVerbosity"]},
        author="bench",
        comment="Bench floor",
    )
    typical = services.workload_create(workspace=workspace, name="typical", author="bench")
    selective = services.workload_create(
        workspace=workspace, name="large-selective", author="bench"
    )
    services.workload_policy_save(
        workload=selective,
        environment="prod",
        document={"sensitivityCeiling": "public"},
        author="bench",
    )

    rng = np.random.default_rng(42)
    sizes: list[int] = []
    remaining = total - large
    while remaining > 0:
        size = min(remaining, int(rng.integers(20, 1001)))
        sizes.append(size)
        remaining -= size
    actors = Actor.objects.bulk_create(
        [Actor(workspace=workspace, kind="user", name=f"u{i:06d}") for i in range(len(sizes))]
        + ([Actor(workspace=workspace, kind="user", name="large")] if large else [])
    )
    plan = list(zip(actors, sizes + ([large] if large else []), strict=True))
    print(f"{len(plan)} actors; loading {total} memories", flush=True)

    C = centres(384)
    model = embedder()  # the dataset's (configure set RECALL_EMBEDDER)
    embed_seconds = 0.0
    done = 0
    now = timezone.now()
    vocab = algebra.VOCABULARIES
    table = MemoryRecord._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS memory_embedding_hnsw")
        cursor.execute("DROP INDEX IF EXISTS memory_recall_cover_idx")
    raw = connection.connection
    register_vector(raw)
    columns = (
        "workspace_id, actor_id, content, memory_type, source_kind, confirmation_status,"
        " confidence, sensitivity, consent_policy, segment_kind, lifecycle_status, is_current,"
        " created_at, updated_at, hit_count, token_count, embedding, embedding_model"
    )
    types = ["int8", "int8", "text", "text", "text", "text", "float8", "text", "text", "text",
             "text", "bool", "timestamptz", "timestamptz", "int4", "int4", "vector", "text"]  # fmt: skip
    with (
        raw.cursor() as cur,
        cur.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(types)
        for actor, size in plan:
            is_large = actor.name == "large"
            topics = rng.integers(0, TOPICS, size)
            contents = [
                f"topic-{topics[i]} note {i} about the customer's preferences and plans"
                for i in range(size)
            ]
            # The clustered vectors are drawn as before (same seed, same dataset); the model
            # embeds the texts themselves.
            clustered = noisy(C[topics], rng)
            t0 = time.perf_counter()
            vectors = (
                clustered
                if embedder_name == "cluster"
                else np.array(model.embed(contents), dtype=np.float32)
            )
            embed_seconds += time.perf_counter() - t0
            if embedder_name != "cluster" and (done + size) // 10_000 > done // 10_000:
                print(f"  embedded {done + size:,} of {total:,} ({embed_seconds:.0f}s)", flush=True)
            done += size
            ages = rng.exponential(24 * 30, size)
            hits = rng.poisson(2, size)
            for i in range(size):
                if is_large:
                    sensitivity = "public" if rng.random() < 0.015 else "confidential"
                    lifecycle, consent = "active", "explicit"
                else:
                    sensitivity = vocab["sensitivity"][min(3, int(rng.exponential(0.8)))]
                    lifecycle = LIFECYCLE[int(rng.integers(0, len(LIFECYCLE)))]
                    consent = vocab["consentPolicy"][int(rng.integers(0, 6))]
                content = contents[i]
                created = now - timedelta(hours=float(ages[i]))
                copy.write_row(
                    (
                        workspace.pk, actor.pk, content,
                        vocab["memoryType"][int(rng.integers(0, 8))],
                        vocab["sourceKind"][int(rng.integers(0, 7))],
                        vocab["confirmationStatus"][int(rng.integers(0, 6))],
                        float(rng.uniform(0.2, 1.0)), sensitivity, consent,
                        SEGMENTS[int(rng.integers(0, len(SEGMENTS)))], lifecycle, True,
                        created, created, int(hits[i]), len(content) // 4 + 1,
                        vectors[i], model.model_name,
                    )
                )  # fmt: skip
    raw.commit() if not raw.autocommit else None
    loaded = time.perf_counter()
    print(f"copied in {loaded - started:.1f}s; building indexes", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '4GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        cursor.execute(
            f"CREATE INDEX memory_recall_cover_idx ON {table} (actor_id, id) INCLUDE"
            " (lifecycle_status, is_current, expires_at, consent_policy, memory_type,"
            " source_kind, confirmation_status, confidence, sensitivity, created_at, segment_kind,"
            " embedding_model, workspace_id)"
        )
        cursor.execute(
            f"CREATE INDEX memory_embedding_hnsw ON {table} USING hnsw"
            " (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
    connection.connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {table}")
    info = {
        "label": label,
        "memories": total,
        "actors": len(plan),
        "largeActor": large,
        "embedder": embedder_name,
        "embeddingModel": model.model_name,
        "embedSeconds": round(embed_seconds, 1),
        "typicalWorkload": str(typical.id),
        "selectiveWorkload": str(selective.id),
        "copySeconds": round(loaded - started, 1),
        "indexSeconds": round(time.perf_counter() - loaded, 1),
    }
    marker.write_text(json.dumps(info))
    print(json.dumps(info))


if __name__ == "__main__":
    main()
