"""Who may do what with sessions: one table, read by the API and the pages alike, naming
the permissions of ``portal.permissions`` (the table every role check consults).

Every member reads sessions (their status, counts and budget diagnostics, never content) and
their compaction runs, and so does an agent token holding ``session.read``; editors and up
start sessions, post turns and ask for a compaction run, as they may recall, and so does an
agent token holding ``session.use``, within its binding (``binding_check``: the session's
workload and environment); only operators read an assembled prompt, which holds the actor's
memories and messages.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.http import HttpRequest

from chat.models import CompactionRun, Session
from chat.statements import TurnStart, session_in_workspace, session_locked_for_turns
from portal.access import Caller, binding_check, require_role, scoped_get, workspace_for
from portal.errors import NotFoundError
from portal.ids import numeric_id
from portal.models import Role, Workspace
from portal.pages import PageAccess, workspace_page
from portal.permissions import Permission, allows
from portal.tokens import TokenCheck


class Action(StrEnum):
    READ = "read"  # list and read sessions and their turns' diagnostics
    WRITE = "write"  # start a session, post turns, compact it, end it
    PROMPT = "prompt"  # read a turn's formatted prompt (private content)


REQUIRED_ROLE: dict[Action, str] = {
    Action.READ: Permission.SESSION_READ,
    Action.WRITE: Permission.SESSION_USE,
    Action.PROMPT: Role.OPERATOR,
}


def sessions_workspace(caller: Caller, slug: str | None, action: Action) -> Workspace:
    """The workspace a sessions call acts on, checked for the action's role."""
    return workspace_for(caller, slug, required=REQUIRED_ROLE[action])


def session_for(caller: Caller, session_id: Any, action: Action) -> Session:
    """A session of a workspace the caller may see, checked for the action's role; another
    workspace's session is answered as one that does not exist."""
    pk = _session_pk(session_id)
    if caller.token is not None:
        # The token's workspace is the one it may see (``scoped_get``), read by a prepared
        # statement: an agent posts every turn of a session through here.
        found = session_in_workspace(pk=pk, workspace_id=caller.token.workspace_id)
        if found is None:
            raise NotFoundError(f"No session {pk}.")
        require_role(caller, found.workspace, REQUIRED_ROLE[action])
        session = found
    else:
        rows = Session.objects.select_related("actor", "workload")
        session = scoped_get(caller, rows, pk, what="session", required=REQUIRED_ROLE[action])
    binding_check(caller, workload_id=session.workload_id, environment=session.environment)
    return session


def _session_pk(session_id: Any) -> int:
    pk = numeric_id(session_id)
    if pk is None:
        raise NotFoundError(f"No session {session_id!r}: session ids are ASCII digits.")
    return pk


def session_locked_for(
    caller: Caller, session_id: Any, token_check: TokenCheck | None = None
) -> TurnStart:
    """For a turns request, first thing in its transaction: the session locked with what its
    turn reads (``chat.statements.session_locked_for_turns``), checked as ``session_for``
    checks it for a write. A token caller's session is read once, locked, and that statement
    checks the token when it was taken as remembered (``token_check``); anyone else's is
    found by ``session_for`` first."""
    if caller.token is None:
        found = session_for(caller, session_id, Action.WRITE)
        return session_locked_for_turns(pk=found.pk, workspace_id=found.workspace_id)
    # The token's workspace is the one it may see (``scoped_get``).
    start = session_locked_for_turns(
        pk=_session_pk(session_id), workspace_id=caller.token.workspace_id, token=token_check
    )
    session = start.session
    require_role(caller, session.workspace, REQUIRED_ROLE[Action.WRITE])
    binding_check(caller, workload_id=session.workload_id, environment=session.environment)
    return start


def compaction_run_for(caller: Caller, run_id: Any) -> CompactionRun:
    """A compaction run of a workspace the caller may see (read); another workspace's run is
    answered as one that does not exist."""
    pk = numeric_id(run_id)
    if pk is None:
        raise NotFoundError(f"No compaction run {run_id!r}: run ids are ASCII digits.")
    rows = CompactionRun.objects.select_related("session")
    run = scoped_get(caller, rows, pk, what="compaction run", required=REQUIRED_ROLE[Action.READ])
    session = run.session
    binding_check(caller, workload_id=session.workload_id, environment=session.environment)
    return run


def may(role: str | None, action: Action) -> bool:
    """Whether ``role`` may do ``action`` (the pages show a control only when it may)."""
    return allows(role, REQUIRED_ROLE[action])


def sessions_page(request: HttpRequest, slug: str, action: Action) -> PageAccess:
    """A sessions page's workspace for the signed-in user, checked for the action's role."""
    return workspace_page(request, slug, required=REQUIRED_ROLE[action])
