"""The Sessions pages: the workspace's sessions, one session's turns with their budget
diagnostics and utilisation chart, its compaction runs and "Compact now" (editors and up),
and (operators) a turn's formatted prompt and the Layout tab opened on a turn.

Every member reads sessions without their content; the prompt, which holds the actor's
memories and words, is for operators (``chat.access``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chat import services
from chat.access import Action, may, sessions_page
from chat.compaction.summarizers import service_config
from chat.context import SECTION_TITLES
from chat.events import OUTCOME_BADGES, OUTCOME_WORDS
from chat.models import CompactionRun, Session, SessionStatus, TurnContext
from chat.selectors import (
    session_compaction_runs,
    session_contexts,
    session_list,
    turn_layout_start,
)
from chat.svg import Reading, utilisation_chart
from portal.errors import DomainError, ValidationFailed
from portal.http import HtmxHttpRequest
from portal.ids import numeric_id
from portal.models import Workspace
from recall.layout.services import layout_config_current
from recall.views.layout import layout_opened

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
    turns = session.turns.only("index", "role", "tokens", "created_at", "compacted_by_id")
    for turn in turns.order_by("index"):
        context = contexts.get(turn.index)
        row: dict[str, Any] = {"turn": turn, "context": context}
        if context is not None:
            layout = context.layout
            row["stages"] = [
                {**stage, "words": _stage_words(stage["removed"])} for stage in layout["stages"]
            ]
            row["sections"] = sorted(
                (SECTION_TITLES.get(name, name), counts)
                for name, counts in layout["parts"]["supporting"]["sections"].items()
            )
        rows.append(row)
    return rows


def run_row(run: CompactionRun) -> dict[str, Any]:
    """A compaction run as the session page lists it (no content)."""
    config = service_config(run.service)
    return {
        "run": run,
        "outcome": OUTCOME_WORDS.get(run.outcome, run.outcome),
        "badge": OUTCOME_BADGES.get(run.outcome, ""),
        "service_label": config.label if config else f"{run.service} (no longer configured)",
        "over_budget": run.duration_ms is not None and run.duration_ms > run.time_budget_ms,
    }


def _compaction(access: Any, found: Session) -> dict[str, Any]:
    runs = [run_row(run) for run in session_compaction_runs(session=found)[:50]]
    enabled = layout_config_current(workload=found.workload).config.compaction.enabled
    return {
        "runs": runs,
        "pending": any(row["run"].outcome == "pending" for row in runs),
        "compaction_enabled": enabled,
        "can_compact": may(access.role, Action.WRITE) and found.status == SessionStatus.ACTIVE,
    }


@login_required
@require_GET
def session(request: HtmxHttpRequest, slug: str, session_id: str) -> HttpResponse:
    access = sessions_page(request, slug, Action.READ)
    found = _session(access.workspace, session_id)
    if request.htmx and request.htmx.target == "compaction":
        page = {**access.context(), "session": found, **_compaction(access, found)}
        return render(request, "chat/_compaction.html", page)
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
        **_compaction(access, found),
    }
    return render(request, "chat/session.html", context)


@login_required
@require_POST
def session_compact(request: HttpRequest, slug: str, session_id: str) -> HttpResponse:
    """ "Compact now" (editors and up): a manual run, as ``POST .../compact``."""
    access = sessions_page(request, slug, Action.WRITE)
    found = _session(access.workspace, session_id)
    try:
        run = services.compaction_request(session=found, author=access.caller.label)
    except DomainError as exc:
        messages.error(request, f"Nothing was compacted: {exc.message}")
    else:
        if run.finished:
            words = OUTCOME_WORDS.get(run.outcome, run.outcome)
            messages.success(request, f"Compaction run {run.pk} finished: {words}.")
        else:
            messages.success(request, f"Compaction run {run.pk} is queued.")
    return redirect(reverse("chat:session", args=[slug, found.pk]) + "#compaction")


def _context_of(found: Session, turn: int) -> TurnContext:
    context = found.contexts.filter(turn=turn).first() if 0 < turn < 2**31 else None
    if context is None:
        raise Http404("No prompt was assembled for this turn.")
    return context


@login_required
@require_GET
def turn_layout(request: HtmxHttpRequest, slug: str, session_id: str, turn: int) -> HttpResponse:
    """The Layout tab started from what the turn's layout was given ("Open in Layout": its
    messages, its recall's memories, its configuration), to edit and plan again. It shows
    turn content, so it is for operators, as the formatted prompt is."""
    access = sessions_page(request, slug, Action.PROMPT)
    found = _session(access.workspace, session_id)
    context = _context_of(found, turn)
    start = turn_layout_start(session=found, context=context)
    version = context.layout.get("configVersion")
    opened_from = {
        "title": f"turn {turn} of session #{found.pk}",
        "href": reverse("chat:session", args=[slug, found.pk]) + f"#turn-{turn}",
        "config": f"version {version}" if version is not None else "the defaults",
        "prior": bool(start.prior_history),
    }
    return layout_opened(request, access, start, opened_from=opened_from)


@login_required
@require_GET
def turn_prompt(request: HtmxHttpRequest, slug: str, session_id: str, turn: int) -> HttpResponse:
    access = sessions_page(request, slug, Action.PROMPT)
    found = _session(access.workspace, session_id)
    context = _context_of(found, turn)
    page = {**access.context(), "session": found, "context": context}
    if request.htmx:
        return render(request, "chat/_prompt.html", page)
    return render(request, "chat/prompt.html", page)
