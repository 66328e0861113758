"""The recall sandbox page: run a recall as a workload would (or under a draft), nothing recorded,
and compare the saved policy with the draft.

One URL serves the whole page and, for htmx requests, only the fragment that changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from policies import labels
from policies.algebra import PolicyError
from policies.axes import AXES, PolicyDocument
from policies.selectors import effective_policy_for, workspace_policy_current
from portal.errors import DomainError
from portal.form_errors import add_domain_error
from portal.http import HtmxHttpRequest
from portal.models import Role, Workspace
from portal.pages import PageAccess, workspace_page
from recall import assembly, services
from recall.compare import MemoryChange, RecallOutcome, recall_compare
from recall.envelope import ACTOR_UNKNOWN, FUNNEL, Budget, Counts, Envelope
from recall.forms.sandbox import FULL, SandboxForm
from recall.page_selectors import (
    WARNING_WORDS,
    DecisionRow,
    RecallPreview,
    actor_suggestions,
    decision_rows,
    decision_words,
    recall_preview,
    sandbox_decisions,
    warning_words,
)
from recall.svg import budget_bar, kind_summary
from recall.views.picks import (
    environment_slugs,
    live_workloads,
    pick_environment,
    pick_workload,
    saved_policy,
)

COMPARE_WIDTH = 560  # each side of the compare view's budget bars, in SVG user units


# The envelope's hashes in the order the result shows them, with their names in words.
Fingerprint = Literal["effectivePolicyHash", "effectiveBudgetHash", "prefixFingerprint", "digest"]
FINGERPRINTS: tuple[tuple[Fingerprint, str], ...] = (
    ("effectivePolicyHash", "Effective policy hash"),
    ("effectiveBudgetHash", "Effective budget hash"),
    ("prefixFingerprint", "Prefix fingerprint"),
    ("digest", "Digest"),
)
# What each step of the recall funnel (``FUNNEL``; labels.COUNT_LABELS names them) keeps.
FUNNEL_HINTS: dict[str, str] = {
    "candidates": "the actor's memories",
    "afterPolicy": "pass fail-closed rules and every axis",
    "afterRanking": "best scores, cut to top K",
    "afterBudgetAllocation": "entries and truncated refs",
}
assert set(FUNNEL_HINTS) == set(FUNNEL), "every step of the funnel has its hint"


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
    workloads = live_workloads(workspace)
    environments = environment_slugs(workspace)
    source = request.POST if posting else request.GET
    workload = pick_workload(workloads, source.get("workload"))
    environment = pick_environment(environments, source.get("environment"))
    floor = workspace_policy_current(workspace=workspace)
    saved = saved_policy(workload, environment)
    default_actor = source.get("actor") or next(
        iter(actor_suggestions(workspace=workspace, q="", limit=1)), ""
    )
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
        },
        # Redrawn for another workload or environment (htmx swaps only the parts that depend
        # on them), the override panel keeps the axes the user ticked as they were.
        drafted=None if posting else request.GET,
    )
    outcome: dict[str, Any] = {}
    if posting and form.is_valid():
        outcome = _sandbox_run(form, access)
        outcome["rerun_fields"] = _rerun_fields(request.POST)
    context = {
        **access.context(),
        "form": form,
        "override_axes": form.bound_axes(),
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
    if posting and request.htmx:
        # A run swaps in its result and its form's error slots only: what was typed into the
        # form while it ran stays.
        return render(request, "recall/_sandbox_run.html", context)
    template = "recall/_sandbox_body.html" if request.htmx else "recall/sandbox.html"
    return render(request, template, context)


def _rerun_fields(posted: QueryDict) -> list[tuple[str, str]]:
    """The request a run was made with, as hidden fields: "show every decision" sends it
    again as it was."""
    skip = {"csrfmiddlewaretoken", "verbosity", "compare"}
    return [(key, value) for key, values in posted.lists() if key not in skip for value in values]


def _sandbox_run(form: SandboxForm, access: PageAccess) -> dict[str, Any]:
    """Run the recall for real (one ``context.assembled`` event, marked as the sandbox's: a dry
    run that counts no hits and touches no lifecycle field); in compare mode also preview
    the saved policy and the draft override read-only. Errors go onto the form."""
    data = form.cleaned_data
    workspace = access.workspace
    override = form.override()
    args: dict[str, Any] = {
        "workspace": workspace,
        "workload": form.selected_workload(),
        "environment": data["environment"],
        "query": data["query"],
        "top_k": data["top_k"],
    }
    comparing = bool(data["compare"])
    # Compare mode shows every decision on both sides anyway.
    every_decision = data["verbosity"] == FULL and not comparing
    try:
        # A malformed id is refused on its field; an unknown one runs (an empty result).
        args["actor_id"] = services.actor_normalize(data["actor"].strip())
        previews: tuple[RecallPreview, RecallPreview] | None = None
        if comparing:
            # Both previews read the same rows the real run will (before it records hits).
            previews = (
                recall_preview(**args, override=None),
                recall_preview(**args, override=override or None),
            )
        recorded = assembly.recall_assemble(
            request=assembly.RecallRequest(
                **args,
                override=None if comparing else (override or None),
                author=access.caller.label,
                origin=assembly.SANDBOX,
                verbosity=FULL if every_decision else None,
            )
        )
        envelope, event_id = recorded.envelope, recorded.event.pk
        actor_unknown = bool(recorded.event.payload.get("actorUnknown"))
    except (PolicyError, DomainError) as exc:
        drafted = isinstance(exc, PolicyError) and bool(override)
        unplaced = add_domain_error(form, exc, aliases=form.error_aliases, fallback=not drafted)
        touched = [name for name in override if f"override_{name}" in form.errors]
        if drafted and not touched:
            # e.g. a smaller totalTokenBudget that the locked reservations no longer fit: the
            # locked axes have no fields, so what they say is told here.
            said = [
                f"{labels.axis_label(error.name)} (not relaxable): {error.message}"
                for error in unplaced
                if error.name in form.locked
            ]
            form.add_error(
                None, " ".join([f"The draft override cannot be applied: {exc.message}", *said])
            )
        return {}
    policy: PolicyDocument | None = None
    if envelope["diagnostics"]["verbosity"] == "full":  # only decisions show policy values
        policy = (
            previews[0].policy
            if previews is not None
            else _run_policy(args, envelope, override=override or None)
        )
    result = _result_context(
        envelope, event_id, workspace, policy=policy, actor_unknown=actor_unknown
    )
    result["ran_for"] = (args["workload"].name, args["environment"])
    if previews is not None:
        result["compare"] = _compare_context(
            envelope, *previews, override=override, workspace=workspace
        )
        result["budget_svg"] = budget_bar(
            envelope["budget"], dom_id="budget-saved", width=COMPARE_WIDTH
        )
    result["override_used"] = [] if comparing else labels.axis_rows(override)
    if every_decision:
        # What this workload's agents get: the policy's own diagnostics detail.
        result["policy_verbosity"] = policy["diagnosticsVerbosity"] if policy else None
    return result


def _run_policy(
    args: dict[str, Any], envelope: Envelope, *, override: dict[str, Any] | None
) -> PolicyDocument | None:
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


def _funnel(counts: Counts) -> list[dict[str, Any]]:
    return [{"key": key, "hint": FUNNEL_HINTS[key], "n": counts.get(key, 0)} for key in FUNNEL]


def _budget_rows(budget: Budget) -> list[dict[str, Any]]:
    return [
        {"kind": kind, **alloc, "summary": kind_summary(kind, alloc)}
        for kind, alloc in budget["perKind"].items()
    ]


def _result_context(
    envelope: Envelope,
    event_id: int,
    workspace: Workspace,
    *,
    policy: PolicyDocument | None,
    actor_unknown: bool,
) -> dict[str, Any]:
    """``policy``: the effective policy the recall ran under (filtered rows show their failing
    value against it); None when the decisions are not shown. ``actor_unknown``: the run was
    for an actor the workspace does not have, which the page says at every verbosity (the
    envelope's warnings are left out at ``none``)."""
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
    warnings = diagnostics.get("warnings", [])
    if actor_unknown and ACTOR_UNKNOWN not in warnings:
        warnings = [ACTOR_UNKNOWN, *warnings]
    return {
        "envelope": envelope,
        "funnel": _funnel(diagnostics["counts"]),
        "budget_svg": budget_bar(envelope["budget"], dom_id="budget-saved"),
        "budget_rows": _budget_rows(envelope["budget"]),
        "decisions": decisions,
        "reasons": reasons,
        "fingerprints": [(term, label, envelope[term]) for term, label in FINGERPRINTS],
        "verbosity": diagnostics["verbosity"],
        # A code's words with the code; a planner's sentence as it is.
        "warnings": [
            {"words": warning_words(w), "code": w if w in WARNING_WORDS else None} for w in warnings
        ],
        "event_id": event_id,
        "event_url": reverse("audit:event", args=[workspace.slug, event_id]),
    }


def _compare_context(
    envelope: Envelope,
    saved: RecallPreview,
    draft: RecallPreview,
    *,
    override: dict[str, Any],
    workspace: Workspace,
) -> dict[str, Any]:
    """Each memory's decision on both sides, as the page shows it: differences first (what
    enters or leaves the context, then other changed reasons), the rest folded. The saved side
    is the real run's envelope (its preview gives the reasons of the rest)."""
    comparison = recall_compare(
        RecallOutcome(
            included=[e["id"] for e in envelope["entries"]],
            truncated=[t["id"] for t in envelope["truncatedRefs"]],
            codes=saved.codes,
            policy_hash=saved.policy_hash,
            budget_hash=saved.budget_hash,
        ),
        RecallOutcome(
            included=draft.included,
            truncated=draft.truncated,
            codes=draft.codes,
            policy_hash=draft.policy_hash,
            budget_hash=draft.budget_hash,
        ),
    )
    # What each row shows of its memory: the envelope's view of it, else the draft's (whose
    # content may be shown: a memory listed from the draft side entered the draft context).
    meta: dict[str, Mapping[str, Any]] = {
        entry["id"]: entry for entry in envelope["entries"] + envelope["truncatedRefs"]
    }
    for pk, row in draft.rows.items():
        meta.setdefault(
            pk,
            {
                "segmentKind": row.segment_kind,
                "memoryType": row.memory_type,
                "tokens": row.token_count,
                "content": row.content if pk in draft.included else None,
            },
        )
    saved_rows = decision_rows(workspace=workspace, preview=saved)
    draft_rows = decision_rows(workspace=workspace, preview=draft)

    def side(code: str, row: DecisionRow | None) -> dict[str, str]:
        return {"code": code, "words": decision_words(code), "why": row.why if row else ""}

    def compare_row(change: MemoryChange) -> dict[str, Any]:
        decided = saved_rows.get(change.id) or draft_rows.get(change.id)
        shown = dict(meta.get(change.id, {}))
        if not shown.get("segmentKind") and decided is not None:
            shown["segmentKind"] = decided.segment_kind
        return {
            "id": change.id,
            "change": change.change,
            "differs": change.differs,
            "saved": side(change.saved_code, saved_rows.get(change.id)),
            "draft": side(change.draft_code, draft_rows.get(change.id)),
            **shown,
        }

    return {
        "rows": [compare_row(c) for c in comparison.differing],
        "alike": [compare_row(c) for c in comparison.alike],
        "entering": comparison.entering,
        "leaving": comparison.leaving,
        "override": labels.axis_rows(override),
        "draft": draft,
        "draft_funnel": _funnel(draft.counts),
        "draft_budget_svg": budget_bar(draft.budget, dom_id="budget-draft", width=COMPARE_WIDTH),
        "draft_budget_rows": _budget_rows(draft.budget),
        "same_policy": comparison.same_policy,
        "draft_verbosity": draft.policy["diagnosticsVerbosity"],
    }
