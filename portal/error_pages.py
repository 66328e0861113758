"""The portal's own pages for the errors a person meets: a refusal that says which role the
page needs and who in the workspace has it, and the product's 404, in DEBUG too (``make run``),
where Django would show its technical pages instead.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.models import Membership, Workspace
from portal.permissions import RANK, allows

# Set on the responses these pages make, so that the middleware that puts the product's 404
# in place of Django's technical one (DEBUG) leaves them alone.
PRODUCT_PAGE = "product_page"
# How many of the role's holders the refusal names.
HOLDERS_NAMED = 8


class RoleRequired(PermissionDenied):
    """A page needs a role the signed-in user does not have in the workspace."""

    def __init__(self, *, workspace: Workspace, required: str, role: str | None) -> None:
        super().__init__(f"This page needs the {required} role.")
        self.workspace = workspace
        self.required = required
        self.role = role


def forbidden_page(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403: what the page needs, the caller's role, and who has the role needed."""
    context: dict[str, Any] = {"reason": str(exception or "") or "You may not open this page."}
    if isinstance(exception, RoleRequired):
        holders = _holders(exception.workspace, exception.required)
        context.update(
            workspace=exception.workspace,
            required=exception.required,
            your_role=exception.role,
            holders=holders[:HOLDERS_NAMED],
            more_holders=max(0, len(holders) - HOLDERS_NAMED),
        )
    response = render(request, "403.html", context, status=403)
    setattr(response, PRODUCT_PAGE, True)
    return response


def not_found_page(request: HttpRequest) -> HttpResponse:
    response = render(request, "404.html", status=404)
    setattr(response, PRODUCT_PAGE, True)
    return response


def _holders(workspace: Workspace, required: str) -> list[str]:
    """The usernames of the workspace's members whose role allows ``required`` (a rank or a
    permission)."""
    roles = [role for role in RANK if allows(role, required)]
    return list(
        Membership.objects.filter(workspace=workspace, role__in=roles)
        .order_by("user__username")
        .values_list("user__username", flat=True)
    )
