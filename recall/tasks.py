"""Recall's background tasks: thin wrappers over idempotent services."""

from __future__ import annotations

from portal.tasks import task
from recall import services
from recall.hits import hits_fold, hits_fold_all


@task(name="recall.embed_memories")
def embed_memories(memory_ids: list[int]) -> int:
    """Embed the listed memories that still need it (safe to run twice)."""
    return services.memory_embed(ids=memory_ids)


@task(name="recall.fold_hits")
def fold_hits() -> int:
    """Count every workspace's recalls since its mark into its memories (recall/hits.py)."""
    return hits_fold_all()


@task(name="recall.fold_workspace_hits")
def fold_workspace_hits(workspace_id: int) -> int:
    """Count one workspace's recalls since its mark into its memories, asked for by the
    recall endpoint after ``RECALL_HITS_FOLD_RECALLS`` of them (recall/hits.py)."""
    return hits_fold(workspace_id=workspace_id)
