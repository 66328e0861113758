"""The memory browser: list, filter, open, edit, suppress and import memories.

Writes go through ``recall.services``; reads through ``recall.page_selectors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.selectors import memory_injection_summary
from policies.algebra import PolicyError
from policies.axes import PolicyDocument
from policies.selectors import effective_policy_for
from portal.errors import DomainError, ValidationFailed
from portal.form_errors import add_domain_error
from portal.http import HtmxHttpRequest
from portal.models import Role, Workspace
from portal.pages import PageAccess, panels, safe_next, workspace_page
from recall import services
from recall.filtersets import MemoryFilterSet
from recall.forms.memories import MemoryEditForm, MemoryImportForm
from recall.hits import with_hits
from recall.jsonl import parse_jsonl
from recall.models import Actor, LifecycleStatus, MemoryRecord
from recall.page_selectors import (
    actor_suggestions,
    memory_rows,
    recall_reason,
)
from recall.selectors import actor_lookup
from recall.views import MEMORY_AFTER, MEMORY_SIDE
from recall.views.picks import (
    UNPROCESSABLE,
    environment_slugs,
    live_workloads,
    pick_environment,
    pick_workload,
)

PAGE_SIZE = 25


# --- memory browser ----------------------------------------------------------------------------


def memories_url(slug: str, **params: str) -> str:
    query = urlencode({k: v for k, v in params.items() if v})
    base = reverse("recall:memories", args=[slug])
    return f"{base}?{query}" if query else base


def _memory_or_404(workspace: Workspace, memory_id: int) -> MemoryRecord:
    memory = (
        with_hits(MemoryRecord.objects.select_related("actor", "workspace"))
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
        self.workloads = live_workloads(workspace)
        self.environments = environment_slugs(workspace)
        self.workload = pick_workload(self.workloads, params.get("workload"))
        self.environment = pick_environment(self.environments, params.get("environment"))
        self.error = ""
        self.policy: PolicyDocument | None = None
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
                memory.recall_words = recall_reason(memory, scope.policy)  # type: ignore[attr-defined]
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
    row.recall_words = recall_reason(row, scope.policy)  # type: ignore[attr-defined]
    next_url = safe_next(request, memories_url(access.workspace.slug, actor=str(memory.actor)))
    context = {**_row_context(access, scope, next_url), "m": row, "row_error": error}
    return render(request, "recall/_memory_row.html", context, status=status)


@login_required
@require_GET
def memory_detail(request: HttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """One memory: its fields, and where it stands in its lifecycle (tier, decay score,
    when it turns stale, promotion score and its signals)."""
    access = workspace_page(request, slug)
    memory = _memory_or_404(access.workspace, memory_id)
    context = {
        **access.context(),
        "m": memory,
        # The lifecycle card and the runs that touched it come from maintenance, a floor up.
        "side_panels": panels(MEMORY_SIDE, access, memory),
        "panels": panels(MEMORY_AFTER, access, memory),
        "list_url": memories_url(slug, actor=str(memory.actor)),
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
        return redirect(safe_next(request, memories_url(slug, actor=str(memory.actor))))
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
    next_url = safe_next(request, memories_url(slug, actor=str(memory.actor)))
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
    next_url = safe_next(request, memories_url(slug, actor=str(memory.actor)))
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
            add_domain_error(form, exc, aliases=form.error_aliases)
    context = {
        **access.context(),
        "import_form": form,
        "report": report,
        "report_lines": len({error.line for error in report}),
        "imported": imported,
        "imported_url": memories_url(slug, actor=imported["actor"]) if imported else "",
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
