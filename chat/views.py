"""The Sessions pages: the workspace's sessions, one session's turns with their budget
diagnostics and utilisation chart, and (operators) a turn's formatted prompt.

Every member reads sessions without their content; the prompt, which holds the actor's
memories and words, is for operators (``chat.access``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chat.access import Action, may, sessions_page
from chat.models import Session, SessionStatus, TurnContext
from chat.selectors import session_contexts, session_list
from chat.svg import Reading, utilisation_chart
from portal.errors import ValidationFailed
from portal.http import HtmxHttpRequest
from portal.ids import numeric_id
from portal.models import Workspace

PAGE_SIZE = 50
FILTER_FIELDS = ("actor", "workload", "environment", "status")


@login_required
@require_GET
def sessions(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = sessions_page(request, slug, Action.READ)
    workspace = access.workspace
    errors: dict[str, str] = {}
    try:
        rows = session_list(workspace=workspace, filters=request.GET)
    except ValidationFailed as exc:
        errors = exc.details["fields"]
        rows = Session.objects.none()
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    filters = {name: request.GET.get(name, "") for name in FILTER_FIELDS}
    query = urlencode({name: value for name, value in filters.items() if value})
    context = {
        **access.context(),
        "page": page,
        "filters": filters,
        "filter_errors": errors,
        "workloads": list(workspace.workloads.order_by("name").values_list("id", "name")),
        "environments": list(workspace.environments.values_list("slug", flat=True)),
        "statuses": SessionStatus.values,
        "page_prefix": f"?{query}&page=" if query else "?page=",
    }
    return render(request, "chat/sessions.html", context, status=400 if errors else 200)


def _session(workspace: Workspace, session_id: Any) -> Session:
    pk = numeric_id(session_id)
    found = (
        Session.objects.select_related("actor", "workload").filter(workspace=workspace, pk=pk)
        if pk is not None
        else Session.objects.none()
    ).first()
    if found is None:
        raise Http404("No such session.")
    return found


def _stage_words(removed: dict[str, int]) -> str:
    if not removed:
        return "nothing more"
    return ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in removed.items())


def _timeline(session: Session, contexts: dict[int, TurnContext]) -> list[dict[str, Any]]:
    """Each turn, oldest first, with what its context kept and pruned (no content)."""
    rows = []
    for turn in session.turns.only("index", "role", "tokens", "created_at").order_by("index"):
        context = contexts.get(turn.index)
        row: dict[str, Any] = {"turn": turn, "context": context}
        if context is not None:
            layout = context.layout
            row["stages"] = [
                {**stage, "words": _stage_words(stage["removed"])} for stage in layout["stages"]
            ]
            row["sections"] = sorted(layout["parts"]["supporting"]["sections"].items())
        rows.append(row)
    return rows


@login_required
@require_GET
def session(request: HtmxHttpRequest, slug: str, session_id: str) -> HttpResponse:
    access = sessions_page(request, slug, Action.READ)
    found = _session(access.workspace, session_id)
    contexts = {context.turn: context for context in session_contexts(session=found)}
    readings = [
        Reading(turn, c.budget_status["utilizationPct"], c.budget_status["severity"])
        for turn, c in sorted(contexts.items())
    ]
    context = {
        **access.context(),
        "session": found,
        "chart": utilisation_chart(readings),
        "readings": readings,
        "timeline": _timeline(found, contexts),
        "can_read_prompts": may(access.role, Action.PROMPT),
    }
    return render(request, "chat/session.html", context)


@login_required
@require_GET
def turn_prompt(request: HtmxHttpRequest, slug: str, session_id: str, turn: int) -> HttpResponse:
    access = sessions_page(request, slug, Action.PROMPT)
    found = _session(access.workspace, session_id)
    context = found.contexts.filter(turn=turn).first() if 0 < turn < 2**31 else None
    if context is None:
        raise Http404("No prompt was assembled for this turn.")
    page = {**access.context(), "session": found, "context": context}
    if request.htmx:
        return render(request, "chat/_prompt.html", page)
    return render(request, "chat/prompt.html", page)
