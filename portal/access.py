"""Who may see and change which workspace.

Every query that reads workspace data goes through ``workspaces_for`` or ``workspace_for``,
so isolation is decided in one place: a caller without a role in a workspace gets a 404
(its existence is not revealed), a caller with too low a role gets a 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import F, Model, QuerySet

from portal.errors import ForbiddenError, NotFoundError, ValidationFailed
from portal.models import ApiToken, Membership, Role, Workspace, role_at_least

Row = TypeVar("Row", bound=Model)


@dataclass(frozen=True)
class Caller:
    """The authenticated party of a request: a portal user or an API token."""

    user: Any
    token: ApiToken | None

    @property
    def label(self) -> str:
        if self.token is not None:
            return self.token.label
        return f"user:{self.user.get_username()}"

    @property
    def is_superuser(self) -> bool:
        return self.token is None and bool(getattr(self.user, "is_superuser", False))


def caller_of(request: Any) -> Caller:
    token = request.auth if isinstance(getattr(request, "auth", None), ApiToken) else None
    return Caller(user=request.user, token=token)


def workspaces_for(caller: Caller) -> QuerySet[Workspace]:
    if caller.token is not None:
        return Workspace.objects.filter(pk=caller.token.workspace_id)
    if caller.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(memberships__user=caller.user)


def role_in(caller: Caller, workspace: Workspace) -> str | None:
    if caller.token is not None:
        return caller.token.role if caller.token.workspace_id == workspace.pk else None
    if caller.is_superuser:
        return Role.OPERATOR
    membership = Membership.objects.filter(user=caller.user, workspace=workspace).first()
    return membership.role if membership else None


def workspace_and_role(caller: Caller, slug: str) -> tuple[Workspace, str] | None:
    """The caller's workspace named ``slug`` and the caller's role in it, in one query."""
    if caller.token is not None or caller.is_superuser:
        workspace = workspaces_for(caller).filter(slug=slug).first()
        role = role_in(caller, workspace) if workspace is not None else None
        return (workspace, role) if workspace is not None and role is not None else None
    found = (
        Workspace.objects.filter(slug=slug, memberships__user=caller.user)
        .annotate(member_role=F("memberships__role"))
        .first()
    )
    return (found, found.member_role) if found is not None else None


def workspace_for(caller: Caller, slug: str | None, *, required: str = Role.VIEWER) -> Workspace:
    """The workspace a call acts on, checked for ``required`` role.

    A token caller may omit the slug (its own workspace is used); a session caller must name it.
    """
    if not slug:
        if caller.token is None:
            # A missing parameter is the caller's mistake (400), not a hidden resource (404).
            raise ValidationFailed(
                {"workspace": "Required: name the workspace with ?workspace=SLUG."},
                "Name the workspace with ?workspace=SLUG.",
            )
        workspace = caller.token.workspace
        _check_role(workspace, role_in(caller, workspace), required)
        return workspace
    found = workspace_and_role(caller, slug)
    if found is None:
        raise NotFoundError(f"No workspace {slug!r}.")
    workspace, role = found
    _check_role(workspace, role, required)
    return workspace


def scoped_get(
    caller: Caller, rows: QuerySet[Row], pk: Any, *, what: str, required: str = Role.VIEWER
) -> Row:
    """The row ``pk`` of ``rows`` if it belongs to a workspace the caller may see, checked for
    ``required``. A row of another workspace is answered exactly like one that does not exist.

    ``rows`` is a queryset of a model with a ``workspace`` foreign key (workloads, memories,
    maintenance runs, ...), already narrowed or deferred as its caller needs.
    """
    row = (
        rows.select_related("workspace").filter(pk=pk, workspace__in=workspaces_for(caller)).first()
    )
    if row is None:
        raise NotFoundError(f"No {what} {pk}.")
    require_role(caller, row.workspace, required)  # type: ignore[attr-defined]
    return row


def require_role(caller: Caller, workspace: Workspace, required: str) -> str:
    return _check_role(workspace, role_in(caller, workspace), required)


def _check_role(workspace: Workspace, role: str | None, required: str) -> str:
    if role is None:
        raise NotFoundError("No such resource.")
    if not role_at_least(role, required):
        raise ForbiddenError(
            f"This needs the {required} role in workspace {workspace.slug!r}; you are {role}.",
            {"requiredRole": required, "role": role},
        )
    return role
