"""Replaying a recorded recall under today's state: then versus now."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from audit.models import AuditEvent
from audit.presenters import stored_query
from policies import labels
from portal.errors import DomainError
from portal.models import Role
from portal.pages import workspace_page
from recall import replay


@login_required
@require_http_methods(["GET", "POST"])
def event_replay(request: HttpRequest, slug: str, event_id: int) -> HttpResponse:
    """Run a context.assembled event's recall again now (recording nothing) and show then
    versus now. GET asks for the query when the workspace does not store it; editors up."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    event = (
        AuditEvent.objects.select_related("stored_query")
        .filter(workspace=access.workspace, pk=event_id)
        .first()
    )
    if event is None:
        raise Http404("No such event.")
    payload = event.payload if isinstance(event.payload, dict) else {}
    stored = stored_query(event) is not None
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
        "override_rows": labels.axis_rows(result.override) if result else [],
        "error": error,
    }
    status = 200 if not error or request.method == "GET" else 422
    return render(request, "recall/replay.html", context, status=status)
