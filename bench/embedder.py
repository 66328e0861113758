"""A benchmark embedder whose vectors are clustered like real sentence embeddings.

Random uniform vectors in 384 dimensions are all nearly orthogonal, which makes every
approximate index look bad and every query look alike. Real embeddings cluster by topic; so
here every text names a topic (``topic-17 ...``) and is embedded near that topic's centre.
The same class makes the stored rows (vectorised, in ``generate.py``) and, plugged in as
``RECALL_EMBEDDER``, the endpoint's query vectors, so both come from one distribution.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

TOPICS = 512
NOISE = 0.35
_TOPIC = re.compile(r"topic-(\d+)")


def centres(dimensions: int) -> np.ndarray:
    rng = np.random.default_rng(1234)
    c = rng.standard_normal((TOPICS, dimensions)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def noisy(centre_rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_normal(centre_rows.shape).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    v = centre_rows + NOISE * noise * np.sqrt(centre_rows.shape[1]) / 8
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class ClusterEmbedder:
    def __init__(self, dimensions: int):
        self.dimensions = dimensions
        self.model_name = f"bench-cluster-{dimensions}"
        self._centres = centres(dimensions)

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            match = _TOPIC.search(text)
            topic = int(match.group(1)) % TOPICS if match else 0
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = noisy(self._centres[topic : topic + 1], np.random.default_rng(seed))[0]
            out.append(vector.tolist())
        return out
