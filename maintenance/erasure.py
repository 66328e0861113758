"""Erasure reaches the retention archives: an erased actor's lines leave every archive.

Registered with ``recall.erasure`` (which runs it inside the erasure's transaction), since
the archives are maintenance's and recall, a floor below, does not import them.
"""

from __future__ import annotations

import hashlib
import json

from maintenance.models import ArchiveChunk
from portal.models import Workspace
from recall.erasure import erasure_copies_register


@erasure_copies_register
def archive_lines_erase(workspace: Workspace, actor_id: str) -> dict[int, int]:
    """Drop the actor's lines from the workspace's retention archives: {run id: lines}.

    Each part is rewritten with its count and SHA-256 recomputed (a part left empty goes), so
    the archive's manifest describes what it holds; the run's event keeps the manifest it had
    when written, and the ``memory.erased`` event names the runs rewritten since.
    """
    removed: dict[int, int] = {}
    chunks = ArchiveChunk.objects.filter(run__workspace=workspace).select_for_update()
    for chunk in chunks.order_by("run_id", "seq").iterator():
        lines = chunk.lines.splitlines()
        kept = [line for line in lines if json.loads(line).get("actorId") != actor_id]
        if len(kept) == len(lines):
            continue
        removed[chunk.run_id] = removed.get(chunk.run_id, 0) + len(lines) - len(kept)
        if not kept:
            chunk.delete()
            continue
        text = "".join(line + "\n" for line in kept)
        chunk.lines = text
        chunk.count = len(kept)
        chunk.sha256 = hashlib.sha256(text.encode()).hexdigest()
        chunk.save(update_fields=["lines", "count", "sha256"])
    return removed
