"""Compaction on the queued path for real: a Redis server, Celery worker processes, the test
database, and (for the ``openai`` summarizer) a chat-completions server of the test's own.

A session driven over HTTP to warning severity gets a run that executes in a worker: the
summary memory exists, enters the next turn's prompt, and ``targetMet`` is honest. The next
turn waits for a run in flight up to its bound, then goes on and says so. A worker killed
mid-run: the run is delivered again and done once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings as django_settings

from audit.models import AuditEvent, EventType
from chat.models import CompactionRun, Turn
from recall.models import MemoryRecord
from tests.chat.compaction_support import ANSWER, QUESTION
from tests.chat.completions_server import KEY, KEY_ENV, completions_server
from tests.chat.helpers import layout, roomy_floor, started, turn
from tests.worker_support import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

COMPACTING = {
    "context_window": 1000,
    "output_buffer": 0,
    "compaction": {
        "enabled": True,
        "cooldown_turns": 1,
        "min_turns_to_summarize": 2,
        "max_turns_per_summary": 4,
        "compaction_recency_window": 2,
    },
}


def run_of(persona: Any, run_id: str) -> dict[str, Any]:
    response = persona.api().get(f"/v1/compaction/runs/{run_id}")
    assert response.status_code == 200, response.content
    return response.json()


def finished(persona: Any, run_id: str, timeout: float = 60) -> dict[str, Any]:
    return wait_until(
        lambda: (body := run_of(persona, run_id))["status"] not in ("queued", "running") and body,
        timeout=timeout,
        what=f"compaction run {run_id} to finish",
    )


def talk_until_compaction(persona: Any, session_id: str, most: int = 12) -> dict[str, Any]:
    """Exchanges over HTTP until one's monitor asks for a run: that answer."""
    for _ in range(most):
        answer = turn(persona, session_id, ("assistant", ANSWER), ("user", QUESTION))
        if answer["compaction"]["compact"]:
            return answer
    raise AssertionError(f"No compaction asked for after {most} exchanges.")


class QueuedCompactionTests:
    def test_a_session_at_warning_is_compacted_in_a_worker_and_its_summary_is_used(
        self, editor, workload_a, celery_workers
    ):
        roomy_floor(editor.workspace)
        layout(workload_a, COMPACTING)
        worker = celery_workers.start()
        session = started(editor, workload_a)

        asked = talk_until_compaction(editor, session["id"])

        decision = asked["compaction"]
        assert (decision["code"], decision["severity"]) == ("severity", "warning")
        assert asked["budgetStatus"]["utilizationPct"] > 85
        run = finished(editor, decision["runId"])
        assert run["status"] == "succeeded", run
        assert "chat.compaction_run" in worker.log()
        assert run["turnsSummarised"] == [1, 2, 3, 4, 5, 6, 7, 8]
        summaries = run["summaryMemoryIds"]
        assert len(summaries) == 2
        rows = MemoryRecord.objects.filter(pk__in=summaries)
        assert set(rows.values_list("memory_type", "source_kind", "confirmation_status")) == {
            ("summary", "system", "inferred")
        }
        wait_until(  # embedded by the worker too, as any memory written with a broker
            lambda: all(MemoryRecord.objects.filter(pk__in=summaries).values_list(
                "embedding_model", flat=True)),
            timeout=30, what="the summaries to be embedded",
        )  # fmt: skip

        after = turn(editor, session["id"], ("user", "And the dates?"))

        parts = after["prompt"]["parts"]
        used = {p["memoryId"] for p in parts if p.get("section") == "summaries"}
        assert used == set(summaries)
        assert not {p["turn"] for p in parts if p["kind"] == "history"} & set(range(1, 9))
        assert after["compaction"]["waitedFor"] is None  # the run had finished
        assert run["targetMet"] is True
        assert after["budgetStatus"]["utilizationPct"] <= 70.0  # the target, honestly met

    def test_a_manual_run_with_a_queue_is_202_then_done_by_a_worker(
        self, editor, workload_a, celery_workers
    ):
        layout(workload_a, {"compaction": {"enabled": True}})
        session = started(editor, workload_a)
        turn(editor, session["id"], ("user", "release notes?"))

        response = editor.api().post(f"/v1/sessions/{session['id']}/compact")

        assert response.status_code == 202, response.content
        assert response.json()["status"] == "queued"
        again = editor.api().post(f"/v1/sessions/{session['id']}/compact")
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "COMPACTION_IN_PROGRESS"
        celery_workers.start()
        assert finished(editor, response.json()["id"])["status"] == "succeeded"


class OpenAIWorkerTests:
    def workers_with(self, celery_workers, server, settings, workload) -> Any:
        """The server as service "llm" here and in a worker; the workload's layout names it."""
        entry = server.entry(timeout_seconds=30)
        settings.COMPACTION_SERVICES = {**django_settings.COMPACTION_SERVICES, "llm": entry}
        layout(workload, {**COMPACTING, "compaction": {
            **COMPACTING["compaction"], "llm_service": "llm"}})  # fmt: skip
        return celery_workers.start(
            COMPACTION_SERVICES=json.dumps({"llm": entry}), **{KEY_ENV: KEY}
        )

    def test_the_next_turn_waits_for_a_run_in_flight_then_goes_on_and_says_so(
        self, editor, workload_a, celery_workers, settings
    ):
        settings.COMPACTION_WAIT_MS = 300
        roomy_floor(editor.workspace)
        with completions_server(("sleep", 6, "A slow summary.")) as server:
            self.workers_with(celery_workers, server, settings, workload_a)
            session = started(editor, workload_a)
            asked = talk_until_compaction(editor, session["id"])
            run_id = asked["compaction"]["runId"]
            wait_until(lambda: server.received, timeout=30, what="the summarizer to be called")

            after = turn(editor, session["id"], ("user", "And the dates?"))

            waited = after["compaction"]["waitedFor"]
            assert (waited["runId"], waited["finished"]) == (run_id, False)
            assert waited["waitedMs"] >= 300
            assert after["compaction"]["code"] == "in_progress"
            # It went on without the run: its history still holds the turns being summarised.
            history = {p["turn"] for p in after["prompt"]["parts"] if p["kind"] == "history"}
            assert set(range(2, 9)) <= history
            assert finished(editor, run_id)["status"] == "succeeded"

    def test_a_worker_killed_mid_run_has_it_delivered_again_and_done_once(
        self, editor, workload_a, celery_workers, settings
    ):
        roomy_floor(editor.workspace)
        # The first call hangs (the worker is killed during it); the next ones answer.
        with completions_server(("sleep", 20, "Never sent."), "A summary.") as server:
            worker = self.workers_with(celery_workers, server, settings, workload_a)
            session = started(editor, workload_a)
            run_id = talk_until_compaction(editor, session["id"])["compaction"]["runId"]
            wait_until(lambda: server.received, timeout=30, what="the summarizer to be called")

            killed = worker.kill_pool()

            assert killed
            assert CompactionRun.objects.get(pk=run_id).status == "running"
            run = finished(editor, run_id, timeout=90)

        assert run["status"] == "succeeded", run
        assert len(server.received) == 3  # the killed call, then the two summaries
        assert MemoryRecord.objects.filter(memory_type="summary").count() == 2
        assert set(run["summaryMemoryIds"]) == set(
            str(pk) for pk in MemoryRecord.objects.filter(memory_type="summary").values_list(
                "pk", flat=True)
        )  # fmt: skip
        assert Turn.objects.filter(compacted_by_id=run_id).count() == 8
        assert AuditEvent.objects.filter(type=EventType.COMPACTED).count() == 1
