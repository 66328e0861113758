"""``make run`` embeds again what another embedder embedded (console/reembed.py), with the
reembed sweep, printing its progress; ``run_portal`` calls it before serving."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from typing import Any

import pytest

from audit.models import AuditEvent, EventType
from console.reembed import memories_pending_by_workspace, memories_reembed
from maintenance.models import MaintenanceRun
from recall.models import MemoryRecord
from recall.runtime import embedder_model
from tests.maintenance.helpers import memory
from tests.portal.test_embedded_db import Run


# The sweep runs in a thread of its own, on its own connection: it must see committed rows.
@pytest.mark.django_db(transaction=True)
class ReembedOnStartTests:
    def test_it_embeds_again_every_workspace_s_memories_of_another_embedder(
        self, workspace_a, workspace_b, settings
    ):
        settings.MAINTENANCE_BATCH_SIZE = 2  # several batches, so progress shows
        settings.MAINTENANCE_BATCH_PAUSE_MS = 100  # and is seen between them
        old = [memory(workspace_a, f"note {n}", embedding_model="hashing-v1-384") for n in range(5)]
        other = memory(workspace_b, "waiting", embedding_model="", embedding=None)
        current = memory(workspace_a, "already embedded")
        lines: list[str] = []

        runs = memories_reembed(write=lines.append, every_seconds=0.02)

        assert [(r.workspace.slug, r.sweep, r.mode, r.status) for r in runs] == [
            ("team-a", "reembed", "execute", "succeeded"),
            ("team-b", "reembed", "execute", "succeeded"),
        ]
        assert [(r.total, r.applied) for r in runs] == [(5, 5), (1, 1)]
        models = dict(MemoryRecord.objects.values_list("pk", "embedding_model"))
        assert {models[pk] for pk in [*old, other, current]} == {embedder_model()}
        assert memories_pending_by_workspace() == {}
        model = embedder_model()
        assert lines[0] == (
            f"Embedding again with {model} (RECALL_EMBEDDER) the memories another embedder,"
            " or an earlier version of it, embedded: recall leaves out those it cannot compare"
            " until then."
        )
        assert lines[1:4] == ["  team-a: 5 memories", "    2 of 5", "    4 of 5"]
        assert re.fullmatch(
            r"  team-a: 5 embedded, 0 skipped, run \d+ succeeded in [\d.]+ s", lines[4]
        )
        assert lines[5] == "  team-b: 1 memory"
        assert re.fullmatch(
            r"  team-b: 1 embedded, 0 skipped, run \d+ succeeded in [\d.]+ s", lines[6]
        )
        assert len(lines) == 7
        events = AuditEvent.objects.filter(pk__in=[r.event_id for r in runs])
        assert {e.type for e in events} == {EventType.MAINTENANCE_EXECUTED}
        assert runs[0].author == "system:make-run"

    def test_it_does_nothing_when_every_memory_is_embedded(self, workspace_a):
        memory(workspace_a, "already embedded")
        lines: list[str] = []
        assert memories_reembed(write=lines.append) == []
        assert lines == []
        assert not MaintenanceRun.objects.exists()


class MakeRunReembedTests:
    def test_make_run_on_a_demo_database_of_another_embedder_embeds_it_again_first(
        self, tmp_path, server_tmp
    ):
        """A demo database loaded with the hashing embedder, then `make run` with the ONNX
        one: the run embeds its memories again, saying so, before it serves recalls."""
        pgdata = server_tmp / "pg"
        before = Run(pgdata, tmp_path / "hashing.log", demo=True, RECALL_EMBEDDER="hashing")
        before.process.send_signal(signal.SIGTERM)
        assert before.ended() == 0, before.output()

        run = Run(pgdata, tmp_path / "onnx.log", demo=True, RECALL_EMBEDDER="minilm-onnx")
        try:
            said = run.output()
            token = re.search(r"API token \(workspace acme, editor\): (\S+)", said)
            assert token, said
            answer = recall(run.port, token.group(1), "credit note stuck waiting for approval")
        finally:
            run.process.send_signal(signal.SIGTERM)
            run.ended()
        assert "Embedding again with all-MiniLM-L6-v2-onnx-int8-dynamic (RECALL_EMBEDDER)" in said
        assert re.search(r"  acme: (\d+) memories\n", said)
        assert re.search(r"  acme: (\d+) embedded, 0 skipped, run \d+ succeeded in ", said)
        assert "already loaded; nothing added" in said
        top = answer["entries"][0]
        assert top["content"].startswith("On ") and "credit note stuck" in top["content"]


def recall(port: int, token: str, query: str) -> dict[str, Any]:
    """The demo's support assistant's recall about Ada in staging, through the API."""
    base = f"http://127.0.0.1:{port}/v1"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    workloads = call("/workspaces/acme/workloads/")
    workload = next(w for w in workloads["results"] if w["name"] == "support-assistant")
    return call(
        "/memory/actors/user:ada/recall",
        {"workloadId": workload["id"], "environment": "staging", "query": query, "topK": 5},
    )
