"""Workspace settings switched from other pages: whether assembled events keep the query."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from policies import services
from portal.models import Role
from portal.pages import workspace_page


@login_required
@require_POST
def query_storage(request: HttpRequest, slug: str) -> HttpResponse:
    """Switch whether assembled events keep the query text (the audit trail's page offers
    it): operators only, audited."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    choice = request.POST.get("store")
    if choice not in ("on", "off"):
        messages.error(request, "Choose to store queries or not.")
    else:
        services.workspace_store_queries_set(
            workspace=access.workspace, enabled=choice == "on", author=access.caller.label
        )
        messages.success(
            request,
            "Recall queries are stored from now on."
            if choice == "on"
            else "Recall queries are no longer stored (those already stored stay).",
        )
    return redirect("audit:events", slug=slug)
