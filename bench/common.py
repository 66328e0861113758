"""Shared set-up for the benchmarks: one embedded PostgreSQL per dataset size."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
# Every run writes its results to RESULTS, which git ignores (its own .gitignore), so a run
# changes no tracked file. bench/update_docs.py (`make bench-docs`, or `UPDATE_DOCS=1`)
# publishes them to PUBLISHED, the tracked copies the docs cite, and rewrites the docs' tables.
PUBLISHED = ROOT / "bench" / "results"
RESULTS = PUBLISHED / "latest"
SHARED_BUFFERS = "6GB"

# The embedders a dataset can be generated with (``generate.py --embedder``), as
# RECALL_EMBEDDER names them: the portal's default, all-MiniLM-L6-v2 on onnxruntime, or the
# clustered stand-in (``bench/embedder.py``) the datasets were made with before it. A dataset
# records its embedder (``embedder`` in ``bench/data/<label>.json``; a record without one is
# a clustered dataset) and every benchmark on it embeds its queries with the same one.
EMBEDDERS = {"minilm-onnx": "minilm-onnx", "cluster": "bench.embedder.ClusterEmbedder"}
DEFAULT_EMBEDDER = "minilm-onnx"


def dataset_embedder(info: dict[str, object]) -> str:
    """The embedder a dataset's record names (``cluster`` for a record older than the key)."""
    return str(info.get("embedder", "cluster"))


def configure(size_label: str, *, embedder: str | None = None) -> Path:
    """Point Django at this dataset's own embedded server and the embedder its rows were
    embedded with: the one its record names, else ``embedder`` (a dataset about to be
    generated), else the default. A dataset generated with another embedder than
    ``embedder`` is refused, never reused; an existing one is migrated to the checkout's
    schema."""
    DATA.mkdir(parents=True, exist_ok=True)
    pgdata = DATA / f"pg-{size_label}"
    marker = DATA / f"{size_label}.json"
    record = json.loads(marker.read_text()) if marker.exists() else None
    recorded = dataset_embedder(record) if record is not None else None
    if recorded is not None and embedder is not None and recorded != embedder:
        raise SystemExit(
            f"Dataset {size_label} ({marker.relative_to(ROOT)}) was embedded with {recorded},"
            f" not {embedder}: remove {pgdata.relative_to(ROOT)} and {marker.name} to generate"
            f" it again, or give the run another label (BENCH_LABEL)."
        )
    chosen = recorded or embedder or DEFAULT_EMBEDDER
    os.environ["EMBEDDED_PGDATA"] = str(pgdata)
    os.environ["BENCH_EMBEDDER"] = chosen
    os.environ["RECALL_EMBEDDER"] = EMBEDDERS[chosen]
    # Room for the table, the covering index and the HNSW graph of the 1M dataset (~5 GB) on
    # this 24 GB machine; without it every recall reads its vectors from the OS page cache.
    os.environ.setdefault("EMBEDDED_PG_SHARED_BUFFERS", SHARED_BUFFERS)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    # The throttle still counts every call (its cost is measured), but never refuses one.
    os.environ.setdefault("API_RATE_PER_MINUTE", "100000000")
    os.environ.setdefault("RECALL_RATE_PER_MINUTE", "100000000")
    os.environ.pop("DATABASE_URL", None)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    # The benchmark drives the system as a command does: its own queries see every workspace
    # (row-level security, portal/db/scope.py); the endpoint's calls are scoped by their token.
    from portal.db.scope import scope_all_by_default

    scope_all_by_default()
    if record is not None:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)  # the checkout's schema may have moved since
    model = record.get("embeddingModel") if record is not None else None
    if model is not None:
        from recall.runtime import embedder_model

        if model != embedder_model():
            raise SystemExit(
                f"Dataset {size_label} ({marker.relative_to(ROOT)}) holds vectors of {model},"
                f" and {chosen} now embeds as {embedder_model()}: remove"
                f" {pgdata.relative_to(ROOT)} and {marker.name} to generate it again."
            )
    return pgdata


def interpreter() -> dict[str, object]:
    """Which Python build ran the benchmark. It matters: the recall's Python side costs 13-16%
    less on Debian's python3.11 (an optimised build, libpython linked into the executable) than
    on a default source build such as pyenv's (libpython a shared library), all else equal."""
    with open("/proc/self/maps") as maps:
        shared = any("libpython" in line for line in maps)
    return {
        "python": platform.python_version(),
        "executable": os.path.realpath(sys.executable),
        "compiler": platform.python_compiler(),
        "sharedLibpython": shared,
    }
