from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.pages import workspace_page


@login_required
def floor(request: HttpRequest, slug: str) -> HttpResponse:
    access = workspace_page(request, slug)
    return render(request, "portal/placeholder.html", {**access.context(), "title": "Policies"})
