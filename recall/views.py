"""Recall pages: the recall and layout sandboxes and the memory browser.

Each page URL serves the whole page and, for htmx requests, only the fragment that changes
(``request.htmx``). Writes go through ``recall.services``; reads through the selectors and
``recall.page_selectors``. Domain errors are shown next to the form fields they name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.models import AuditEvent
from audit.selectors import memory_injection_summary
from maintenance.models import MaintenanceItem
from maintenance.selectors import memory_lifecycle
from policies import labels
from policies.algebra import AXES, PolicyError
from policies.models import Workload, Workspace
from policies.selectors import EffectivePolicy, effective_policy_for, workspace_policy_current
from portal.errors import DomainError, ValidationFailed
from portal.http import HtmxHttpRequest
from portal.models import Role
from portal.pages import PageAccess, safe_next, workspace_page
from recall import erasure, layout_services, replay, services
from recall.filtersets import MemoryFilterSet
from recall.forms import (
    LAYOUT_EXAMPLES,
    SEED_EXAMPLE,
    LayoutForm,
    MemoryEditForm,
    MemoryImportForm,
    SandboxForm,
    add_domain_error,
    draft_kept,
    parse_jsonl,
)
from recall.layout import PRUNING_STAGES, LayoutConfig, LayoutRequestError, LayoutResult
from recall.models import Actor, LifecycleStatus, MemoryRecord
from recall.page_selectors import (
    RecallPreview,
    actor_suggestions,
    assembled_event_id,
    decision_words,
    memory_rows,
    recall_preview,
    recall_reason,
    sandbox_decisions,
)
from recall.selectors import actor_lookup
from recall.svg import LAYOUT_PARTS, budget_bar, kind_summary, layout_bar

PAGE_SIZE = 25
UNPROCESSABLE = 422  # a submitted form with errors, re-rendered
COMPARE_WIDTH = 560  # each side of the compare view's budget bars, in SVG user units
DEFAULT_ENVIRONMENT = "prod"
# The envelope's hashes in the order the result shows them, with their names in words.
FINGERPRINTS = (
    ("effectivePolicyHash", "Effective policy hash"),
    ("effectiveBudgetHash", "Effective budget hash"),
    ("prefixFingerprint", "Prefix fingerprint"),
    ("digest", "Digest"),
)
# The recall funnel's counts (labels.COUNT_LABELS names them) and what each step keeps.
FUNNEL_STEPS = (
    ("candidates", "the actor's memories"),
    ("afterPolicy", "pass fail-closed rules and every axis"),
    ("afterRanking", "best scores, cut to top K"),
    ("afterBudgetAllocation", "entries and truncated refs"),
)


def _workloads(workspace: Workspace) -> list[Workload]:
    workloads = list(workspace.workloads.filter(archived_at__isnull=True).order_by("name"))
    for workload in workloads:
        workload.workspace = workspace  # effective_policy_for reads it: no query per workload
    return workloads


def _environments(workspace: Workspace) -> list[str]:
    return list(workspace.environments.order_by("slug").values_list("slug", flat=True))


def _pick_workload(workloads: list[Workload], wanted: str | None) -> Workload | None:
    return next((w for w in workloads if str(w.pk) == wanted), workloads[0] if workloads else None)


def _pick_environment(environments: list[str], wanted: str | None) -> str:
    if wanted in environments:
        return str(wanted)
    if DEFAULT_ENVIRONMENT in environments:
        return DEFAULT_ENVIRONMENT
    return environments[0] if environments else ""


def _saved_policy(workload: Workload | None, environment: str) -> EffectivePolicy | None:
    if workload is None:
        return None
    try:
        return effective_policy_for(workload=workload, environment=environment)
    except PolicyError:  # a stored policy the current floor cannot honour; the run says why
        return None


# --- sandbox -----------------------------------------------------------------------------------


@login_required
@require_GET
def actor_options(request: HttpRequest, slug: str) -> HttpResponse:
    """``<option>``s for the actor ``<datalist>`` (``?q=``; the input's own name works too)."""
    access = workspace_page(request, slug)
    q = request.GET.get("q", request.GET.get("actor", ""))
    # A NUL cannot be in any actor id (PostgreSQL text refuses it): it matches nothing.
    actors = [] if "\x00" in q else actor_suggestions(workspace=access.workspace, q=q[:250])
    return render(request, "recall/_actor_options.html", {"actors": actors})


@login_required
@require_http_methods(["GET", "POST"])
def sandbox(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    posting = request.method == "POST"
    access = workspace_page(request, slug, required=Role.EDITOR if posting else Role.VIEWER)
    workspace = access.workspace
    workloads = _workloads(workspace)
    environments = _environments(workspace)
    source = request.POST if posting else request.GET
    workload = _pick_workload(workloads, source.get("workload"))
    environment = _pick_environment(environments, source.get("environment"))
    floor = workspace_policy_current(workspace=workspace)
    saved = _saved_policy(workload, environment)
    default_actor = source.get("actor") or next(
        iter(actor_suggestions(workspace=workspace, q="", limit=1)), ""
    )
    # Redrawn for another workload or environment (htmx swaps only the parts that depend on
    # them), the override panel keeps the axes the user ticked as they were.
    kept = {} if posting else draft_kept(request.GET)
    form = SandboxForm(
        request.POST if posting else None,
        workloads=workloads,
        environments=environments,
        relaxable=floor.relaxable_axes,
        saved_policy=saved.policy if saved else floor.document,
        editable=access.can_edit,
        initial={
            "actor": default_actor,
            "workload": str(workload.pk) if workload else None,
            "environment": environment,
            "query": source.get("query", ""),
            "top_k": source.get("top_k") or 5,
            **kept,
        },
    )
    outcome: dict[str, Any] = {}
    if posting and form.is_valid():
        outcome = _sandbox_run(form, access)
    context = {
        **access.context(),
        "form": form,
        "axis_blocks": form.axis_blocks(),
        "locked_axes": form.locked,
        "axes_total": len(AXES),
        "override_open": form.override_touched(),
        "relaxable": floor.relaxable_axes,
        "floor": floor,
        "saved": saved,
        "workloads": workloads,
        "selected_workload": workload,
        "selected_environment": environment,
        **outcome,
    }
    template = "recall/_sandbox_body.html" if request.htmx else "recall/sandbox.html"
    return render(request, template, context)


def _sandbox_run(form: SandboxForm, access: PageAccess) -> dict[str, Any]:
    """Run the recall for real (one ``context.assembled`` event); in compare mode also preview
    the saved policy and the draft override read-only. Errors go onto the form."""
    data = form.cleaned_data
    workspace = access.workspace
    override = form.override()
    overridden = list(override)
    if form.errors:
        return {}
    actor_id = data["actor"].strip()
    args: dict[str, Any] = {
        "workspace": workspace,
        "workload": form.selected_workload(),
        "environment": data["environment"],
        "actor_id": actor_id,
        "query": data["query"],
        "top_k": data["top_k"],
    }
    comparing = bool(data["compare"])
    try:
        services.actor_parse(actor_id)
        if actor_lookup(workspace=workspace, actor_id=actor_id) is None:
            form.add_error("actor", f"No actor {actor_id} in this workspace; pick a suggestion.")
            return {}
        previews: tuple[RecallPreview, RecallPreview] | None = None
        if comparing:
            # Both previews read the same rows the real run will (before it records hits).
            previews = (
                recall_preview(**args, override=None),
                recall_preview(**args, override=override or None),
            )
        envelope = services.recall_assemble(
            request=services.RecallRequest(
                **args,
                override=None if comparing else (override or None),
                author=access.caller.label,
            )
        )
    except (PolicyError, DomainError) as exc:
        drafted = isinstance(exc, PolicyError) and bool(override)
        add_domain_error(form, exc, fallback=not drafted)
        touched = [name for name in overridden if f"override_{name}" in form.errors]
        if drafted and not touched:
            # e.g. a smaller totalTokenBudget that the locked reservations no longer fit: the
            # locked axes have no fields, so what they say is told here.
            fields = (exc.details or {}).get("fields") or {}
            said = [
                f"{labels.axis_label(name)} (not relaxable): {message}"
                for name, message in fields.items()
                if name in form.locked
            ]
            form.add_error(
                None, " ".join([f"The draft override cannot be applied: {exc.message}", *said])
            )
        return {}
    policy: dict[str, Any] | None = None
    if envelope["diagnostics"]["verbosity"] == "full":  # only decisions show policy values
        policy = (
            previews[0].policy
            if previews is not None
            else _run_policy(args, envelope, override=override or None)
        )
    result = _result_context(envelope, workspace, policy=policy)
    result["ran_for"] = (args["workload"].name, args["environment"])
    if previews is not None:
        result["compare"] = _compare_context(envelope, *previews, override=override)
        result["budget_svg"] = budget_bar(
            envelope["budget"], dom_id="budget-saved", width=COMPARE_WIDTH
        )
    result["override_used"] = [] if comparing else _override_rows(override)
    return result


def _run_policy(
    args: dict[str, Any], envelope: dict[str, Any], *, override: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The effective policy a recall just ran under, read again (the envelope has only its
    hash; a decision's failing value needs the policy's side too). None if it has changed
    since: then no value is shown rather than a wrong one."""
    try:
        effective = effective_policy_for(
            workload=args["workload"], environment=args["environment"], override=override
        )
    except PolicyError:
        return None
    return effective.policy if effective.policy_hash == envelope["effectivePolicyHash"] else None


def _override_rows(override: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(API name, label, value in words)`` per overridden axis."""
    return [
        (name, labels.axis_label(name), labels.axis_value(name, value))
        for name, value in override.items()
        if name in AXES
    ]


def _funnel(counts: dict[str, int]) -> list[dict[str, Any]]:
    return [{"key": key, "hint": hint, "n": counts.get(key, 0)} for key, hint in FUNNEL_STEPS]


def _budget_rows(budget: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"kind": kind, **alloc, "summary": kind_summary(kind, alloc)}
        for kind, alloc in budget["perKind"].items()
    ]


def _result_context(
    envelope: dict[str, Any], workspace: Workspace, *, policy: dict[str, Any] | None
) -> dict[str, Any]:
    """``policy``: the effective policy the recall ran under (filtered rows show their failing
    value against it); None when the decisions are not shown."""
    diagnostics = envelope["diagnostics"]
    decisions = (
        sandbox_decisions(workspace=workspace, envelope=envelope, policy=policy)
        if diagnostics["verbosity"] == "full"
        else None
    )
    reasons = [
        {"code": code, "words": decision_words(code), "n": n}
        for code, n in diagnostics.get("reasons", {}).items()
    ]
    event_id = assembled_event_id(workspace=workspace, envelope_id=envelope["envelopeId"])
    return {
        "envelope": envelope,
        "funnel": _funnel(diagnostics["counts"]),
        "budget_svg": budget_bar(envelope["budget"], dom_id="budget-saved"),
        "budget_rows": _budget_rows(envelope["budget"]),
        "decisions": decisions,
        "reasons": reasons,
        "fingerprints": [(term, label, envelope[term]) for term, label in FINGERPRINTS],
        "verbosity": diagnostics["verbosity"],
        "warnings": diagnostics.get("warnings", []),
        "event_id": event_id,
        "event_url": reverse("audit:event", args=[workspace.slug, event_id]) if event_id else None,
    }


def _compare_context(
    envelope: dict[str, Any],
    saved: RecallPreview,
    draft: RecallPreview,
    *,
    override: dict[str, Any],
) -> dict[str, Any]:
    """Which memories enter or leave the context under the draft override."""
    saved_state = {e["id"]: "included" for e in envelope["entries"]}
    saved_state.update({t["id"]: "truncated" for t in envelope["truncatedRefs"]})
    draft_state = {pk: "included" for pk in draft.included}
    draft_state.update({pk: "truncated" for pk in draft.truncated})
    meta: dict[str, dict[str, Any]] = {}
    for entry in envelope["entries"] + envelope["truncatedRefs"]:
        meta[entry["id"]] = entry
    for pk, row in draft.rows.items():
        meta.setdefault(
            pk,
            {
                "segmentKind": row.segment_kind,
                "memoryType": row.memory_type,
                "tokens": row.token_count,
                # Content only when it entered the draft context (it passed the draft policy).
                **({"content": row.content} if pk in draft_state else {}),
            },
        )
    rows = []
    for pk in list(saved_state) + [pk for pk in draft_state if pk not in saved_state]:
        saved_code = saved_state.get(pk) or saved.codes.get(pk, "not_selected")
        draft_code = draft_state.get(pk) or draft.codes.get(pk, "not_selected")
        change = (
            "stays"
            if pk in saved_state and pk in draft_state
            else ("leaves" if pk in saved_state else "enters")
        )
        rows.append(
            {
                "id": pk,
                "change": change,
                "saved_words": decision_words(saved_code),
                "draft_words": decision_words(draft_code),
                "saved_code": saved_code,
                "draft_code": draft_code,
                **meta.get(pk, {}),
            }
        )
    order = {"enters": 0, "leaves": 1, "stays": 2}
    rows.sort(key=lambda r: order[r["change"]])
    return {
        "rows": rows,
        "entering": sum(1 for r in rows if r["change"] == "enters"),
        "leaving": sum(1 for r in rows if r["change"] == "leaves"),
        "override": _override_rows(override),
        "draft": draft,
        "draft_funnel": _funnel(draft.counts),
        "draft_budget_svg": budget_bar(draft.budget, dom_id="budget-draft", width=COMPARE_WIDTH),
        "draft_budget_rows": _budget_rows(draft.budget),
        "same_policy": draft.policy_hash == saved.policy_hash
        and draft.budget_hash == saved.budget_hash,
    }


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
        initial["config"] = layout_services.layout_config_yaml(config)
    if workload is not None and current is not None:
        config = current.config
        initial.update(
            workload=str(workload.pk),
            context_window=config.context_window,
            output_buffer=config.output_buffer,
            budget_ratio=config.supporting_context.budget_ratio,
            config=layout_services.layout_config_yaml(config),
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
            data["config"] = layout_services.layout_config_yaml(current.config)
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
    try:
        preview = layout_services.layout_preview(request=form.layout_request(config))
    except LayoutRequestError as exc:
        form.add_planner_errors(exc)
        return {}
    return _layout_outcome(form, preview, config)


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


def _kept_rows(
    form: LayoutForm, result: LayoutResult, config: LayoutConfig
) -> list[dict[str, Any]]:
    """What the prompt keeps of what was given, part by part (only parts that were given)."""
    data = form.cleaned_data
    rows = [
        {
            "part": "Current-session turns",
            "given": len(data["history"]),
            "kept": len(result.history),
        },
        {
            "part": "Prior-session turns",
            "given": len(data["prior_history"]),
            "kept": len(result.prior_session_history),
        },
    ]
    sections = list(config.supporting_context.section_priority)
    sections += [name for name in data["supporting"] if name not in sections]
    for name in sections:
        given = len(data["supporting"].get(name, []))
        if given:
            kept = len(result.supporting.get(name, []))
            rows.append({"part": name.replace("_", " ").capitalize(), "given": given, "kept": kept})
    return [row for row in rows if row["given"]]


def _layout_outcome(
    form: LayoutForm, preview: layout_services.LayoutPreview, config: LayoutConfig
) -> dict[str, Any]:
    result = preview.result
    data = form.cleaned_data
    ratio = data["budget_ratio"]
    if ratio is None:
        ratio = config.supporting_context.budget_ratio
    output_buffer = data["output_buffer"]
    if output_buffer is None:
        output_buffer = config.output_buffer
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
        "ratio_text": _ratio_text(ratio),
        "output_buffer": output_buffer,
        "system_prompt_tokens": data["system_prompt_tokens"],
        "tool_schema_tokens": data["tool_schema_tokens"],
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
        "kept_rows": _kept_rows(form, result, config),
        "filtered": [
            (FILTER_WORDS.get(reason, reason), count)
            for reason, count in result.filtered.items()
            if count
        ],
        "warnings": result.warnings,
    }


# --- memory browser ----------------------------------------------------------------------------


def _memories_url(slug: str, **params: str) -> str:
    query = urlencode({k: v for k, v in params.items() if v})
    base = reverse("recall:memories", args=[slug])
    return f"{base}?{query}" if query else base


def _memory_or_404(workspace: Workspace, memory_id: int) -> MemoryRecord:
    memory = (
        MemoryRecord.objects.select_related("actor", "workspace")
        .defer("embedding")
        .filter(pk=memory_id, workspace=workspace)
        .first()
    )
    if memory is None:
        raise Http404("No such memory.")
    return memory


FILTER_LABELS = {"createdAfter": "Created on or after", "createdBefore": "Created on or before"}


def _filter_form(filterset: MemoryFilterSet) -> forms.Form:
    """The shared filterset's form, with labels and empty choices worded for people."""
    form = filterset.form
    for name, field in form.fields.items():
        if name in FILTER_LABELS:
            field.label = FILTER_LABELS[name]
            field.widget.attrs["placeholder"] = "2025-01-31 or 2025-01-31T09:00Z"
        elif isinstance(field, forms.ChoiceField):
            choices: list[Any] = list(cast(Iterable[Any], field.choices))
            field.choices = [("", "any"), *[c for c in choices if c[0] != ""]]
    return form


class RecallScope:
    """The workload and environment the "recallable?" column is judged under."""

    def __init__(self, workspace: Workspace, params: Any) -> None:
        self.workloads = _workloads(workspace)
        self.environments = _environments(workspace)
        self.workload = _pick_workload(self.workloads, params.get("workload"))
        self.environment = _pick_environment(self.environments, params.get("environment"))
        self.error = ""
        self.policy: dict[str, Any] | None = None
        if self.workload is not None:
            try:
                self.policy = effective_policy_for(
                    workload=self.workload, environment=self.environment
                ).policy
            except PolicyError as exc:
                self.error = exc.message

    def params(self) -> dict[str, str]:
        return {
            "workload": str(self.workload.pk) if self.workload else "",
            "environment": self.environment,
        }


def _row_context(access: PageAccess, scope: RecallScope, next_url: str) -> dict[str, Any]:
    return {
        **access.context(),
        "scope": scope,
        "show_recall": scope.policy is not None,
        "columns": 6 + (scope.policy is not None) + access.can_edit,
        "next_url": next_url,
        "row_qs": urlencode({**scope.params(), "next": next_url}),
    }


@login_required
@require_GET
def memories(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    scope = RecallScope(workspace, request.GET)
    actor_id = request.GET.get("actor", "").strip()
    actor: Actor | None = None
    actor_error = ""
    if actor_id:
        try:
            services.actor_parse(actor_id)
        except ValidationFailed as exc:
            actor_error = exc.details["fields"]["actorId"]
        else:
            actor = actor_lookup(workspace=workspace, actor_id=actor_id)
            if actor is None:
                actor_error = f"No actor {actor_id} in this workspace."
    filters = _filter_form(MemoryFilterSet(request.GET))
    page = None
    list_error = ""
    if actor is not None:
        try:
            rows = memory_rows(actor=actor, filters=request.GET, policy=scope.policy)
        except ValidationFailed as exc:
            list_error = exc.message
        else:
            page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
            for memory in page:
                memory.actor = actor
                memory.recall_words = recall_reason(memory)  # type: ignore[attr-defined]
    actors = (
        []
        if actor is not None
        else list(
            Actor.objects.filter(workspace=workspace)
            .annotate(memory_count=Count("memories"))
            .order_by("kind", "name")[:50]
        )
    )
    context = {
        **_row_context(access, scope, request.get_full_path()),
        "actor_id": actor_id,
        "actor": actor,
        "actor_error": actor_error,
        "actors": actors,
        "filter_form": filters,
        "page": page,
        "list_error": list_error,
        "import_form": MemoryImportForm(initial={"actor": actor_id}),
    }
    if request.htmx:
        return render(request, "recall/_memory_browser.html", context)
    context["actor_names"] = actor_suggestions(workspace=workspace, q="")
    return render(request, "recall/memories.html", context)


def _row_response(
    request: HttpRequest,
    access: PageAccess,
    memory: MemoryRecord,
    params: Any,
    *,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The row as it is now; ``error`` says why a change to it was refused."""
    scope = RecallScope(access.workspace, params)
    row = memory_rows(actor=memory.actor, filters={}, policy=scope.policy).get(pk=memory.pk)
    row.actor = memory.actor
    row.recall_words = recall_reason(row)  # type: ignore[attr-defined]
    next_url = safe_next(request, _memories_url(access.workspace.slug, actor=str(memory.actor)))
    context = {**_row_context(access, scope, next_url), "m": row, "row_error": error}
    return render(request, "recall/_memory_row.html", context, status=status)


@login_required
@require_GET
def memory_detail(request: HttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """One memory: its fields, and where it stands in its lifecycle (tier, decay score,
    when it turns stale, promotion score and its signals)."""
    access = workspace_page(request, slug)
    memory = _memory_or_404(access.workspace, memory_id)
    state = memory_lifecycle(memory=memory)
    items = (
        MaintenanceItem.objects.filter(memory_id=memory.pk, run__workspace=access.workspace)
        .exclude(run__mode="preview")
        .select_related("run")
        .order_by("-run_id")[:10]
    )
    context = {
        **access.context(),
        "m": memory,
        "state": state,
        "weights": state.settings["promotionWeights"],
        "runs": items,
        "list_url": _memories_url(slug, actor=str(memory.actor)),
        "injections": memory_injection_summary(workspace=access.workspace, memory_id=memory.pk),
    }
    return render(request, "recall/memory.html", context)


@login_required
@require_GET
def memory_row(request: HtmxHttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """One row of the list (what "Cancel" on an edit row swaps back in)."""
    access = workspace_page(request, slug)
    memory = _memory_or_404(access.workspace, memory_id)
    if not request.htmx:
        return redirect(safe_next(request, _memories_url(slug, actor=str(memory.actor))))
    return _row_response(request, access, memory, request.GET)


@login_required
@require_POST
def memory_status(request: HtmxHttpRequest, slug: str, memory_id: int) -> HttpResponse:
    access = workspace_page(request, slug, required=Role.EDITOR)
    memory = _memory_or_404(access.workspace, memory_id)
    targets = {"suppress": LifecycleStatus.SUPPRESSED, "restore": LifecycleStatus.ACTIVE}
    status = targets.get(request.POST.get("action", ""))
    if status is None:
        return HttpResponseBadRequest("Unknown action: use suppress or restore.")
    action = "suppress" if status == LifecycleStatus.SUPPRESSED else "restore"
    next_url = safe_next(request, _memories_url(slug, actor=str(memory.actor)))
    try:
        services.memory_set_status(memory=memory, status=status, author=access.caller.label)
    except DomainError as exc:
        # e.g. restoring a stale memory: say why next to the row, change nothing.
        error = f"Could not {action} memory {memory.pk}: {exc.message}"
        if request.htmx:  # base.html has htmx swap 409 and 422 responses
            code = exc.status if exc.status == 409 else UNPROCESSABLE
            return _row_response(request, access, memory, request.POST, error=error, status=code)
        messages.error(request, error)
        return redirect(next_url)
    if request.htmx:
        return _row_response(request, access, memory, request.POST)
    verb = "Suppressed" if status == LifecycleStatus.SUPPRESSED else "Restored"
    messages.success(request, f"{verb} memory {memory.pk}.")
    return redirect(next_url)


@login_required
@require_http_methods(["GET", "POST"])
def memory_edit(request: HtmxHttpRequest, slug: str, memory_id: int) -> HttpResponse:
    access = workspace_page(request, slug, required=Role.EDITOR)
    memory = _memory_or_404(access.workspace, memory_id)
    form = MemoryEditForm(request.POST if request.method == "POST" else None, memory=memory)
    params = request.POST if request.method == "POST" else request.GET
    next_url = safe_next(request, _memories_url(slug, actor=str(memory.actor)))
    if form.is_bound and form.is_valid():
        changes = form.changes()
        if changes:
            services.memory_update(memory=memory, changes=changes, author=access.caller.label)
        if request.htmx:
            return _row_response(request, access, memory, params)
        messages.success(request, f"Saved memory {memory.pk}.")
        return redirect(next_url)
    scope = RecallScope(access.workspace, params)
    context = {**_row_context(access, scope, next_url), "m": memory, "form": form}
    template = "recall/_memory_edit_row.html" if request.htmx else "recall/memory_edit.html"
    return render(request, template, context)


@login_required
@require_http_methods(["GET", "POST"])
def memory_import(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Bulk import from JSON Lines: every line validated first, then all or nothing."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    workspace = access.workspace
    posting = request.method == "POST"
    form = MemoryImportForm(
        request.POST if posting else None,
        request.FILES if posting else None,
        initial={"actor": request.GET.get("actor", "")},
    )
    report = []
    imported: dict[str, Any] | None = None
    if posting and form.is_valid():
        actor_id = form.cleaned_data["actor"].strip() or None
        try:
            if actor_id is not None:
                services.actor_parse(actor_id)
            items, errors = parse_jsonl(form.cleaned_data["file"].read())
            for error in errors:
                if error.line == 0:
                    form.add_error("file", error.message)
            report = [error for error in errors if error.line]
            if not errors:
                rows = services.memory_import(
                    workspace=workspace, actor_id=actor_id, items=items, author=access.caller.label
                )
                actors = sorted({str(row.actor) for row in rows})
                imported = {
                    "count": len(rows),
                    "actor": actors[0] if len(actors) == 1 else "",
                    "actors": ", ".join(actors),
                }
        except DomainError as exc:
            add_domain_error(form, exc)
    context = {
        **access.context(),
        "import_form": form,
        "report": report,
        "report_lines": len({error.line for error in report}),
        "imported": imported,
        "imported_url": _memories_url(slug, actor=imported["actor"]) if imported else "",
    }
    if request.htmx:
        response = render(request, "recall/_import_panel.html", context)
        if imported:
            response["HX-Trigger"] = "memoriesChanged"
        return response
    if imported:
        messages.success(
            request, f"Imported {imported['count']} memories for {imported['actors']}."
        )
        return redirect(str(context["imported_url"]))
    context["actor_names"] = actor_suggestions(workspace=workspace, q="")
    return render(request, "recall/memory_import.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def actor_erase(request: HttpRequest, slug: str) -> HttpResponse:
    """Erase an actor (a data-subject request): confirm with the count (GET), erase (POST).
    Operators only."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    actor_id = (request.POST if request.method == "POST" else request.GET).get("actor", "")
    try:
        actor, count = erasure.actor_erase_preview(workspace=access.workspace, actor_id=actor_id)
    except DomainError as exc:
        raise Http404(exc.message) from None
    error = ""
    if request.method == "POST" and actor.erased_at is None:
        typed = request.POST.get("confirm", "").strip()
        if typed != str(count):
            error = f"Type {count}, the number of memories to erase, to confirm."
        else:
            try:
                done = erasure.actor_erase(
                    workspace=access.workspace,
                    actor_id=actor.external_id,
                    author=access.caller.label,
                    expected_count=count,
                )
            except DomainError as exc:
                error = exc.message
            else:
                messages.success(
                    request,
                    f"Erased {actor.external_id}: {done.count} memor"
                    f"{'y' if done.count == 1 else 'ies'} deleted"
                    + (
                        f", {done.archive_lines} archived lines removed"
                        if done.archive_lines
                        else ""
                    )
                    + f" (audit event #{done.event_id}).",
                )
                return redirect(_memories_url(slug, actor=actor.external_id))
    context = {
        **access.context(),
        "actor": actor,
        "count": count,
        "error": error,
        "list_url": _memories_url(slug, actor=actor.external_id),
    }
    return render(request, "recall/actor_erase.html", context, status=422 if error else 200)


@login_required
@require_http_methods(["GET", "POST"])
def event_replay(request: HttpRequest, slug: str, event_id: int) -> HttpResponse:
    """Run a context.assembled event's recall again now (recording nothing) and show then
    versus now. GET asks for the query when the workspace does not store it; editors up."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    event = AuditEvent.objects.filter(workspace=access.workspace, pk=event_id).first()
    if event is None:
        raise Http404("No such event.")
    payload = event.payload if isinstance(event.payload, dict) else {}
    stored = isinstance(payload.get("query"), str)
    result = None
    error = ""
    query = request.POST.get("query", "") if request.method == "POST" else ""
    if request.method == "POST" or stored:
        try:
            result = replay.replay_event(
                workspace=access.workspace, event_id=event.pk, query=query or None
            )
        except DomainError as exc:
            error = exc.message
            if exc.details.get("fields", {}).get("query"):
                error = f"{exc.message} {exc.details['fields']['query']}"
    context = {
        **access.context(),
        "event": event,
        "payload": payload,
        "stored": stored,
        "query": query,
        "result": result,
        "error": error,
    }
    status = 200 if not error or request.method == "GET" else 422
    return render(request, "recall/replay.html", context, status=status)
