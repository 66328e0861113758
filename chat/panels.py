"""What chat adds to the pages of the floors below (``portal.pages.panel_register``): on a
summary memory's page, the compaction run that wrote it and the session it summarises."""

from __future__ import annotations

from chat.models import CompactionRun
from portal.pages import PageAccess, Panel, panel_register
from recall.models import MemoryRecord
from recall.views import MEMORY_SIDE


@panel_register(MEMORY_SIDE)
def memory_compaction_card(access: PageAccess, memory: MemoryRecord) -> Panel | None:
    """The run that summarised a session's turns into this memory, if one did."""
    if memory.memory_type != "summary":
        return None
    run = (
        CompactionRun.objects.filter(workspace=access.workspace, summary_ids__contains=[memory.pk])
        .order_by("-pk")
        .first()
    )
    return Panel("chat/_memory_compaction.html", {"run": run}) if run else None
