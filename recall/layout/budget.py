"""The seed's budget accounting (seed 000, SPEC section 6).

Plain Python, no Django import::

    fixed_costs = system_prompt_tokens + tool_schema_tokens + output_buffer
    dynamic_budget = max(0, context_window - fixed_costs)
    supporting_context_budget = floor(dynamic_budget * budget_ratio)

The dynamic budget must hold everything that is not a fixed cost: retained prior-session
and current-session history, supporting context, the new query and their formatting.
Supporting context is additionally bounded by ``supporting_context_budget``; the rest is
not a separately enforced history quota (as in the seed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BudgetAccounting:
    fixed_costs: int
    dynamic_budget: int
    supporting_context_budget: int


def compute_budget(
    context_window: int,
    system_prompt_tokens: int,
    tool_schema_tokens: int,
    output_buffer: int,
    budget_ratio: float,
) -> BudgetAccounting:
    """The seed's formulas (32000/1500/500/2500/0.30 -> 27500 and 8250)."""
    fixed_costs = system_prompt_tokens + tool_schema_tokens + output_buffer
    dynamic_budget = max(0, context_window - fixed_costs)
    return BudgetAccounting(
        fixed_costs=fixed_costs,
        dynamic_budget=dynamic_budget,
        supporting_context_budget=math.floor(dynamic_budget * budget_ratio),
    )
