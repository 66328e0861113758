"""What each role may do: the one table every role check consults (``portal.access`` for the
API, ``portal.pages`` for the pages), and an agent token's binding.

People hold ranked roles, viewer < editor < operator: each may do what the one below may,
and more; a check asks for "at least" one of them (``Role.EDITOR``). An API token holds one
of those, or ``agent``: a token for an LLM agent, which may recall, write an actor's new
memories, and use sessions and turns, and nothing else. An agent ranks below every person,
so each "at least" check refuses it; what it may do are the named permissions below, each
held by the roles listed in ``HOLDERS``, and a check asks for the permission instead of a
rank (``Permission.RECALL``). A new operation an agent may call adds its permission here.

An agent token holds the permissions of its ``scopes``, a subset of the agent's (all of
them unless it was issued with fewer); and it may be bound to workloads and environments
(``binding_outside``): a call about any other is refused, naming the binding.

A view checks with ``portal.access``: ``workspace_for(caller, slug, required=...)`` (or
``scoped_get``, ``require_role``) with a role or a permission, then, for a call about a
workload and environment, ``binding_check(caller, workload_id=..., environment=...)``. The
sessions API, for instance: ``required=Permission.SESSION_USE`` to open a session or add a
turn, ``Permission.SESSION_READ`` to read them, and the binding checked for the session's
workload. Its operations then get their rows in tests/portal/test_permission_matrix.py.

Pure: no Django import.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum

AGENT = "agent"
VIEWER = "viewer"
EDITOR = "editor"
OPERATOR = "operator"

# The people's roles, ranked; an agent has no rank.
RANK: Mapping[str, int] = {VIEWER: 1, EDITOR: 2, OPERATOR: 3}


class Permission(StrEnum):
    RECALL = "recall"
    # Write new memories for an actor (never change or delete one).
    MEMORY_CREATE = "memory.create"
    # Open sessions, add turns and assemble their context (the sessions API).
    SESSION_USE = "session.use"
    # Read sessions and their turns.
    SESSION_READ = "session.read"


HOLDERS: Mapping[Permission, frozenset[str]] = {
    Permission.RECALL: frozenset({AGENT, EDITOR, OPERATOR}),
    Permission.MEMORY_CREATE: frozenset({AGENT, EDITOR, OPERATOR}),
    Permission.SESSION_USE: frozenset({AGENT, EDITOR, OPERATOR}),
    Permission.SESSION_READ: frozenset({AGENT, VIEWER, EDITOR, OPERATOR}),
}

# What an agent token may be given: every permission an agent holds, in this order.
AGENT_SCOPES: tuple[str, ...] = tuple(p.value for p in Permission if AGENT in HOLDERS[p])


def role_at_least(role: str | None, required: str) -> bool:
    """``role`` ranks at least ``required`` (a person's role): never for an agent."""
    return role is not None and RANK.get(role, 0) >= RANK[required]


def allows(role: str | None, required: str, scopes: Collection[str] | None = None) -> bool:
    """Whether ``role`` may do what ``required`` names: a permission (held by the role, and
    within ``scopes`` when those are given: an agent token's), or a rank (at least it)."""
    if required in HOLDERS:
        held = role in HOLDERS[Permission(required)]
        return held and (scopes is None or required in scopes)
    return role_at_least(role, required)


def holders(permission: str) -> list[str]:
    """The roles that hold ``permission``, agent first, then by rank."""
    held = HOLDERS[Permission(permission)]
    return [role for role in (AGENT, *RANK) if role in held]


def scopes_invalid(scopes: Collection[str]) -> list[str]:
    """The ``scopes`` an agent token cannot be given (unknown, or not an agent's)."""
    return [scope for scope in scopes if scope not in AGENT_SCOPES]


def binding_outside(
    *,
    workloads: Collection[str],
    environments: Collection[str],
    workload_id: str | None,
    environment: str | None,
) -> list[str]:
    """What of a call falls outside a token's binding ("workload", "environment"): an empty
    binding binds nothing, and a call that names no workload (or environment) is within it
    (a memory write names neither)."""
    outside = []
    if workloads and workload_id is not None and workload_id not in workloads:
        outside.append("workload")
    if environments and environment is not None and environment not in environments:
        outside.append("environment")
    return outside
