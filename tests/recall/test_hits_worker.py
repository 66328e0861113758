"""With a broker, the recall endpoint asks a worker to fold its workspace's hits after
``RECALL_HITS_FOLD_RECALLS`` recalls (recall/hits.py): for real, a Redis server and a Celery
worker; and a broker that refuses connections, or accepts them and never answers, costs the
recall nothing (the task is sent from a thread of its own)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from portal.tasks import sending
from recall.models import MemoryRecord
from tests import helpers
from tests.recall import factories
from tests.worker_support import sending_to, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fold_every_other_recall(hits_fold_unasked: None, settings: Any) -> None:
    settings.RECALL_HITS_FOLD_RECALLS = 2


@pytest.fixture
def rows(editor: Any) -> list[MemoryRecord]:
    # embedded now, before a test sends tasks elsewhere
    return factories.memories(editor.workspace, {"content": "release summary preferences"})


def carried(persona: Any, workload: Any) -> list[int]:
    return [int(entry["id"]) for entry in helpers.recall(persona, workload, topK=3)["entries"]]


# Far below what a recall held by the send would take (the broker's connection retries, or
# a hung send until the test closes it: seconds), far above a recall on a loaded machine.
HELD = 2.0


def timed_recalls(persona: Any, workload: Any, n: int) -> tuple[list[float], int]:
    """``n`` recalls: how long each took, and the memory the first carried."""
    took, first = [], []
    for _ in range(n):
        started = time.monotonic()
        first.append(carried(persona, workload)[0])
        took.append(time.monotonic() - started)
    return took, first[0]


class SilentBroker:
    """A Redis server that accepts connections and never answers (a hung broker, or a
    half-open path to one), until ``close``."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}/0"
        self.accepted: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                self.accepted.append(self.listener.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.listener.close()


@pytest.fixture
def silent_broker() -> Iterator[SilentBroker]:
    broker = SilentBroker()
    try:
        yield broker
    finally:
        broker.close()


@pytest.mark.worker
class FoldByAWorkerTests:
    def test_a_worker_folds_the_workspace_after_so_many_recalls(
        self, editor, workload_a, rows, celery_workers
    ):
        celery_workers.start()
        memory = carried(editor, workload_a)[0]
        assert MemoryRecord.objects.get(pk=memory).hit_count == 0

        assert memory in carried(editor, workload_a)  # the second: the fold is sent

        wait_until(
            lambda: MemoryRecord.objects.get(pk=memory).hit_count == 2,
            timeout=30,
            what="the worker to fold the two recalls' hits",
        )


class BrokerDownTests:
    def test_a_broker_refusing_connections_is_logged_and_the_fold_left_to_beat(
        self, editor, workload_a, rows, caplog
    ):
        with sending_to("redis://127.0.0.1:1/0"), caplog.at_level(logging.WARNING):
            took, memory = timed_recalls(editor, workload_a, 4)
            wait_until(lambda: not sending(), timeout=30, what="the sends to give up")

        assert max(took) < HELD, took
        assert "recall.fold_workspace_hits not sent" in caplog.text
        assert MemoryRecord.objects.get(pk=memory).hit_count == 0

    def test_a_hung_broker_does_not_hold_the_recall(
        self, editor, workload_a, rows, silent_broker, caplog
    ):
        with sending_to(silent_broker.url), caplog.at_level(logging.WARNING):
            took, _ = timed_recalls(editor, workload_a, 6)
            # the first send hangs; the ones asked for meanwhile are dropped, not queued
            assert sending() == {"recall.fold_workspace_hits"}
            silent_broker.close()  # the hung send now fails, and says so
            wait_until(lambda: not sending(), timeout=30, what="the hung send to give up")

        assert max(took) < HELD, took
        assert caplog.text.count("recall.fold_workspace_hits not sent") == 1
