"""Fixtures the recall tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from portal.celery import app as celery_app
from recall import hits


@pytest.fixture
def hits_fold_unasked(settings: Any, monkeypatch: Any) -> Iterator[None]:
    """No recall folds its workspace's hits on its own (as one would once a minute or 200
    recalls have passed) unless a test says so, whatever the environment: tasks eager, a long
    interval, a large count, no clock started and nothing counted yet."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    settings.RECALL_HITS_FOLD_SECONDS = 3600
    settings.RECALL_HITS_FOLD_RECALLS = 10_000
    hits._FOLDED_AT.clear()
    hits._RECALLS_SINCE.clear()
    yield
    hits._FOLDED_AT.clear()
    hits._RECALLS_SINCE.clear()
