"""The query-vector cache (recall/query_vectors.py) and its use by recall."""

from __future__ import annotations

import threading

import pytest

from recall import runtime
from recall.query_vectors import QueryVectorCache


class Counting:
    """An embedding function that says how often it was called."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> list[float]:
        self.calls.append(text)
        return [float(len(text)), 1.0]


class QueryVectorCacheTests:
    def test_a_repeated_query_is_embedded_once(self) -> None:
        cache, embed = QueryVectorCache(8), Counting()
        first = cache.vector("m", "refund reply", embed)
        again = cache.vector("m", "refund reply", embed)
        assert first == again == (12.0, 1.0)
        assert embed.calls == ["refund reply"]
        stats = cache.stats()
        assert (stats.hits, stats.misses, stats.entries, stats.hit_rate) == (1, 1, 1, 0.5)

    def test_another_embedder_never_gets_the_vector(self) -> None:
        cache, embed = QueryVectorCache(8), Counting()
        cache.vector("hashing-v2-384", "same text", embed)
        cache.vector("all-MiniLM-L6-v2-onnx-int8-dynamic", "same text", embed)
        assert embed.calls == ["same text", "same text"]

    def test_the_text_is_the_key_exactly(self) -> None:
        cache, embed = QueryVectorCache(8), Counting()
        for text in ("Refund", "refund", "refund "):
            cache.vector("m", text, embed)
        assert embed.calls == ["Refund", "refund", "refund "]

    def test_it_keeps_no_query_text(self) -> None:
        cache = QueryVectorCache(8)
        cache.vector("m", "what is Priya's first project", Counting())

        assert "Priya" not in repr(cache.__dict__)

    def test_the_least_recently_used_vector_goes_first(self) -> None:
        cache, embed = QueryVectorCache(2), Counting()
        cache.vector("m", "a", embed)
        cache.vector("m", "b", embed)
        cache.vector("m", "a", embed)  # a is now the most recent
        cache.vector("m", "c", embed)  # b goes
        cache.vector("m", "a", embed)
        cache.vector("m", "b", embed)
        assert embed.calls == ["a", "b", "c", "b"]
        assert cache.stats().entries == 2

    def test_size_zero_keeps_nothing(self) -> None:
        cache, embed = QueryVectorCache(0), Counting()
        cache.vector("m", "a", embed)
        cache.vector("m", "a", embed)
        assert embed.calls == ["a", "a"]
        assert cache.stats().as_dict() == {
            "size": 0, "entries": 0, "hits": 0, "misses": 2, "hitRate": 0.0,
        }  # fmt: skip

    def test_a_negative_size_is_refused(self) -> None:
        with pytest.raises(ValueError, match="size must be >= 0, got -1"):
            QueryVectorCache(-1)

    def test_clear_forgets_vectors_and_counts(self) -> None:
        cache, embed = QueryVectorCache(4), Counting()
        cache.vector("m", "a", embed)
        cache.vector("m", "a", embed)
        cache.clear()
        assert cache.stats().as_dict()["hits"] == cache.stats().entries == 0
        cache.vector("m", "a", embed)
        assert embed.calls == ["a", "a"]

    def test_threads_share_it_without_losing_count_or_bound(self) -> None:
        cache, embed = QueryVectorCache(16), Counting()

        def ask() -> None:
            for n in range(200):
                cache.vector("m", f"q{n % 24}", embed)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = cache.stats()
        assert stats.hits + stats.misses == 800
        assert stats.misses == len(embed.calls)
        assert stats.entries == 16


@pytest.mark.django_db
class RecallQueryCacheTests:
    @pytest.fixture(autouse=True)
    def fresh_cache(self, settings):
        settings.RECALL_QUERY_CACHE_SIZE = 4
        runtime.query_vector_cache.cache_clear()
        yield
        runtime.query_vector_cache.cache_clear()

    def test_a_repeated_recall_query_is_embedded_once_per_process(self, editor, workload_a):
        from tests.recall import factories

        factories.memories(editor.workspace, {"content": "Ada wants refunds answered in English."})
        body = {"workloadId": str(workload_a.id), "environment": "prod", "topK": 3,
                "query": "how should I word a refund reply to Ada"}  # fmt: skip
        first = editor.api().post("/v1/memory/actors/user:ada/recall", body, format="json")
        again = editor.api().post("/v1/memory/actors/user:ada/recall", body, format="json")
        assert first.status_code == again.status_code == 200
        assert [e["id"] for e in first.json()["entries"]] == [
            e["id"] for e in again.json()["entries"]
        ]
        stats = runtime.query_vector_cache().stats()
        assert (stats.size, stats.hits, stats.misses) == (4, 1, 1)
