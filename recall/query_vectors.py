"""The query-vector cache: a recall's query embedded once per process (plain Python).

Agents ask the same questions again and again; embedding a query with a model costs a few
milliseconds, a look-up here a microsecond. The cache keeps the ``size`` vectors used last
(least recently used out first), keyed by the embedder's model name and the SHA-256 of the
query's exact text, so a vector is never served to another embedder and no query text is
kept (an erasure has none to reach here). It lives in the process's memory only (about 12 KB
a 384-dimensional vector) and counts its hits and misses for the benchmarks.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheStats:
    size: int
    entries: int
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "size": self.size,
            "entries": self.entries,
            "hits": self.hits,
            "misses": self.misses,
            "hitRate": round(self.hit_rate, 4),
        }


class QueryVectorCache:
    """A thread-safe LRU of query vectors; ``size`` 0 keeps nothing (every query embedded)."""

    def __init__(self, size: int):
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        self.size = size
        self._vectors: OrderedDict[tuple[str, bytes], tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def vector(
        self, model: str, text: str, embed: Callable[[str], Sequence[float]]
    ) -> tuple[float, ...]:
        """The vector of ``text`` by ``model``: the cached one, else ``embed(text)`` kept."""
        key = (model, hashlib.sha256(text.encode()).digest())
        with self._lock:
            found = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                self._hits += 1
                return found
            self._misses += 1
        # Outside the lock: another thread's look-up need not wait for this embedding (two
        # threads missing the same text at once both embed it, and store the same vector).
        vector = tuple(embed(text))
        if self.size:
            with self._lock:
                self._vectors[key] = vector
                self._vectors.move_to_end(key)
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        return vector

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self.size, len(self._vectors), self._hits, self._misses)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
            self._hits = 0
            self._misses = 0
