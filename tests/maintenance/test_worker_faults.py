"""Faults on the queued path, for real: a Redis server of the test's own, Celery worker
processes, the test database.

Redis restarted while a sweep executes and more tasks wait behind it: every task sent runs,
with its effect in the database once; the worker reconnects by itself; a sweep asked for
while Redis is down is refused with a 503 and recorded as failed, never left queued.

A worker killed with SIGKILL mid-execute: its message is delivered again (``acks_late``; with
Redis, once ``CELERY_VISIBILITY_TIMEOUT`` has passed) to the next worker, and processing the
run twice leaves the database as one run would: every memory deleted and archived once, one
``maintenance.executed`` event. A pool process killed under a living worker: the worker puts
the task back at once (``reject_on_worker_lost``) and runs it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from audit.models import AuditEvent, EventType
from maintenance.models import ArchiveChunk, MaintenanceItem, MaintenanceRun
from maintenance.services import lifecycle_settings_patch
from maintenance.tasks import run_process
from recall.models import MemoryRecord
from tests.helpers import error_of
from tests.maintenance.helpers import ago
from tests.maintenance.test_pages import client_for, flashes, url
from tests.maintenance.test_worker import finished, run_of, stale_memories
from tests.recall import factories
from tests.worker_support import RedisServer, sending_to, wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

VISIBILITY_TIMEOUT = 2  # seconds, for the workers of the tests that need a redelivery


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis for this test alone, persistent as in production, free to be restarted."""
    server = RedisServer(persistent=True)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def celery_broker(own_redis: RedisServer) -> Iterator[str]:
    """Overrides the shared one: this module's test process and workers use ``own_redis``."""
    with sending_to(own_redis.url):
        yield own_redis.url


def write_memory(persona: Any, content: str) -> Any:
    """A memory for user:ada through the API, as an agent writes one."""
    return persona.api().post(
        "/v1/memory/actors/user:ada/memories",
        {"content": content, "memoryType": "preference", "sourceKind": "user",
         "consentPolicy": "explicit"},
        format="json",
    )  # fmt: skip


def unacknowledged(broker: RedisServer) -> list[tuple[str, str]]:
    """The tasks Redis holds as delivered but not acknowledged: (name, args) of each."""
    import redis

    client = redis.Redis.from_url(broker.url)
    held = []
    for raw in client.hvals("unacked"):  # kombu's Redis transport keeps them there
        message = json.loads(raw)[0]
        held.append((message["headers"]["task"], message["headers"]["argsrepr"]))
    return held


def waiting(broker: RedisServer) -> int:
    """How many tasks wait in the queue for a worker."""
    import redis

    return int(redis.Redis.from_url(broker.url).llen("celery"))


def drained(broker: RedisServer) -> bool:
    """Every task sent has been taken and acknowledged: nothing waits, nothing is held."""
    import redis

    return waiting(broker) == 0 and redis.Redis.from_url(broker.url).hlen("unacked") == 0


def retention_execute(operator, workspace, n: int) -> tuple[list[int], int]:
    """``n`` stale memories and a retention execute of them sent through the API."""
    lifecycle_settings_patch(
        workspace=workspace, changes={"retentionMaxShare": 1.0}, author="system:test"
    )
    doomed = stale_memories(workspace, n)
    response = operator.api().post("/v1/workspaces/team-a/maintenance/retention?mode=execute")
    assert response.status_code == 202, response.content
    return doomed, response.json()["id"]


def part_way(operator, run_id: int, low: int, high: int) -> None:
    wait_until(
        lambda: low <= run_of(operator, run_id)["progress"]["done"] < high,
        timeout=45,
        every=0.02,
        what=f"run {run_id} to be part-way",
    )


def assert_executed_once(run_id: int, doomed: list[int]) -> None:
    """The database as one retention run over ``doomed`` leaves it, however many
    deliveries it took."""
    run = MaintenanceRun.objects.get(pk=run_id)
    assert (run.status, run.total, run.done, run.applied, run.skipped) == (
        "succeeded", len(doomed), len(doomed), len(doomed), 0
    )  # fmt: skip
    assert not MemoryRecord.objects.filter(pk__in=doomed).exists()
    items = MaintenanceItem.objects.filter(run=run)
    assert items.count() == len(doomed)
    assert set(items.values_list("outcome", flat=True)) == {"applied"}
    archived = [
        int(json.loads(line)["id"])
        for chunk in ArchiveChunk.objects.filter(run=run)
        for line in chunk.lines.splitlines()
    ]
    assert sorted(archived) == sorted(doomed)  # each memory archived once, none twice
    events = AuditEvent.objects.filter(type=EventType.MAINTENANCE_EXECUTED)
    assert events.count() == 1
    event = events.get()
    assert event.pk == run.event_id
    assert event.payload["runId"] == run_id
    assert event.payload["counts"] == {"listed": len(doomed), "applied": len(doomed), "skipped": 0}


class RedisRestartTests:
    @pytest.mark.worker_env(CELERY_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT))
    def test_tasks_sent_before_a_redis_restart_all_run_once_and_the_worker_reconnects(
        self, operator, editor, workspace_a, own_redis, celery_workers
    ):
        factories.memories(
            workspace_a, *[{"content": f"offer {i}"} for i in range(5)], expires_at=ago(hours=2)
        )
        worker = celery_workers.start()
        doomed, execute_id = retention_execute(operator, workspace_a, 300)
        # Behind the execute (one task at a time): they wait in Redis through its restart.
        previews = []
        for sweep in ("expiry", "decay", "promotion"):
            response = operator.api().post(f"/v1/workspaces/team-a/maintenance/{sweep}")
            assert response.status_code == 202, response.content
            previews.append(response.json()["id"])
        written = write_memory(editor, "Ada reads the changelog first")
        assert written.status_code == 201, written.content
        part_way(operator, execute_id, 30, 250)
        assert waiting(own_redis) >= 4  # the three previews and the embedding, in Redis

        own_redis.stop()
        refused = operator.api().post("/v1/workspaces/team-a/maintenance/dedup")
        time.sleep(1)
        own_redis.start()

        error = error_of(refused, 503, "QUEUE_UNAVAILABLE")
        unsent = error["details"]["runId"]
        for run_id in (execute_id, *previews):
            assert finished(operator, run_id, timeout=40)["status"] == "succeeded"
        wait_until(
            lambda: MemoryRecord.objects.filter(
                pk=written.json()["id"], embedding_model__gt=""
            ).exists(),
            timeout=20,
            what="the worker to embed the memory written before the restart",
        )
        # The same worker process, back on the restarted server: it takes a new task too.
        assert worker.process.poll() is None
        assert "Connection to broker lost" in worker.log()
        after = operator.api().post("/v1/workspaces/team-a/maintenance/dedup")
        assert after.status_code == 202, after.content
        assert finished(operator, after.json()["id"], timeout=30)["status"] == "succeeded"

        # Each run's effect once: the execute as one run, one event per run.
        assert_executed_once(execute_id, doomed)
        for run_id in (*previews, after.json()["id"]):
            assert (
                AuditEvent.objects.filter(
                    type=EventType.MAINTENANCE_PREVIEWED, payload__runId=run_id
                ).count()
                == 1
            )
        # The refused one never ran, now or later: failed, nothing listed, one event.
        time.sleep(VISIBILITY_TIMEOUT + 1)
        run = MaintenanceRun.objects.get(pk=unsent)
        assert (run.status, run.error_code, run.listed_at) == ("failed", "QUEUE_UNAVAILABLE", None)
        assert not MaintenanceItem.objects.filter(run=run).exists()
        assert AuditEvent.objects.filter(payload__runId=unsent).count() == 1
        assert drained(own_redis)


class BrokerDownTests:
    def test_a_sweep_asked_for_while_redis_is_down_is_refused_and_recorded_failed(
        self, operator, workspace_a, own_redis, celery_broker
    ):
        factories.memories(workspace_a, {"content": "offer"}, expires_at=ago(hours=2))
        own_redis.stop()
        started = time.monotonic()
        response = operator.api().post("/v1/workspaces/team-a/maintenance/expiry?mode=execute")
        assert time.monotonic() - started < 10  # refused promptly, not hung

        error = error_of(response, 503, "QUEUE_UNAVAILABLE")
        assert response["Retry-After"] == "5"
        assert "not started" in error["message"]
        run = MaintenanceRun.objects.get(pk=error["details"]["runId"])
        assert (run.status, run.error_code) == ("failed", "QUEUE_UNAVAILABLE")
        assert set(MemoryRecord.objects.values_list("lifecycle_status", flat=True)) == {"active"}
        # It does not hold the workspace: once Redis is back, the next execute is accepted.
        own_redis.start()
        again = operator.api().post("/v1/workspaces/team-a/maintenance/expiry?mode=execute")
        assert again.status_code == 202, again.content

    def test_a_memory_written_while_redis_is_down_is_saved_once_and_embedded_later(
        self, editor, operator, workspace_a, own_redis, celery_broker, celery_workers
    ):
        """Saved is saved: a 201 (a 503 would make a client retry and save it twice), the
        memory left pending, and the reembed sweep embeds it once the queue is back."""
        own_redis.stop()
        response = write_memory(editor, "Ada prefers release notes on Fridays")

        assert response.status_code == 201, response.content
        assert response.json()["embeddingPending"] is True
        [memory] = MemoryRecord.objects.all()
        assert memory.embedding_model == ""
        own_redis.start()
        celery_workers.start()
        sweep = operator.api().post("/v1/workspaces/team-a/maintenance/reembed?mode=execute")
        assert sweep.status_code == 202, sweep.content
        wait_until(
            lambda: MemoryRecord.objects.filter(pk=memory.pk, embedding_model__gt="").exists(),
            timeout=60,
            what="the reembed sweep to embed the pending memory",
        )
        assert MemoryRecord.objects.count() == 1

    def test_the_page_says_the_queue_is_down_instead_of_failing(
        self, operator, workspace_a, own_redis, celery_broker
    ):
        own_redis.stop()
        response = client_for(operator).post(url("start", "expiry"))
        assert response.status_code == 302
        assert response["Location"] == url("index")
        [message] = flashes(response)
        assert "task queue is not reachable" in message
        assert MaintenanceRun.objects.get().status == "failed"


class KilledWorkerTests:
    @pytest.mark.worker_env(CELERY_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT))
    def test_a_killed_workers_task_is_delivered_again_and_runs_as_if_once(
        self, operator, workspace_a, own_redis, celery_workers
    ):
        kept = factories.memories(workspace_a, {"content": "kept"})[0].pk
        first = celery_workers.start()
        doomed, run_id = retention_execute(operator, workspace_a, 400)
        part_way(operator, run_id, 60, 300)
        taken = time.monotonic()  # the worker took the message before this

        first.kill()

        assert MaintenanceRun.objects.get(pk=run_id).status == "running"
        # The message was taken but never acknowledged: Redis still holds it.
        assert unacknowledged(own_redis) == [("maintenance.run", f"({run_id},)")]
        # Once the visibility timeout has passed, it is handed out again: to the next worker,
        # which looks when it connects (then only every 100 s, hence the wait). That worker
        # also sends lost runs again when it starts: the run may be delivered more than once.
        time.sleep(max(0.0, taken + VISIBILITY_TIMEOUT + 0.5 - time.monotonic()))
        celery_workers.start()
        assert finished(operator, run_id)["status"] == "succeeded"
        wait_until(
            lambda: drained(own_redis),
            timeout=30,
            what="the killed worker's message to be delivered again and acknowledged",
        )
        assert_executed_once(run_id, doomed)
        assert MemoryRecord.objects.filter(pk=kept).exists()

        # A delivery after the end (an acknowledgement lost with its connection) finds the
        # run finished and changes nothing.
        ended = MaintenanceRun.objects.get(pk=run_id).finished_at
        run_process.delay(run_id)
        wait_until(lambda: drained(own_redis), timeout=30, what="the late delivery to be taken")
        assert_executed_once(run_id, doomed)
        assert MaintenanceRun.objects.get(pk=run_id).finished_at == ended

    def test_a_pool_process_killed_mid_task_is_put_back_and_run_again_by_its_worker(
        self, operator, workspace_a, own_redis, celery_workers
    ):
        worker = celery_workers.start()
        doomed, run_id = retention_execute(operator, workspace_a, 400)
        part_way(operator, run_id, 60, 300)

        assert worker.kill_pool()

        # No worker starts (nothing looks for lost runs), and the visibility timeout is an
        # hour: only the worker putting the task back brings the run to its end.
        assert finished(operator, run_id, timeout=40)["status"] == "succeeded"
        assert worker.process.poll() is None
        assert "WorkerLostError" in worker.log()
        wait_until(lambda: drained(own_redis), timeout=10, what="the task to be acknowledged")
        assert_executed_once(run_id, doomed)
