"""Who may do what with sessions: one table, read by the API and the pages alike, so that a
role added later (an agent's) is placed here and nowhere else.

Every member reads sessions (their status, counts and budget diagnostics, never content);
editors and up start sessions and post turns, as they may recall; only operators read an
assembled prompt, which holds the actor's memories and messages.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.http import HttpRequest

from chat.models import Session
from portal.access import Caller, scoped_get, workspace_for
from portal.errors import NotFoundError
from portal.ids import numeric_id
from portal.models import Role, Workspace, role_at_least
from portal.pages import PageAccess, workspace_page


class Action(StrEnum):
    READ = "read"  # list and read sessions and their turns' diagnostics
    WRITE = "write"  # start a session, post turns, end it
    PROMPT = "prompt"  # read a turn's formatted prompt (private content)


REQUIRED_ROLE: dict[Action, str] = {
    Action.READ: Role.VIEWER,
    Action.WRITE: Role.EDITOR,
    Action.PROMPT: Role.OPERATOR,
}


def sessions_workspace(caller: Caller, slug: str | None, action: Action) -> Workspace:
    """The workspace a sessions call acts on, checked for the action's role."""
    return workspace_for(caller, slug, required=REQUIRED_ROLE[action])


def session_for(caller: Caller, session_id: Any, action: Action) -> Session:
    """A session of a workspace the caller may see, checked for the action's role; another
    workspace's session is answered as one that does not exist."""
    pk = numeric_id(session_id)
    if pk is None:
        raise NotFoundError(f"No session {session_id!r}: session ids are ASCII digits.")
    rows = Session.objects.select_related("actor", "workload")
    return scoped_get(caller, rows, pk, what="session", required=REQUIRED_ROLE[action])


def may(role: str | None, action: Action) -> bool:
    """Whether ``role`` may do ``action`` (the pages show a control only when it may)."""
    return role_at_least(role, REQUIRED_ROLE[action])


def sessions_page(request: HttpRequest, slug: str, action: Action) -> PageAccess:
    """A sessions page's workspace for the signed-in user, checked for the action's role."""
    return workspace_page(request, slug, required=REQUIRED_ROLE[action])
