"""Erasure reaches the sessions: an erased actor's sessions go, with their turns and the
prompts assembled for them.

Registered with ``recall.erasure`` (which runs it inside the erasure's transaction and puts
the counts in its answer and its ``memory.erased`` event), since sessions are chat's and
recall, a floor below, does not import them.
"""

from __future__ import annotations

from chat.services import sessions_delete
from portal.models import Workspace
from recall.erasure import erasure_actor_data_register
from recall.models import Actor


@erasure_actor_data_register
def actor_sessions_erase(workspace: Workspace, actor: Actor) -> dict[str, int]:
    """Delete every session of the actor: {"sessionsRemoved": n, "turnsRemoved": m}."""
    deleted = sessions_delete(workspace=workspace, actor=actor)
    return {"sessionsRemoved": deleted.sessions, "turnsRemoved": deleted.turns}
