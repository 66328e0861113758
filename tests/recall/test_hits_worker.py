"""With a broker, the recall endpoint asks a worker to fold its workspace's hits after
``RECALL_HITS_FOLD_RECALLS`` recalls (recall/hits.py): for real, a Redis server and a Celery
worker; and a broker that cannot be reached costs the recall nothing but a logged line."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from recall import hits
from recall.models import MemoryRecord
from tests import helpers
from tests.recall import factories
from tests.worker_support import sending_to, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fold_every_other_recall(settings: Any) -> Any:
    settings.RECALL_HITS_FOLD_SECONDS = 3600
    settings.RECALL_HITS_FOLD_RECALLS = 2
    hits._FOLDED_AT.clear()
    hits._RECALLS_SINCE.clear()
    yield
    hits._FOLDED_AT.clear()
    hits._RECALLS_SINCE.clear()


def carried(persona: Any, workload: Any) -> list[int]:
    return [int(entry["id"]) for entry in helpers.recall(persona, workload, topK=3)["entries"]]


@pytest.mark.worker
def test_a_worker_folds_the_workspace_after_so_many_recalls(
    editor, workload_a, celery_workers, settings
):
    factories.memories(editor.workspace, {"content": "release summary preferences"})
    settings.CELERY_TASK_ALWAYS_EAGER = False  # as with a broker configured
    celery_workers.start()
    memory = carried(editor, workload_a)[0]
    assert MemoryRecord.objects.get(pk=memory).hit_count == 0

    assert memory in carried(editor, workload_a)  # the second: the fold is sent

    wait_until(
        lambda: MemoryRecord.objects.get(pk=memory).hit_count == 2,
        timeout=30,
        what="the worker to fold the two recalls' hits",
    )


def test_an_unreachable_broker_leaves_the_fold_to_beat(editor, workload_a, caplog, settings):
    factories.memories(editor.workspace, {"content": "release summary preferences"})
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with sending_to("redis://127.0.0.1:1/0"), caplog.at_level(logging.WARNING):
        memory = carried(editor, workload_a)[0]
        assert memory in carried(editor, workload_a)  # answered, though the fold was not sent

    assert "recall.fold_workspace_hits not sent" in caplog.text
    assert MemoryRecord.objects.get(pk=memory).hit_count == 0
