"""``POST /v1/memory/actors/{actorId}/recall`` refuses a recall without a query.

An empty query ranks nothing: every similarity would be 0.000 and the "recall" a shuffle, so
the API says so with a 400 naming the field instead of answering.
"""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEvent, EventType
from recall.models import MemoryRecord
from tests.recall import factories

RECALL = "/v1/memory/actors/user:ada/recall"


def body(workload: Any, **changes: Any) -> dict[str, Any]:
    return {"workloadId": str(workload.id), "environment": "prod", "query": "q", **changes}


class RecallQueryRequiredTests:
    @pytest.mark.parametrize("query", ["", " ", "\n\t  \n"])
    def test_an_empty_or_whitespace_query_is_a_400_naming_the_field(
        self, editor, workload_a, query
    ):
        factories.memory(editor.workspace, "Ada prefers concise release summaries")

        response = editor.api().post(RECALL, body(workload_a, query=query), format="json")

        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == "INVALID_REQUEST"
        assert list(error["details"]["fields"]) == ["query"]
        message = error["details"]["fields"]["query"]
        assert "Enter a query" in str(message) and "score every memory 0" in str(message)
        assert not AuditEvent.objects.filter(type=EventType.ASSEMBLED).exists()
        assert not MemoryRecord.objects.filter(hit_count__gt=0).exists()

    def test_a_query_with_words_around_spaces_still_runs(self, editor, workload_a):
        factories.memory(editor.workspace, "Ada prefers concise release summaries")

        response = editor.api().post(
            RECALL, body(workload_a, query="  release summaries  "), format="json"
        )

        assert response.status_code == 200, response.content
        assert len(response.json()["entries"]) == 1
