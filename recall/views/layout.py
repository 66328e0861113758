"""The layout sandbox page: plan a chat prompt's layout within its context budget (seed 000)."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from policies.models import Workload
from portal.http import HtmxHttpRequest
from portal.pages import PageAccess, workspace_page
from recall.forms.layout import (
    LAYOUT_EXAMPLES,
    SEED_EXAMPLE,
    LayoutForm,
    LayoutStart,
    layout_initial,
)
from recall.layout import services as layout_services
from recall.layout.cascade import PRUNING_STAGES
from recall.layout.config import layout_config_yaml
from recall.layout.planner import LayoutResult
from recall.layout.request import LayoutRequest
from recall.svg import LAYOUT_PARTS, layout_bar
from recall.views.picks import (
    UNPROCESSABLE,
)

# --- layout sandbox ----------------------------------------------------------------------------

# What a cascade stage removed, in words: key -> (one, many).
REMOVED_WORDS = {
    "prior_session_turns": ("prior-session turn", "prior-session turns"),
    "turns": ("current turn", "current turns"),
    "short_passages": ("short-term passage", "short-term passages"),
    "long_passages": ("long-term passage", "long-term passages"),
    "known_facts": ("known fact", "known facts"),
    "insights": ("insight", "insights"),
    "summaries": ("summary", "summaries"),
    "entities": ("entity", "entities"),
    "tools": ("tool item", "tool items"),
    "state": ("state item", "state items"),
}
FILTER_WORDS = {
    "decayed": "decayed",
    "superseded": "superseded",
    "redundant_summary": "redundant summaries",
    "below_min_query_relevance": "below min_query_relevance",
    "history_over_max_turns": "turns over max_history_turns",
    "not_in_section_priority": "not in section_priority",
    "over_max_items": "over max_items",
    "over_supporting_budget": "over the supporting-context budget",
}


def _pick_layout_workload(workloads: list[Workload], wanted: str | None) -> Workload | None:
    return next((w for w in workloads if str(w.pk) == wanted), None)


def _layout_initial(
    params: Any,
    workloads: list[Workload],
    workload: Workload | None,
    current: layout_services.CurrentLayoutConfig | None,
) -> dict[str, Any]:
    """A fresh form: an example (``?example=``), else the 32,000-token example with any field
    given in the query string; a chosen workload fills in its stored numbers and YAML.

    ``?copy_of=`` (the workload chosen before "The YAML below") starts the YAML as an
    editable copy of that workload's: the page names it instead of sending the YAML itself
    in a query string.
    """
    example = LAYOUT_EXAMPLES.get(params.get("example", ""))
    if example is not None:
        return dict(example)
    initial = dict(SEED_EXAMPLE)
    initial.update({name: params[name] for name in LayoutForm.base_fields if name in params})
    copied = _pick_layout_workload(workloads, params.get("copy_of"))
    if workload is None and copied is not None:
        config = layout_services.layout_config_current(workload=copied).config
        initial["config"] = layout_config_yaml(config)
    if workload is not None and current is not None:
        config = current.config
        initial.update(
            workload=str(workload.pk),
            context_window=config.context_window,
            output_buffer=config.output_buffer,
            budget_ratio=config.supporting_context.budget_ratio,
            config=layout_config_yaml(config),
        )
    return initial


@login_required
@require_http_methods(["GET", "POST"])
def layout(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Plan a chat prompt's layout within its context budget (SPEC section 6, seed 000).

    Any member may run it: it is a pure computation and stores nothing. Invalid input is
    re-rendered with the errors next to the fields, as 422.
    """
    access = workspace_page(request, slug)
    workloads = list(access.workspace.workloads.filter(archived_at__isnull=True).order_by("name"))
    params = request.POST if request.method == "POST" else request.GET
    workload = _pick_layout_workload(workloads, params.get("workload"))
    current = layout_services.layout_config_current(workload=workload) if workload else None
    outcome: dict[str, Any] = {}
    status = 200
    if request.method == "POST":
        data: QueryDict = request.POST
        if current is not None:
            # Show the stored YAML that was used, whatever the textarea held.
            data = request.POST.copy()
            data["config"] = layout_config_yaml(current.config)
        form = LayoutForm(data, workloads=workloads)
        outcome = _layout_plan(form, current)
        if form.errors:
            status = UNPROCESSABLE
    else:
        # The tab opens planned: the example (or the chosen workload's numbers) with its
        # accounting, cascade and severity already shown, not an empty result panel.
        initial = _layout_initial(params, workloads, workload, current)
        form = LayoutForm(_form_data(initial), workloads=workloads)
        outcome = _layout_plan(form, current)
        if form.errors:  # e.g. a malformed number in the query string: a fresh form instead
            form = LayoutForm(workloads=workloads, initial=initial)
    context = {
        **access.context(),
        "form": form,
        "config_workload": workload,
        "config_version": current.version if current else None,
        "stages_total": len(PRUNING_STAGES),
        **outcome,
    }
    template = "recall/_layout_body.html" if request.htmx else "recall/layout.html"
    return render(request, template, context, status=status)


def layout_opened(
    request: HtmxHttpRequest, access: PageAccess, start: LayoutStart, *, opened_from: Any
) -> HttpResponse:
    """The Layout tab opened on a prompt recorded elsewhere (a session's turn: ``chat``'s
    "Open in Layout"), planned as it stands; ``opened_from`` is what the page says of where it
    came from (``title``, ``href``, ``notes``). The form posts to the tab as any, so the
    operator edits and plans again. A recorded prompt the form refuses (too many lines) shows
    the form's errors instead of a result."""
    workloads = list(access.workspace.workloads.filter(archived_at__isnull=True).order_by("name"))
    form = LayoutForm(_form_data(layout_initial(start)), workloads=workloads)
    context = {
        **access.context(),
        "form": form,
        "config_workload": None,
        "config_version": None,
        "stages_total": len(PRUNING_STAGES),
        "opened_from": opened_from,
        **_layout_plan(form, None),
    }
    return render(request, "recall/layout.html", context)


def _form_data(initial: dict[str, Any]) -> QueryDict:
    """Initial values as a browser would submit them, to plan them as the form would."""
    data = QueryDict(mutable=True)
    for name, value in initial.items():
        data[name] = "" if value is None else str(value)
    return data


def _layout_plan(
    form: LayoutForm, current: layout_services.CurrentLayoutConfig | None
) -> dict[str, Any]:
    """The planned layout of a bound form, or nothing (its errors are then on the form)."""
    if not form.is_valid():
        return {}
    config = current.config if current is not None else form.parsed_config
    assert config is not None  # the form parsed the YAML when no workload was chosen
    request = form.layout_request(config)
    # Checked by the form's serializer (as the API's), so the preview plans it as it is.
    return _layout_outcome(request, layout_services.layout_preview(request=request))


def _ratio_text(ratio: float) -> str:
    return f"{ratio:.2f}" if round(ratio, 2) == ratio else f"{ratio:g}"


def _removed_text(removed: dict[str, int]) -> str:
    if not removed:
        return "nothing"
    words = []
    for key, count in removed.items():
        one, many = REMOVED_WORDS.get(key, (key.replace("_", " "), key.replace("_", " ")))
        words.append(f"{count:,} {one if count == 1 else many}")
    return ", ".join(words)


def _cascade_end(result: LayoutResult) -> str:
    """Where the cascade stopped, in words (stages after it did not run)."""
    if not result.stages:
        return ""
    last = result.stages[-1].number
    if result.emergency_overage:
        return f"All {len(PRUNING_STAGES)} stages ran and the emergency minimum still does not fit."
    skipped = [stage.number for stage in PRUNING_STAGES if stage.number > last]
    if not skipped:
        return f"Stage {last}, the emergency minimum, was needed before the payload fit."
    rest = f"stage {skipped[0]}" if len(skipped) == 1 else f"stages {skipped[0]}–{skipped[-1]}"
    return f"Stopped at stage {last}, the first that fits; {rest} did not run."


def _kept_rows(request: LayoutRequest, result: LayoutResult) -> list[dict[str, Any]]:
    """What the prompt keeps of what was given, part by part (only parts that were given)."""
    rows = [
        {
            "part": "Current-session turns",
            "given": len(request.history),
            "kept": len(result.history),
        },
        {
            "part": "Prior-session turns",
            "given": len(request.prior_session_history),
            "kept": len(result.prior_session_history),
        },
    ]
    sections = list(request.config.supporting_context.section_priority)
    sections += [name for name in request.supporting if name not in sections]
    for name in sections:
        given = len(request.supporting.get(name, []))
        if given:
            kept = len(result.supporting.get(name, []))
            rows.append({"part": name.replace("_", " ").capitalize(), "given": given, "kept": kept})
    return [row for row in rows if row["given"]]


def _layout_outcome(
    request: LayoutRequest, preview: layout_services.LayoutPreview
) -> dict[str, Any]:
    result = preview.result
    tokens = {
        "fixed": result.fixed_costs,
        "history": result.history_tokens,
        "prior_history": result.prior_history_tokens,
        "supporting": result.supporting_tokens,
        "query": result.query_tokens + result.formatting_overhead,
        "free": result.free_tokens,
    }
    window = result.context_window
    pct = result.utilization_pct
    return {
        "result": result,
        "compaction": preview.compaction,
        "compaction_enabled": preview.compaction_enabled,
        "ratio_text": _ratio_text(request.resolved_budget_ratio),
        "output_buffer": request.resolved_output_buffer,
        "system_prompt_tokens": request.system_prompt_tokens,
        "tool_schema_tokens": request.tool_schema_tokens,
        "utilization_text": f"{pct:.1f}%" if math.isfinite(pct) else "∞",
        "layout_svg": layout_bar(
            tokens,
            context_window=window,
            dynamic_budget=result.dynamic_budget,
            supporting_budget=result.supporting_context_budget,
        ),
        "layout_rows": [
            {
                "key": key,
                "label": label,
                "tokens": tokens[key],
                "share": f"{tokens[key] * 100 / window:.1f}%" if window else "—",
            }
            for key, label, *_ in LAYOUT_PARTS
        ],
        "layout_total": sum(tokens.values()),
        "stages": [
            {
                "number": stage.number,
                "name": stage.name,
                "description": stage.description,
                "removed": _removed_text(stage.removed),
                "estimate_after": stage.estimate_after,
                "fits": stage.fits,
            }
            for stage in result.stages
        ],
        "cascade_end": _cascade_end(result),
        "kept_rows": _kept_rows(request, result),
        "filtered": [
            (FILTER_WORDS.get(reason, reason), count)
            for reason, count in result.filtered.items()
            if count
        ],
        "warnings": result.warnings,
    }
