"""The queued path for real: a Redis server, Celery worker processes, the test database.

A sweep sent through the API completes in a worker; a worker killed with SIGKILL part-way
through an execute loses nothing and half-changes nothing, and the run completes once a
worker is back; two executes of one workspace at once: one runs, the other is refused.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from audit.models import AuditEvent, EventType
from maintenance.models import ArchiveChunk, MaintenanceItem, MaintenanceRun
from maintenance.services import lifecycle_settings_patch
from recall.models import MemoryRecord
from tests.helpers import error_of
from tests.maintenance.helpers import ago
from tests.recall import factories
from tests.worker_support import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def run_of(persona, run_id: int) -> dict[str, Any]:
    response = persona.api().get(f"/v1/maintenance/runs/{run_id}")
    assert response.status_code == 200, response.content
    return response.json()


def finished(persona, run_id: int, timeout: float = 60) -> dict[str, Any]:
    return wait_until(
        lambda: (body := run_of(persona, run_id))["status"] not in ("queued", "running") and body,
        timeout=timeout,
        what=f"run {run_id} to finish",
    )


def stale_memories(workspace, n: int) -> list[int]:
    rows = factories.memories(
        workspace, *[{"content": f"stale note {i}"} for i in range(n)], actor_id="user:ada"
    )
    ids = [row.pk for row in rows]
    MemoryRecord.objects.filter(pk__in=ids).update(
        lifecycle_status="stale", stale_since=ago(days=45)
    )
    return ids


class QueuedRunTests:
    def test_a_sweep_queued_through_the_api_completes_in_the_worker(
        self, operator, workspace_a, celery_workers
    ):
        expired = factories.memories(
            workspace_a, *[{"content": f"offer {i}"} for i in range(5)], expires_at=ago(hours=2)
        )
        celery_workers.start()
        response = operator.api().post("/v1/workspaces/team-a/maintenance/expiry?mode=preview")
        assert response.status_code == 202, response.content
        assert response.json()["status"] in ("queued", "running", "succeeded")
        preview = finished(operator, response.json()["id"])
        assert (preview["status"], preview["progress"]["total"]) == ("succeeded", 5)

        response = operator.api().post(
            f"/v1/workspaces/team-a/maintenance/expiry?mode=execute&preview={preview['id']}"
        )
        assert response.status_code == 202, response.content
        run = finished(operator, response.json()["id"])

        assert run["status"] == "succeeded"
        assert run["counts"] == {"listed": 5, "applied": 5, "skipped": 0}
        statuses = MemoryRecord.objects.filter(pk__in=[m.pk for m in expired])
        assert set(statuses.values_list("lifecycle_status", flat=True)) == {"expired"}
        assert AuditEvent.objects.get(pk=run["auditEventId"]).type == EventType.MAINTENANCE_EXECUTED

    def test_a_memory_written_with_a_broker_is_recalled_once_the_worker_embedded_it(
        self, editor, workload_a, celery_workers
    ):
        response = editor.api().post(
            "/v1/memory/actors/user:ada/memories",
            {"content": "Ada prefers release notes on Fridays", "memoryType": "preference",
             "sourceKind": "user", "consentPolicy": "explicit"},
            format="json",
        )  # fmt: skip
        assert response.status_code == 201, response.content
        assert response.json()["embeddingPending"] is True
        recall = {"workloadId": str(workload_a.id), "environment": "prod",
                  "query": "release notes", "topK": 3}  # fmt: skip

        before = editor.api().post("/v1/memory/actors/user:ada/recall", recall, format="json")
        assert before.json()["entries"] == []
        assert before.json()["diagnostics"]["reasons"]["embedding_pending"] == 1

        celery_workers.start()
        wait_until(
            lambda: MemoryRecord.objects.filter(embedding_model__gt="").exists(),
            timeout=30,
            what="the worker to embed the memory",
        )
        after = editor.api().post("/v1/memory/actors/user:ada/recall", recall, format="json")
        assert [e["content"] for e in after.json()["entries"]] == [
            "Ada prefers release notes on Fridays"
        ]


class CrashTests:
    def test_a_worker_killed_mid_execute_loses_nothing_and_the_run_completes_later(
        self, operator, workspace_a, celery_workers
    ):
        lifecycle_settings_patch(
            workspace=workspace_a, changes={"retentionMaxShare": 1.0}, author="system:test"
        )
        doomed = stale_memories(workspace_a, 400)
        kept = [m.pk for m in factories.memories(workspace_a, {"content": "kept"})]
        first = celery_workers.start()
        response = operator.api().post("/v1/workspaces/team-a/maintenance/retention?mode=execute")
        assert response.status_code == 202, response.content
        run_id = response.json()["id"]
        wait_until(
            lambda: 60 <= run_of(operator, run_id)["progress"]["done"] < 300,
            timeout=60,
            every=0.02,
            what="the run to be part-way",
        )

        first.kill()

        run = MaintenanceRun.objects.get(pk=run_id)
        assert run.status == "running"
        assert 0 < run.done < 400
        # Every row is before or after: deleted memories are exactly the applied items, and
        # each of them is in the archive; the others are untouched.
        applied = set(
            MaintenanceItem.objects.filter(run=run, outcome="applied").values_list(
                "memory_id", flat=True
            )
        )
        remaining = set(MemoryRecord.objects.filter(pk__in=doomed).values_list("pk", flat=True))
        assert applied == set(doomed) - remaining
        assert len(applied) == run.applied == run.done
        archived = {
            int(json.loads(line)["id"])
            for chunk in ArchiveChunk.objects.filter(run=run)
            for line in chunk.lines.splitlines()
        }
        assert archived == applied
        assert set(
            MemoryRecord.objects.filter(pk__in=remaining).values_list("lifecycle_status", flat=True)
        ) == {"stale"}
        assert not AuditEvent.objects.filter(type=EventType.MAINTENANCE_EXECUTED).exists()

        celery_workers.start()  # a worker coming back picks up the run its predecessor left
        done = finished(operator, run_id)

        assert done["status"] == "succeeded", done
        assert done["counts"] == {"listed": 400, "applied": 400, "skipped": 0}
        assert not MemoryRecord.objects.filter(pk__in=doomed).exists()
        assert MemoryRecord.objects.filter(pk__in=kept).count() == 1
        assert sum(c.count for c in ArchiveChunk.objects.filter(run_id=run_id)) == 400
        events = AuditEvent.objects.filter(type=EventType.MAINTENANCE_EXECUTED)
        assert events.count() == 1
        assert events.get().payload["counts"]["applied"] == 400


class ConcurrencyTests:
    def test_two_executes_of_one_workspace_at_once_one_runs_the_other_is_refused(
        self, operator, workspace_a, celery_workers
    ):
        stale_memories(workspace_a, 200)
        factories.memories(
            workspace_a, *[{"content": f"offer {i}"} for i in range(20)], expires_at=ago(hours=1)
        )
        lifecycle_settings_patch(
            workspace=workspace_a, changes={"retentionMaxShare": 1.0}, author="system:test"
        )
        celery_workers.start()
        results: dict[str, Any] = {}
        barrier = threading.Barrier(2)

        def post(sweep: str) -> None:
            from django.db import connection

            try:
                barrier.wait()
                results[sweep] = operator.api().post(
                    f"/v1/workspaces/team-a/maintenance/{sweep}?mode=execute"
                )
            finally:
                connection.close()

        threads = [threading.Thread(target=post, args=(s,)) for s in ("retention", "expiry")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        codes = sorted(r.status_code for r in results.values())
        assert codes == [202, 409], {s: r.content for s, r in results.items()}
        [winner] = [s for s, r in results.items() if r.status_code == 202]
        [loser] = [s for s, r in results.items() if r.status_code == 409]
        error = error_of(results[loser], 409, "MAINTENANCE_IN_PROGRESS")
        assert error["details"]["runId"] == results[winner].json()["id"]
        assert MaintenanceRun.objects.filter(mode="execute").count() == 1

        done = finished(operator, results[winner].json()["id"])
        assert done["status"] == "succeeded"
        again = operator.api().post(f"/v1/workspaces/team-a/maintenance/{loser}?mode=execute")
        assert again.status_code == 202  # once the first has finished, the next may run
        assert finished(operator, again.json()["id"])["status"] == "succeeded"
