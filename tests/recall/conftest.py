"""Fixtures the recall tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from portal.celery import app as celery_app
from portal.db.scope import ALL, scope_set
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


@pytest.fixture
def scope_kept(db: None) -> Iterator[None]:
    """Requests leave the connection scoped as they left it, as in a production worker."""
    from django.core.signals import request_finished

    from tests.conftest import SCOPE_RESTORE, restore_scope_after_request

    request_finished.disconnect(dispatch_uid=SCOPE_RESTORE)
    try:
        yield
    finally:
        request_finished.connect(restore_scope_after_request, dispatch_uid=SCOPE_RESTORE)
        scope_set(ALL)
