"""The personas and workloads of tests/conftest.py, made once per module (``module_db``).

A module whose tests only call and read (the permission matrix, the isolation tests) takes
the fixtures it needs from here, under their names, overriding conftest's per-test ones:

    workspace_a, operator = module_scoped("workspace_a", "operator")

Each test still runs in its own savepoint, so its writes are rolled back at its end.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.models import Workload
from portal.models import Role, Workspace
from tests.conftest import Persona, agent_persona, persona, support_bot, team_a, team_b


@pytest.fixture(scope="module")
def workspace_a(module_db: None) -> Workspace:
    return team_a()


@pytest.fixture(scope="module")
def workspace_b(module_db: None) -> Workspace:
    return team_b()


@pytest.fixture(scope="module")
def operator(workspace_a: Workspace) -> Persona:
    return persona(workspace_a, "olga", Role.OPERATOR)


@pytest.fixture(scope="module")
def editor(workspace_a: Workspace) -> Persona:
    return persona(workspace_a, "eddie", Role.EDITOR)


@pytest.fixture(scope="module")
def viewer(workspace_a: Workspace) -> Persona:
    return persona(workspace_a, "vera", Role.VIEWER)


@pytest.fixture(scope="module")
def outsider(workspace_b: Workspace) -> Persona:
    return persona(workspace_b, "otto", Role.OPERATOR)


@pytest.fixture(scope="module")
def agent(workspace_a: Workspace) -> Persona:
    return agent_persona(workspace_a)


@pytest.fixture(scope="module")
def workload_a(workspace_a: Workspace) -> Workload:
    return support_bot(workspace_a)


def module_scoped(*names: str) -> tuple[Any, ...]:
    """The fixtures of this module with these names, to be bound under them in a test module
    (an assignment, not an import: a fixture's parameter then shadows no unused import)."""
    return tuple(globals()[name] for name in names)
