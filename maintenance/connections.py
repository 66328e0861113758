"""Connections for the promotion sweep: per memory, how many of the actor's other current,
active memories (embedded by the same embedder) are at least ``connectionSimilarity``
similar to it (cosine).

Counting them in SQL compares every candidate with every other memory of its actor, one
pgvector distance per pair read from the heap: 150 s for the 20,000-memory actor of the
benchmark. Here each actor's vectors are read once, in PostgreSQL's binary format, and
compared as one matrix product (about a second for that actor). The sweep lists memories
actor by actor, so only one actor's vectors are held at a time (1.5 KB per memory for 384
dimensions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import psycopg
from django.db import connection
from psycopg.adapt import Loader
from psycopg.pq import Format

from recall.models import MemoryRecord

TABLE = MemoryRecord._meta.db_table
# Rows of the similarity matrix computed at once: bounds its memory to this many floats.
CELLS_PER_CHUNK = 4_000_000
# float32 rounding of a cosine: a pair within this of the threshold counts as at it.
TOLERANCE = 1e-6

OTHERS_SQL = f"""
SELECT m.id, m.embedding FROM {TABLE} m
WHERE m.actor_id = %s AND m.is_current AND m.lifecycle_status = 'active'
  AND m.embedding_model = %s
ORDER BY m.id
"""


class _VectorBytes(Loader):
    """pgvector's binary format as it comes: int16 dimensions, int16 unused, float4s (big
    endian)."""

    format = Format.BINARY

    def load(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(data)


def actor_vectors(actor_pk: int, model: str) -> tuple[list[int], np.ndarray]:
    """The ids and unit-length vectors (float32, one row each) of the actor's current,
    active memories embedded by ``model``."""
    connection.ensure_connection()
    raw = connection.connection
    with connection.cursor() as cursor:  # Django's cursors bind client-side: no binary rows
        cursor.execute("SELECT 'vector'::regtype::oid")
        (oid,) = cursor.fetchone()
    with psycopg.Cursor(raw) as cursor:
        cursor.adapters.register_loader(oid, _VectorBytes)
        cursor.execute(OTHERS_SQL, [actor_pk, model], binary=True)
        rows = cursor.fetchall()
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    ids = [int(pk) for pk, _ in rows]
    flat = np.frombuffer(b"".join(vector[4:] for _, vector in rows), dtype=">f4")
    return ids, unit_rows(flat.astype(np.float32).reshape(len(rows), -1))


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1; a zero row stays zero (similar to nothing)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def count_similar(
    ids: Sequence[int],
    vectors: np.ndarray,
    wanted: Sequence[int],
    similarity: float,
    cap: int,
) -> dict[int, int]:
    """For each wanted id (a row of ``vectors``), the number of other rows at least
    ``similarity`` similar to it, up to ``cap``. Rows are unit length, so the cosine is the
    dot product."""
    position = {pk: i for i, pk in enumerate(ids)}
    rows = [position[pk] for pk in wanted if pk in position]
    counts: dict[int, int] = {}
    step = max(1, CELLS_PER_CHUNK // max(1, len(ids)))
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        similar = vectors[chunk] @ vectors.T >= similarity - TOLERANCE
        similar[np.arange(len(chunk)), chunk] = False  # not itself
        for i, n in zip(chunk, similar.sum(axis=1).tolist(), strict=True):
            counts[ids[i]] = min(cap, int(n))
    return counts


class ConnectionCounter:
    """Counts connections for one actor after another, keeping the last actor's vectors."""

    def __init__(self, model: str, similarity: float, cap: int) -> None:
        self.model = model
        self.similarity = similarity
        self.cap = cap
        self._actor: int | None = None
        self._ids: list[int] = []
        self._vectors = np.zeros((0, 0), dtype=np.float32)

    def counts(self, actor_pk: int, wanted: Sequence[int]) -> dict[int, int]:
        if actor_pk != self._actor:
            self._actor = actor_pk
            self._ids, self._vectors = actor_vectors(actor_pk, self.model)
        return count_similar(self._ids, self._vectors, wanted, self.similarity, self.cap)


ONE_SQL = f"""
SELECT count(*) FROM (
    SELECT 1 FROM {TABLE} o JOIN {TABLE} c ON c.id = %(id)s
    WHERE o.actor_id = c.actor_id AND o.id <> c.id AND o.is_current
      AND o.lifecycle_status = 'active' AND o.embedding_model = %(model)s
      AND c.embedding_model = %(model)s
      AND (o.embedding <=> c.embedding) <= %(max_distance)s
    LIMIT %(cap)s
) linked
"""


def memory_connections(memory_pk: int, model: str, similarity: float, cap: int) -> int:
    """One memory's connections, as ``ConnectionCounter`` counts them, in one statement (one
    distance per other memory of the actor: right for a page, slow for a sweep)."""
    with connection.cursor() as cursor:
        cursor.execute(
            ONE_SQL,
            {"id": memory_pk, "model": model, "cap": cap,
             "max_distance": 1.0 - similarity + TOLERANCE},
        )  # fmt: skip
        (n,) = cursor.fetchone()
    return int(n)
