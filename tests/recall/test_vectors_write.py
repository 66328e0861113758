"""The memories' vectors are written by one statement of the engine
(``recall.engine.vectors``), for the embedding job and the re-embed sweep alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall.engine.vectors import memory_vectors_write
from recall.models import MemoryRecord
from tests.recall import factories

ROOT = Path(__file__).resolve().parents[2]
VECTOR = [1.0] + [0.0] * 383


@pytest.fixture
def row(workspace_a):
    memory = factories.memory(workspace_a, "release summary")
    MemoryRecord.objects.filter(pk=memory.pk).update(embedding_model="old-model")
    return memory


class VectorsWriteTests:
    def test_it_writes_a_row_whose_content_is_the_one_embedded(self, row):
        written = memory_vectors_write(
            model="new-model", rows=[(row.pk, row.content)], vectors=[VECTOR]
        )

        row.refresh_from_db()
        assert written == 1
        assert row.embedding_model == "new-model"
        assert list(row.embedding) == VECTOR

    def test_it_leaves_a_row_edited_since_it_was_read(self, row):
        written = memory_vectors_write(
            model="new-model", rows=[(row.pk, "older text")], vectors=[VECTOR]
        )

        row.refresh_from_db()
        assert written == 0 and row.embedding_model == "old-model"

    def test_it_leaves_a_row_the_model_embedded_already(self, row):
        MemoryRecord.objects.filter(pk=row.pk).update(embedding_model="new-model")

        written = memory_vectors_write(
            model="new-model", rows=[(row.pk, row.content)], vectors=[VECTOR]
        )

        assert written == 0

    @pytest.mark.parametrize("module", ["recall/services.py", "maintenance/sweeps.py"])
    def test_no_other_module_writes_vectors_in_sql(self, module):
        assert "SET embedding" not in (ROOT / module).read_text()
