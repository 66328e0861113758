"""Memories in given lifecycle states, and snapshots to prove what a run wrote."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from portal.models import Workspace
from recall.models import MemoryRecord
from tests.recall import factories


def memory(workspace: Workspace, content: str, actor_id: str = "user:ada", **state: Any) -> int:
    """A memory written through the real path, then put into ``state`` (model columns), as
    time and recall would have left it (``last_accessed_at``, ``hit_count``, ...)."""
    created = factories.memories(workspace, {"content": content}, actor_id=actor_id)[0]
    if state:
        MemoryRecord.objects.filter(pk=created.pk).update(**state)
    return created.pk


def ago(**delta: float) -> datetime:
    return timezone.now() - timedelta(**delta)


SNAPSHOT_FIELDS = [
    f.attname for f in MemoryRecord._meta.concrete_fields if f.attname != "embedding"
]


def snapshot(workspace: Workspace) -> list[tuple[Any, ...]]:
    """Every memory of the workspace, every column (the vector as text)."""
    rows = MemoryRecord.objects.filter(workspace=workspace).order_by("pk")
    return [
        (*values, str(vector))
        for *values, vector in rows.values_list(*SNAPSHOT_FIELDS, "embedding")
    ]
