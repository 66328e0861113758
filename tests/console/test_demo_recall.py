"""The demo's queries with the default embedder (all-MiniLM-L6-v2 on onnxruntime): each query
of ``console/demo/acme.yaml`` names the memory it is asked for, and the embedder must rank
that memory among its actor's first three; ``make run``'s sandbox answers with it."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from console.demo.memories import DemoQuery, demo_data
from policies.models import Workload
from recall import runtime
from recall.embedding import HashingEmbedder
from recall.embedding_onnx import MODEL_NAME, MiniLMOnnxEmbedder
from recall.models import MemoryRecord


def asked() -> list[tuple[str, str, DemoQuery]]:
    """Every (workload, actor, query) of the demo."""
    return [
        (workload, actor, query)
        for workload, by_actor in demo_data().queries.items()
        for actor, queries in by_actor.items()
        for query in queries
    ]


def ranks(embedder: MiniLMOnnxEmbedder | HashingEmbedder) -> dict[str, int]:
    """Each query's memory's rank among its actor's memories, by cosine similarity."""
    data = demo_data()
    out = {}
    for _, actor, query in asked():
        memories = data.memories(actor)
        texts = [m.text.replace("{date}", "14 March") for m in memories]
        vectors = np.array(embedder.embed(texts))
        [wanted] = data.found_by(actor, query)
        scores = vectors @ np.array(embedder.embed([query.text])[0])
        mine = scores[memories.index(wanted)]
        out[f"{actor}: {query.text}"] = int((scores >= mine).sum())
    return out


@pytest.fixture(scope="module")
def onnx() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(384)


@pytest.fixture
def onnx_configured(settings):
    settings.RECALL_EMBEDDER = "minilm-onnx"
    runtime.embedder.cache_clear()
    runtime.query_vector_cache.cache_clear()
    yield
    runtime.embedder.cache_clear()
    runtime.query_vector_cache.cache_clear()


class DemoQueryTests:
    def test_the_embedder_ranks_every_query_s_memory_among_the_first_three(self, onnx):
        found = ranks(onnx)
        assert len(found) == 66
        assert {query: rank for query, rank in found.items() if rank > 3} == {}
        assert sum(rank == 1 for rank in found.values()) >= 0.8 * len(found)

    def test_the_hashing_embedder_misses_some_of_them(self):
        found = ranks(HashingEmbedder(384))
        assert sum(rank > 3 for rank in found.values()) >= 5


@pytest.mark.django_db
class DemoSandboxTests:
    def test_a_sandbox_recall_for_ada_answers_with_the_memory_the_demo_wrote_for_it(
        self, onnx_configured, client
    ):
        call_command("load_demo", stdout=StringIO())
        assert set(MemoryRecord.objects.values_list("embedding_model", flat=True)) == {MODEL_NAME}
        client.force_login(get_user_model().objects.get(username="editor"))
        workload = Workload.objects.get(workspace__slug="acme", name="support-assistant")
        query = next(
            q
            for q in demo_data().queries["support-assistant"]["user:ada"]
            if q.text == "credit note stuck waiting for approval"
        )
        response = client.post(
            "/w/acme/sandbox/",
            {"workload": workload.pk, "environment": "staging", "actor": "user:ada",
             "query": query.text, "top_k": 5},
        )  # fmt: skip
        assert response.status_code == 200
        top = response.context["envelope"]["entries"][0]
        [wanted] = demo_data().found_by("user:ada", query)
        assert query.finds in top["content"] and top["content"].endswith(wanted.text[-40:])
        assert top["similarity"] > 0.5
