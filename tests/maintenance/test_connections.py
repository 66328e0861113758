"""Promotion's connections: the matrix count agrees with pgvector's own distance, pair by
pair, on the real database; listing actor by actor gives the same run whatever the page."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from maintenance import services, sweeps
from maintenance.connections import (
    ConnectionCounter,
    count_similar,
    memory_connections,
    unit_rows,
)
from recall.models import MemoryRecord
from recall.runtime import embedder_model
from tests.maintenance.helpers import ago, memory

AUTHOR = "user:olga"


class CountSimilarTests:
    def test_a_pair_at_the_threshold_counts_and_one_below_does_not(self):
        # cosines with row 0: 1.0 (row 1), 0.8 (row 2), 0.79 (row 3)
        rows = unit_rows(
            np.array([[1, 0], [2, 0], [0.8, 0.6], [0.79, (1 - 0.79**2) ** 0.5]], dtype=np.float32)
        )
        counts = count_similar([10, 11, 12, 13], rows, [10], 0.8, 5)
        assert counts == {10: 2}

    def test_itself_never_counts_and_the_count_stops_at_the_cap(self):
        rows = unit_rows(np.ones((6, 3), dtype=np.float32))
        assert count_similar(list(range(6)), rows, [0, 5], 0.9, 3) == {0: 3, 5: 3}
        assert count_similar(list(range(6)), rows, [0], 0.9, 10) == {0: 5}

    def test_a_zero_vector_is_similar_to_nothing(self):
        rows = unit_rows(np.array([[0, 0], [1, 0], [1, 0]], dtype=np.float32))
        assert count_similar([1, 2, 3], rows, [1, 2], 0.5, 5) == {1: 0, 2: 1}

    def test_ids_that_are_not_among_the_rows_are_left_out(self):
        rows = unit_rows(np.ones((2, 2), dtype=np.float32))
        assert count_similar([1, 2], rows, [1, 99], 0.5, 5) == {1: 1}

    def test_chunks_give_the_same_counts(self, monkeypatch):
        rng = np.random.default_rng(7)
        rows = unit_rows(rng.normal(size=(50, 8)).astype(np.float32))
        whole = count_similar(list(range(50)), rows, list(range(50)), 0.3, 50)
        monkeypatch.setattr("maintenance.connections.CELLS_PER_CHUNK", 120)  # 2 rows a chunk
        assert count_similar(list(range(50)), rows, list(range(50)), 0.3, 50) == whole


def clustered(rng: np.random.Generator, n: int, dims: int = 384) -> np.ndarray:
    """Vectors around a few centres, some close and some far, so similarities spread over
    the threshold."""
    centres = rng.normal(size=(3, dims))
    picks = rng.integers(0, 3, size=n)
    noise = rng.normal(size=(n, dims)) * rng.uniform(0.1, 1.5, size=(n, 1))
    return centres[picks] + noise


def seed_vectors(workspace, actor: str, n: int, rng: np.random.Generator) -> list[int]:
    ids = []
    for i, vector in enumerate(clustered(rng, n)):
        pk = memory(workspace, f"{actor} memory {i}", actor_id=actor)
        MemoryRecord.objects.filter(pk=pk).update(embedding=vector.tolist())
        ids.append(pk)
    return ids


def pgvector_count(pk: int, similarity: float) -> int:
    """The oracle: pgvector's cosine distance to every other eligible memory of the actor."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM recall_memoryrecord o JOIN recall_memoryrecord c"
            " ON c.id = %s AND o.actor_id = c.actor_id AND o.id <> c.id"
            " WHERE o.is_current AND o.lifecycle_status = 'active'"
            " AND o.embedding_model = c.embedding_model"
            " AND 1 - (o.embedding <=> c.embedding) >= %s",
            [pk, similarity],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db
class ConnectionCounterTests:
    def test_it_agrees_with_pgvector_for_every_memory_of_every_actor(self, workspace_a):
        rng = np.random.default_rng(42)
        ada = seed_vectors(workspace_a, "user:ada", 40, rng)
        bob = seed_vectors(workspace_a, "user:bob", 25, rng)
        # not counted as connections: superseded, stale, embedded by another model
        MemoryRecord.objects.filter(pk=ada[0]).update(is_current=False)
        MemoryRecord.objects.filter(pk=ada[1]).update(lifecycle_status="stale")
        MemoryRecord.objects.filter(pk=bob[0]).update(embedding_model="another")
        actors = dict(MemoryRecord.objects.filter(pk__in=ada + bob).values_list("pk", "actor"))
        counter = ConnectionCounter(embedder_model(), 0.5, 1000)
        counted: dict[int, int] = {}
        for group in (ada, bob):
            counted.update(counter.counts(actors[group[0]], group))
        wanted = [pk for pk in ada[2:] + bob[1:]]
        spread = {pgvector_count(pk, 0.5) for pk in wanted}
        assert len(spread) > 5  # the data puts memories on both sides of the threshold
        for pk in wanted:
            expected = pgvector_count(pk, 0.5)
            assert counted[pk] == expected, pk
            assert memory_connections(pk, embedder_model(), 0.5, 1000) == expected
        # the ineligible ones are not compared at all
        assert ada[0] not in counted and ada[1] not in counted and bob[0] not in counted

    def test_another_actors_identical_memory_is_no_connection(self, workspace_a):
        text = "Ada prefers release notes as short bullet points every Friday"
        ada = memory(workspace_a, text)
        memory(workspace_a, text, actor_id="user:bob")
        actor = MemoryRecord.objects.get(pk=ada).actor_id
        assert ConnectionCounter(embedder_model(), 0.8, 5).counts(actor, [ada]) == {ada: 0}
        assert memory_connections(ada, embedder_model(), 0.8, 5) == 0


@pytest.mark.django_db
def test_promotion_lists_the_same_whatever_the_page_size(workspace_a, monkeypatch):
    """Listing goes actor by actor in pages; an actor split over two pages keeps its vectors
    and its connections."""
    rng = np.random.default_rng(3)
    for actor in ("user:ada", "user:bob", "user:cyd"):
        for pk in seed_vectors(workspace_a, actor, 12, rng):
            # short of 0.7 by connections alone: age 0.2 + access 0.3 + confidence 0.18
            MemoryRecord.objects.filter(pk=pk).update(
                created_at=ago(days=8), hit_count=5, confidence=0.9
            )
    settings = {"connectionSimilarity": 0.5}
    services.lifecycle_settings_patch(workspace=workspace_a, changes=settings, author=AUTHOR)

    def listing() -> dict[int, tuple[int, float]]:
        run = services.maintenance_start(
            workspace=workspace_a, sweep="promotion", mode="preview", author=AUTHOR
        )
        return {
            item.memory_id: (item.details["connections"], item.score) for item in run.items.all()
        }

    whole = listing()
    assert 0 < len(whole) < 36
    monkeypatch.setattr(sweeps, "PAGE", 5)
    assert listing() == whole
