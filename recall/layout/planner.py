"""The chat layout planner (seed 000, SPEC section 6): the planning core and its result.

Plain Python, no Django import. For a checked ``LayoutRequest``, phase by phase:

1. **Budget** (``budget.compute_budget``): the request's numbers, a None taking the config's,
   give the fixed costs, the dynamic budget and the supporting-context budget.
2. **History**: the current session keeps its last ``max_history_turns`` turns; each element
   of ``history`` / ``prior_session_history`` is one message and one turn.
3. **Supporting sections** (``sections``): filter the items, then fill the sections in
   ``section_priority`` order within the supporting budget and ``max_items``.
4. **Estimate** (``estimate``): content plus formatting overhead, per part.
5. **Cascade** (``cascade``): only if the estimate exceeds the dynamic budget, the nine
   stages run in order and stop at the first that fits.
6. **Result**: the final estimate, utilization of the dynamic budget and its severity
   (``monitor.BudgetSeverity``), what was kept, what was left out and why, and warnings.

``plan_checked_layout`` trusts its request (the API's serializer checked it);
``plan_layout`` checks it first (``request.check_request``), for every other caller.
Token figures are estimates, not provider tokenization.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recall.layout.budget import BudgetAccounting, compute_budget
from recall.layout.cascade import StageReport, cascade_warnings, run_cascade
from recall.layout.estimate import (
    Payload,
    TokenBreakdown,
    TokenCounter,
    TokenEstimator,
    estimate_payload,
    estimate_tokens,
)
from recall.layout.monitor import BudgetSeverity, BudgetStatus, utilization_pct
from recall.layout.plain import plain_data
from recall.layout.request import LayoutRequest, SupportingItem, Turn, check_request
from recall.layout.sections import FILTER_REASONS, fill_sections, filter_supporting


@dataclass(frozen=True)
class LayoutResult:
    """The laid-out context and its budget diagnostics.

    ``utilization_pct`` is ``estimated_tokens`` relative to the *dynamic* budget: fixed
    costs (system prompt, tool schemas, output buffer) are reserved up front, so 100 %
    means the window is full with the output buffer still intact. ``available_budget``
    is that denominator (as in ``BudgetStatus``); ``free_tokens`` is what is left.
    The per-part figures (fixed / history / supporting / query / formatting / free) add
    up to ``context_window`` whenever the layout fits.
    """

    context_window: int
    fixed_costs: int
    dynamic_budget: int
    supporting_context_budget: int
    formatting_overhead: int
    estimate_before_pruning: int
    estimated_tokens: int
    available_budget: int
    free_tokens: int
    utilization_pct: float
    severity: BudgetSeverity
    fits: bool
    emergency_overage: bool
    history_tokens: int
    prior_history_tokens: int
    supporting_tokens: int
    query_tokens: int
    stages: list[StageReport]
    history: list[Turn]
    prior_session_history: list[Turn]
    supporting: dict[str, list[SupportingItem]]
    filtered: dict[str, int]
    warnings: list[str]

    @property
    def stages_run(self) -> list[int]:
        return [stage.number for stage in self.stages]

    def budget_status(self, turn_index: int | None = None) -> BudgetStatus:
        """This layout as a reading for ``ContextBudgetMonitor.record_turn``."""
        return BudgetStatus(
            total_tokens=self.estimated_tokens,
            available_budget=self.available_budget,
            utilization_pct=self.utilization_pct,
            severity=self.severity,
            turn_index=turn_index,
        )


def _budget_warnings(
    request: LayoutRequest, budget: BudgetAccounting, filtered: Mapping[str, int]
) -> list[str]:
    warnings: list[str] = []
    if budget.dynamic_budget == 0:
        warnings.append(
            f"fixed costs ({budget.fixed_costs} tokens) leave no room in the "
            f"{request.resolved_context_window}-token context window"
        )
    if filtered["not_in_section_priority"]:
        priority = request.config.supporting_context.section_priority
        unlisted = sorted(
            s for s, items in request.supporting.items() if items and s not in priority
        )
        warnings.append(
            f"{filtered['not_in_section_priority']} item(s) in section(s) "
            f"{', '.join(unlisted)} were not used: not listed in section_priority"
        )
    return warnings


@dataclass(frozen=True)
class _Planned:
    """What the phases produced, for ``_build_result``."""

    budget: BudgetAccounting
    payload: Payload
    initial: TokenBreakdown
    final: TokenBreakdown
    reports: list[StageReport]
    filtered: dict[str, int]


def _build_result(request: LayoutRequest, planned: _Planned) -> LayoutResult:
    budget, final, payload = planned.budget, planned.final, planned.payload
    total = final.total
    fits = total <= budget.dynamic_budget
    pct = utilization_pct(total, budget.dynamic_budget)
    return LayoutResult(
        context_window=request.resolved_context_window,
        fixed_costs=budget.fixed_costs,
        dynamic_budget=budget.dynamic_budget,
        supporting_context_budget=budget.supporting_context_budget,
        formatting_overhead=final.formatting,
        estimate_before_pruning=planned.initial.total,
        estimated_tokens=total,
        available_budget=budget.dynamic_budget,
        free_tokens=max(0, budget.dynamic_budget - total),
        utilization_pct=pct,
        severity=BudgetSeverity.from_utilization(pct),
        fits=fits,
        # The cascade only ends unfit after stage 9, so "not fits" is the emergency case.
        emergency_overage=not fits,
        history_tokens=final.history,
        prior_history_tokens=final.prior_history,
        supporting_tokens=final.supporting,
        query_tokens=final.query,
        stages=planned.reports,
        history=list(payload.history),
        prior_session_history=list(payload.prior),
        supporting={name: list(items) for name, items in payload.supporting.items() if items},
        filtered=planned.filtered,
        warnings=_budget_warnings(request, budget, planned.filtered)
        + cascade_warnings(planned.reports, budget.dynamic_budget),
    )


def request_budget(request: LayoutRequest) -> BudgetAccounting:
    """Phase 1: the request's numbers (a None takes the config's) through the seed's formulas."""
    return compute_budget(
        request.resolved_context_window,
        request.system_prompt_tokens,
        request.tool_schema_tokens,
        request.resolved_output_buffer,
        float(request.resolved_budget_ratio),
    )


def plan_checked_layout(
    request: LayoutRequest, estimator: TokenEstimator = estimate_tokens
) -> LayoutResult:
    """The phases of the module docstring, for a request already checked (not checked again).

    ``estimator`` maps text to a token count; formatting overhead is added on top of it.
    """
    budget = request_budget(request)
    counter = TokenCounter(estimator)
    config = request.config
    filtered = dict.fromkeys(FILTER_REASONS, 0)
    max_turns = config.max_history_turns
    history = tuple(request.history[-max_turns:]) if max_turns else ()
    filtered["history_over_max_turns"] = len(request.history) - len(history)
    usable = filter_supporting(request.supporting, config.supporting_context, filtered)
    selected = fill_sections(
        usable, config.supporting_context, budget.supporting_context_budget, counter, filtered
    )
    payload = Payload(history, tuple(request.prior_session_history), selected)
    initial = estimate_payload(payload, request.query, counter)
    reports: list[StageReport] = []
    if initial.total > budget.dynamic_budget:
        payload, reports = run_cascade(payload, request.query, budget.dynamic_budget, counter)
    final = estimate_payload(payload, request.query, counter)
    return _build_result(request, _Planned(budget, payload, initial, final, reports, filtered))


def plan_layout(
    request: LayoutRequest, estimator: TokenEstimator = estimate_tokens
) -> LayoutResult:
    """Check ``request`` (``check_request``), then plan it: for callers outside the API.

    Raises ``LayoutRequestError`` for invalid input.
    """
    return plan_checked_layout(check_request(request), estimator)


def layout_result_to_dict(result: LayoutResult) -> dict[str, Any]:
    """Plain JSON-ready dict, snake_case (the API's camelCase is ``LayoutResultSerializer``)."""
    data = plain_data(result)
    data["stages_run"] = result.stages_run
    return data
