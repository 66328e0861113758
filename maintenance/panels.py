"""What maintenance adds to the pages of the floors below (``portal.pages.panel_register``):
the memory page's lifecycle card and the runs that touched the memory."""

from __future__ import annotations

from maintenance.models import MaintenanceItem
from maintenance.selectors import memory_lifecycle
from portal.pages import PageAccess, Panel, panel_register
from recall.models import MemoryRecord
from recall.views import MEMORY_AFTER, MEMORY_SIDE


@panel_register(MEMORY_SIDE)
def memory_lifecycle_card(access: PageAccess, memory: MemoryRecord) -> Panel:
    """Tier, decay score, when it turns stale, promotion score and its signals."""
    state = memory_lifecycle(memory=memory)
    weights = state.settings["promotionWeights"]
    return Panel("maintenance/_memory_lifecycle.html", {"state": state, "weights": weights})


@panel_register(MEMORY_AFTER)
def memory_runs(access: PageAccess, memory: MemoryRecord) -> Panel | None:
    """The last ten runs (previews aside) that touched the memory, if any."""
    items = list(
        MaintenanceItem.objects.filter(memory_id=memory.pk, run__workspace=access.workspace)
        .exclude(run__mode="preview")
        .exclude(run__sweep="sessions")  # their ids are sessions' (maintenance.sweeps)
        .select_related("run")
        .order_by("-run_id")[:10]
    )
    return Panel("maintenance/_memory_runs.html", {"runs": items}) if items else None
