"""Vectors of an earlier version of the configured embedder stay recallable until re-embedded.

An embedder may name earlier versions of itself whose vectors a query's may be compared with
(``compatible_models``: the ONNX embedder names the fp32 products' vectors of the same file).
Their memories are recalled as the embedder's own, and the ``reembed`` sweep still embeds
them again; any other embedder's vectors wait for it (``embedding_pending``). Here the
"earlier version" is the hashing embedder itself under its own name, renamed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from maintenance import services as maintenance
from recall import runtime
from recall.embedding import HashingEmbedder
from recall.embedding_onnx import COMPATIBLE_MODELS, MiniLMOnnxEmbedder
from recall.models import MemoryRecord
from tests.helpers import recall_body
from tests.recall import factories

RECALL = "/v1/memory/actors/user:ada/recall"


class Renamed(HashingEmbedder):
    """The hashing embedder under a new name, declaring the old one's vectors comparable."""

    def __init__(self, dimensions: int):
        super().__init__(dimensions)
        self.compatible_models = (self.model_name,)
        self.model_name = f"{self.model_name}-renamed"


@pytest.fixture
def memories(editor: Any) -> dict[str, MemoryRecord]:
    """Three memories embedded by the hashing embedder, one of them then marked as another
    embedder's; then the embedder configured is ``Renamed``."""
    made = factories.memories(
        editor.workspace,
        {"content": "Ada wants refunds answered in English."},
        {"content": "Ada prefers refunds by bank transfer."},
        {"content": "Ada asked about refunds for a late order."},
    )
    MemoryRecord.objects.filter(pk=made[2].pk).update(embedding_model="some-other-model")
    return {"old": made[0], "old too": made[1], "other": made[2]}


@pytest.fixture(autouse=True)
def embedder_built_again(settings: Any) -> Iterator[None]:
    """The process's embedder and query cache built again after the test (it renames)."""
    yield
    runtime.embedder.cache_clear()
    runtime.query_vector_cache.cache_clear()


def rename(settings: Any) -> None:
    settings.RECALL_EMBEDDER = f"{__name__}.Renamed"
    runtime.embedder.cache_clear()
    runtime.query_vector_cache.cache_clear()


@pytest.mark.django_db
class CompatibleModelsTests:
    def test_an_earlier_versions_vectors_are_recalled_and_anothers_wait(
        self, editor, workload_a, memories, settings
    ):
        rename(settings)
        body = recall_body(workload_a, query="refunds for Ada", topK=5)
        envelope = editor.api().post(RECALL, body, format="json").json()

        entries = {e["id"] for e in envelope["entries"]}
        assert entries == {str(memories["old"].pk), str(memories["old too"].pk)}, envelope
        assert envelope["diagnostics"]["reasons"]["embedding_pending"] == 1, envelope

    def test_the_api_says_which_memories_wait(self, editor, memories, settings):
        rename(settings)
        listed = editor.api().get("/v1/memory/actors/user:ada/memories").json()["results"]
        pending = {m["id"]: m["embeddingPending"] for m in listed}
        assert pending == {
            str(memories["old"].pk): False,
            str(memories["old too"].pk): False,
            str(memories["other"].pk): True,
        }

    def test_the_reembed_sweep_still_embeds_them_again(self, editor, memories, settings):
        rename(settings)
        run = maintenance.maintenance_start(
            workspace=editor.workspace, sweep="reembed", mode="preview", author="user:olga"
        )
        assert run.status == "succeeded", run.error
        assert set(run.items.values_list("memory_id", flat=True)) == {
            m.pk for m in memories.values()
        }

    def test_without_a_compatible_version_every_earlier_vector_waits(
        self, editor, workload_a, memories, settings
    ):
        settings.RECALL_EMBEDDER = "recall.embedding.HashingEmbedder"
        runtime.embedder.cache_clear()
        MemoryRecord.objects.filter(pk=memories["old"].pk).update(embedding_model="hashing-v1")
        body = recall_body(workload_a, query="refunds for Ada", topK=5)
        envelope = editor.api().post(RECALL, body, format="json").json()
        assert {e["id"] for e in envelope["entries"]} == {str(memories["old too"].pk)}

    def test_the_onnx_embedder_compares_the_fp32_products_vectors_of_its_file(self, tmp_path):
        onnx = MiniLMOnnxEmbedder(384, model_path=tmp_path / "not-loaded.onnx")
        assert onnx.compatible_models == COMPATIBLE_MODELS == ("all-MiniLM-L6-v2-onnx-int8",)
