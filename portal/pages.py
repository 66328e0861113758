"""Access for server-rendered pages: the same rules as the API, as 404/403 pages.

``workspace_page`` resolves the workspace in the URL for the signed-in user and checks the
role the page needs; views then pass ``workspace`` and ``role`` to their templates, which
show edit controls only when ``can_edit`` / ``can_operate`` say so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme

from portal.access import Caller, caller_of, workspace_and_role
from portal.error_pages import RoleRequired
from portal.models import Role, Workspace
from portal.permissions import allows, role_at_least
from portal.registry import function_key, registry_put


@dataclass(frozen=True)
class PageAccess:
    caller: Caller
    workspace: Workspace
    role: str

    @property
    def can_edit(self) -> bool:
        return role_at_least(self.role, Role.EDITOR)

    @property
    def can_operate(self) -> bool:
        return role_at_least(self.role, Role.OPERATOR)

    def context(self) -> dict[str, object]:
        return {
            "workspace": self.workspace,
            "role": self.role,
            "can_edit": self.can_edit,
            "can_operate": self.can_operate,
        }


def workspace_page(request: HttpRequest, slug: str, *, required: str = Role.VIEWER) -> PageAccess:
    caller = caller_of(request)
    found = workspace_and_role(caller, slug)
    if found is None:
        raise Http404("No such workspace.")
    workspace, role = found
    if not allows(role, required):
        raise RoleRequired(workspace=workspace, required=required, role=role)
    return PageAccess(caller=caller, workspace=workspace, role=role)


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The ``next`` URL of a form or link if it stays on this site (and on https when the
    request came over https), else ``fallback``."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


@dataclass(frozen=True)
class Panel:
    """A part of a page that an app on a higher floor contributes: the page names a slot, the
    app registers what fills it (like NetBox's template extensions), so the page's own app
    need not import it. The template reads the panel's values as ``p``."""

    template: str
    context: Mapping[str, Any]


PanelSource = Callable[[PageAccess, Any], Panel | None]
_PANELS: dict[str, dict[str, PanelSource]] = defaultdict(dict)


def panel_register(slot: str) -> Callable[[PanelSource], PanelSource]:
    """Register a function ``(access, subject) -> Panel | None`` for ``slot`` (app ready)."""

    def register(source: PanelSource) -> PanelSource:
        return registry_put(_PANELS[slot], function_key(source), source, what=f"{slot} panel")

    return register


def panels(slot: str, access: PageAccess, subject: Any) -> list[Panel]:
    """The panels registered for ``slot`` that have something to show about ``subject``."""
    found = (source(access, subject) for source in _PANELS.get(slot, {}).values())
    return [panel for panel in found if panel is not None]
