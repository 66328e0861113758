"""Chat layout budgeting (seed 000, SPEC section 6): one concept per module.

=============  ==============================================================================
vocabulary     section names, passage terms, the bound on counts, "did you mean" suggestions
config         the ``memory:`` configuration: dataclasses, parsing, the one guarded YAML loader
request        what a caller lays out, and its one pure validation (``check_request``)
budget         the seed's budget accounting
estimate       token estimates and formatting overhead
sections       filtering and filling supporting sections
cascade        the nine-stage pruning cascade
planner        the planning core (phases in its docstring) and its result
monitor        budget severity and the compaction monitor, with seed 000's names
plain          layout values as plain JSON-ready data
services       (Django) stored configurations and the sandbox's preview; not handed on here
=============  ==============================================================================

Everything but ``services`` is plain Python. The names an outside caller needs to plan a
layout are handed on here, so ``from recall.layout import plan_layout, LayoutRequest`` works.
"""

from recall.layout.budget import BudgetAccounting, compute_budget
from recall.layout.config import LayoutConfig, LayoutConfigError, LayoutError, parse_memory_config
from recall.layout.monitor import (
    BudgetSeverity,
    BudgetStatus,
    CompactionConfig,
    ContextBudgetMonitor,
)
from recall.layout.planner import LayoutResult, plan_layout
from recall.layout.request import LayoutRequest, LayoutRequestError, SupportingItem, Turn

__all__ = [
    "BudgetAccounting",
    "BudgetSeverity",
    "BudgetStatus",
    "CompactionConfig",
    "ContextBudgetMonitor",
    "LayoutConfig",
    "LayoutConfigError",
    "LayoutError",
    "LayoutRequest",
    "LayoutRequestError",
    "LayoutResult",
    "SupportingItem",
    "Turn",
    "compute_budget",
    "parse_memory_config",
    "plan_layout",
]
