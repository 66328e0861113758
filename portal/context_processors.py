from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from portal.access import caller_of, workspaces_for


def workspaces(request: HttpRequest) -> dict[str, Any]:
    """The workspace switcher's list, only for signed-in portal users."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"nav_workspaces": workspaces_for(caller_of(request)).only("slug", "name")}
