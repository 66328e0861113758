"""Embedders turn text into fixed-size vectors (plain Python).

``HashingEmbedder`` is the default: deterministic, instant, no model download. It hashes word
unigrams and bigrams into signed buckets (the "hashing trick") and L2-normalises, so texts that
share words have a positive cosine similarity. It knows no synonyms: a semantic
embedder plugs in through the same ``Embedder`` protocol.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Protocol

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
