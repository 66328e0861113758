"""Who may see and change which workspace.

Every query that reads workspace data goes through ``workspaces_for`` or ``workspace_for``,
so isolation is decided in one place: a caller without a role in a workspace gets a 404
(its existence is not revealed), a caller whose role may not do what the call does gets a
403. ``required`` is a role (at least it) or a permission (``portal.permissions``, the
table of what each role may do, the agent's included); ``binding_check`` refuses a bound
token's call about another workload or environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import F, Model, QuerySet

from portal.errors import ForbiddenError, NotFoundError, ValidationFailed
from portal.models import ApiToken, Membership, Role, Workspace
from portal.permissions import HOLDERS, allows, binding_outside, holders

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
        require_role(caller, workspace, required)
        return workspace
    found = workspace_and_role(caller, slug)
    if found is None:
        raise NotFoundError(f"No workspace {slug!r}.")
    workspace, role = found
    _check_role(workspace, role, required, _scopes(caller))
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
    """The caller's role in ``workspace``, checked for ``required``: a role (at least it) or
    a permission (``portal.permissions``)."""
    return _check_role(workspace, role_in(caller, workspace), required, _scopes(caller))


def require_reader(caller: Caller) -> None:
    """For the operations that name no workspace (the workspace list, the axis registry): a
    token caller must be one that may read its workspace (an agent token may not)."""
    if caller.token is not None:
        require_role(caller, caller.token.workspace, Role.VIEWER)


def _scopes(caller: Caller) -> list[str] | None:
    """An agent token's scopes, which narrow what its role holds; None for anyone else."""
    token = caller.token
    return list(token.scopes) if token is not None and token.is_agent else None


def _check_role(
    workspace: Workspace, role: str | None, required: str, scopes: list[str] | None = None
) -> str:
    if role is None:
        raise NotFoundError("No such resource.")
    if allows(role, required, scopes):
        return role
    if required not in HOLDERS:
        # An agent ranks below every member: say what it may do instead.
        may = f" (an agent token may only: {', '.join(scopes)})" if scopes is not None else ""
        raise ForbiddenError(
            f"This needs the {required} role in workspace {workspace.slug!r}; you are {role}{may}.",
            {"requiredRole": required, "role": role},
        )
    roles = holders(required)
    if role in roles:  # an agent token without the scope
        raise ForbiddenError(
            f"This needs the {required!r} scope; this token has "
            f"{', '.join(scopes or []) or 'none'}.",
            {"requiredScope": required, "scopes": scopes or [], "role": role},
        )
    raise ForbiddenError(
        f"This needs one of the roles {', '.join(roles)} in workspace {workspace.slug!r} "
        f"({required}); you are {role}.",
        {"requiredPermission": required, "allowedRoles": roles, "role": role},
    )


def binding_check(caller: Caller, *, workload_id: Any, environment: str | None) -> None:
    """Refuse a call of a token bound to workloads or environments about any other (403
    ``OUTSIDE_TOKEN_BINDING``, naming the binding). From the token as authenticated (the
    recall's remembered token too): no statement."""
    token = caller.token
    if token is None or not (token.bound_workloads or token.bound_environments):
        return
    workloads = [str(pk) for pk in token.bound_workloads]
    environments = list(token.bound_environments)
    workload = None if workload_id is None else str(workload_id)
    outside = binding_outside(
        workloads=workloads,
        environments=environments,
        workload_id=workload,
        environment=environment,
    )
    if not outside:
        return
    bound = []
    if workloads:
        bound.append(f"workload{'s' if len(workloads) > 1 else ''} {', '.join(workloads)}")
    if environments:
        bound.append(f"environment{'s' if len(environments) > 1 else ''} {', '.join(environments)}")
    named = {"workload": f"workload {workload}", "environment": f"environment {environment!r}"}
    raise ForbiddenError(
        f"API token {token.name!r} is bound to {' and '.join(bound)}: "
        f"{' and '.join(named[what] for what in outside)} "
        f"{'is' if len(outside) == 1 else 'are'} outside its binding.",
        {
            "boundWorkloads": workloads,
            "boundEnvironments": environments,
            "outside": outside,
            "workloadId": workload,
            "environment": environment,
        },
        code="OUTSIDE_TOKEN_BINDING",
    )
