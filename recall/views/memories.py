"""The memory browser: list, filter, open, edit, suppress and import memories.

Writes go through ``recall.services``; reads through ``recall.page_selectors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
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
from recall.forms.memories import MemoryEditForm, MemoryImportForm, MemoryStatusForm
from recall.hits import with_hits
from recall.jsonl import parse_jsonl
from recall.models import Actor, LifecycleStatus, MemoryRecord
from recall.page_selectors import (
    actor_suggestions,
    memory_codes,
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
    """The workload and environment "recallable?" is judged under: the one asked for, else the
    one this user chose last in this workspace, else the first workload (by name) in prod.

    The choice is remembered in the session, not in a model: it is a way of looking, not a
    setting of the workspace, needs no migration or audit event, and a user who signs in
    again starts from the first workload, named on the page, with the chooser beside it.
    """

    SESSION_KEY = "recall.scope"

    def __init__(self, workspace: Workspace, params: Any, session: Any = None) -> None:
        self.workspace = workspace
        self.workloads = live_workloads(workspace)
        self.environments = environment_slugs(workspace)
        remembered = self._remembered(session)
        asked = params.get("workload") or ""
        wanted = asked or remembered.get("workload")
        self.workload = pick_workload(self.workloads, wanted)
        self.environment = pick_environment(
            self.environments, params.get("environment") or remembered.get("environment")
        )
        # How this workload came to be judged for, which the page says.
        self.source = (
            "chosen"
            if asked and self.workload is not None and str(self.workload.pk) == asked
            else "remembered"
            if wanted and self.workload is not None and str(self.workload.pk) == wanted
            else "first"
        )
        self.error = ""
        self.policy: PolicyDocument | None = None
        if self.workload is not None:
            try:
                self.policy = effective_policy_for(
                    workload=self.workload, environment=self.environment
                ).policy
            except PolicyError as exc:
                self.error = exc.message

    def _remembered(self, session: Any) -> dict[str, str]:
        if session is None:
            return {}
        choices = session.get(self.SESSION_KEY)
        mine = choices.get(str(self.workspace.pk)) if isinstance(choices, dict) else None
        return mine if isinstance(mine, dict) else {}

    def remember(self, session: Any) -> None:
        """Keep a choice made on the page for this user's next visit (only a chosen one:
        a default stays a default)."""
        if self.source != "chosen" or self.workload is None:
            return
        choices = session.get(self.SESSION_KEY)
        choices = dict(choices) if isinstance(choices, dict) else {}
        mine = {"workload": str(self.workload.pk), "environment": self.environment}
        if choices.get(str(self.workspace.pk)) != mine:
            choices[str(self.workspace.pk)] = mine
            session[self.SESSION_KEY] = choices

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
    """The workspace's memories, newest first, narrowed by an actor (optional) and filters,
    the content search among them, each judged recallable or not."""
    access = workspace_page(request, slug)
    workspace = access.workspace
    scope = RecallScope(workspace, request.GET, request.session)
    scope.remember(request.session)
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
    if not actor_error:
        try:
            rows = memory_rows(
                workspace=workspace, actor=actor, filters=request.GET, policy=scope.policy
            )
        except ValidationFailed as exc:
            list_error = exc.message
        else:
            page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
            for memory in page:
                memory.recall_words = recall_reason(memory, scope.policy)  # type: ignore[attr-defined]
    context = {
        **_row_context(access, scope, request.get_full_path()),
        "actor_id": actor_id,
        "actor": actor,
        "actor_error": actor_error,
        "filter_form": filters,
        "query": request.GET.get("q", ""),
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
    row = memory_rows(
        workspace=access.workspace, actor=memory.actor, filters={}, policy=scope.policy
    ).get(pk=memory.pk)
    row.actor = memory.actor
    row.recall_words = recall_reason(row, scope.policy)  # type: ignore[attr-defined]
    next_url = safe_next(request, memories_url(access.workspace.slug, actor=str(memory.actor)))
    context = {**_row_context(access, scope, next_url), "m": row, "row_error": error}
    return render(request, "recall/_memory_row.html", context, status=status)


def _verdict(workspace: Workspace, memory: MemoryRecord, scope: RecallScope) -> dict[str, Any]:
    """Whether recall may carry the memory under ``scope``, and the rule it breaks, in the
    browser's words (the same recall filter)."""
    if scope.policy is None:
        return {}
    row, code = memory_codes(
        workspace=workspace, ids=[memory.pk], policy=scope.policy, now=timezone.now()
    )[memory.pk]
    return {"ok": code == "passes_policy", "words": recall_reason(row, scope.policy)}


def _state_context(
    request: HttpRequest,
    access: PageAccess,
    memory: MemoryRecord,
    scope: RecallScope,
    form: MemoryStatusForm | None = None,
) -> dict[str, Any]:
    """The memory page's state card: status, the verdict, and the actions."""
    return {
        **access.context(),
        "m": memory,
        "scope": scope,
        "show_recall": scope.policy is not None,
        "scope_chooser_here": True,
        "verdict": _verdict(access.workspace, memory, scope),
        "status_form": form or MemoryStatusForm(),
        "reactivatable": memory.lifecycle_status in services.REACTIVATABLE,
        # suppressed: a restore gives back a status an operator may then reactivate
        "restores_reactivatable": memory.suppressed_from in services.REACTIVATABLE,
    }


def _memory_page(
    request: HttpRequest,
    access: PageAccess,
    memory: MemoryRecord,
    scope: RecallScope,
    *,
    form: MemoryStatusForm | None = None,
    outcome: StatusOutcome | None = None,
) -> HttpResponse:
    injections = memory_injection_summary(workspace=access.workspace, memory_id=memory.pk)
    outcome = outcome or StatusOutcome()
    context = {
        **_state_context(request, access, memory, scope, form),
        "outcome": outcome,
        # The lifecycle card and the runs that touched it come from maintenance, a floor up.
        "side_panels": panels(MEMORY_SIDE, access, memory),
        "panels": panels(MEMORY_AFTER, access, memory),
        "list_url": memories_url(access.workspace.slug, actor=str(memory.actor)),
        "injections": injections,
        # Hits carried in by an import (an archive's hitCount, the demo's earlier system):
        # every entry in the trail is a hit, so the rest were counted before.
        "hits_before": max(memory.hits - injections.entries, 0),
    }
    return render(request, "recall/memory.html", context, status=outcome.status)


@login_required
@require_GET
def memory_detail(request: HttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """One memory: whether it is recallable (for the workload chosen), what an editor may do
    to it, its fields, and where it stands in its lifecycle (tier, decay score, when it turns
    stale, promotion score and its signals)."""
    access = workspace_page(request, slug)
    memory = _memory_or_404(access.workspace, memory_id)
    scope = RecallScope(access.workspace, request.GET, request.session)
    scope.remember(request.session)
    return _memory_page(request, access, memory, scope)


@dataclass(frozen=True)
class StatusOutcome:
    done: str = ""  # what was done, in words
    error: str = ""  # why nothing was
    status: int = 200


def _status_apply(
    access: PageAccess, memory: MemoryRecord, form: MemoryStatusForm
) -> StatusOutcome:
    """Carry out a status form through the services: suppress or restore (editors),
    reactivate (operators)."""
    if not form.is_valid():
        if "action" in form.errors:
            raise BadRequest("Unknown action: use suppress, restore or reactivate.")
        problem = " ".join(str(e) for e in form.errors.get("reason", []))
        return StatusOutcome(error=problem, status=UNPROCESSABLE)
    action = form.cleaned_data["action"]
    author = access.caller.label
    try:
        if action == "reactivate":
            if not access.can_operate:
                raise PermissionDenied("Reactivating a memory needs the operator role.")
            services.memory_reactivate(memory=memory, author=author)
        else:
            status = LifecycleStatus.SUPPRESSED if action == "suppress" else LifecycleStatus.ACTIVE
            memory = services.memory_set_status(
                memory=memory, status=status, author=author, reason=form.cleaned_data["reason"]
            )
    except DomainError as exc:
        # e.g. restoring a stale memory: say why, change nothing.
        code = exc.status if exc.status == 409 else UNPROCESSABLE
        return StatusOutcome(
            error=f"Could not {action} memory {memory.pk}: {exc.message}", status=code
        )
    verb = {"suppress": "Suppressed", "restore": "Restored", "reactivate": "Reactivated"}
    now = memory.lifecycle_status
    if action == "restore" and now != LifecycleStatus.ACTIVE:
        operator = " (an operator may reactivate it)" if now in services.REACTIVATABLE else ""
        return StatusOutcome(
            done=f"Restored memory {memory.pk}: it is {now} again, as it was when it was"
            f" suppressed{operator}."
        )
    return StatusOutcome(done=f"{verb[action]} memory {memory.pk}.")


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
@require_http_methods(["GET", "POST"])
def memory_status(request: HtmxHttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """A browser row's suppress or restore, the row swapped back in. GET: the row that asks
    for the suppression's reason (as the edit row asks for the fields); without JavaScript,
    the memory page, whose card asks for it."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    memory = _memory_or_404(access.workspace, memory_id)
    params = request.POST if request.method == "POST" else request.GET
    next_url = safe_next(request, memories_url(slug, actor=str(memory.actor)))
    if request.method == "GET":
        if not request.htmx:
            return redirect(reverse("recall:memory", args=[slug, memory.pk]))
        return _suppress_row(request, access, memory, params, MemoryStatusForm(), next_url)
    form = MemoryStatusForm(request.POST)
    outcome = _status_apply(access, memory, form)
    if request.htmx:  # base.html has htmx swap 409 and 422 responses
        memory = _memory_or_404(access.workspace, memory_id)
        if "reason" in form.errors:  # asked again, with why
            return _suppress_row(request, access, memory, params, form, next_url, status=422)
        return _row_response(
            request, access, memory, params, error=outcome.error, status=outcome.status
        )
    if outcome.error:
        messages.error(request, outcome.error)
    else:
        messages.success(request, outcome.done)
    return redirect(next_url)


def _suppress_row(
    request: HttpRequest,
    access: PageAccess,
    memory: MemoryRecord,
    params: Any,
    form: MemoryStatusForm,
    next_url: str,
    *,
    status: int = 200,
) -> HttpResponse:
    scope = RecallScope(access.workspace, params)
    context = {**_row_context(access, scope, next_url), "m": memory, "form": form}
    return render(request, "recall/_memory_suppress_row.html", context, status=status)


@login_required
@require_POST
def memory_state(request: HtmxHttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """The memory page's actions: the page comes back with what was done or why not (htmx
    swaps its cards in place: the status, the verdict and the lifecycle all change)."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    memory = _memory_or_404(access.workspace, memory_id)
    form = MemoryStatusForm(request.POST)
    outcome = _status_apply(access, memory, form)
    if not request.htmx:
        if outcome.error:
            messages.error(request, outcome.error)
        else:
            messages.success(request, outcome.done)
        return redirect(reverse("recall:memory", args=[slug, memory.pk]))
    memory = _memory_or_404(access.workspace, memory_id)
    # Judged as the page was: the workload asked for in the address, else the one remembered.
    scope = RecallScope(access.workspace, request.GET, request.session)
    return _memory_page(
        request, access, memory, scope, form=form if outcome.error else None, outcome=outcome
    )


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
