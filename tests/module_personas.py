"""The personas and workloads of tests/conftest.py, made once per module (``module_db``).

A module takes the fixtures it needs from here, under their names, overriding conftest's
per-test ones, and an autouse fixture that gives each test its savepoint (``db``) and makes
them all before the module's first test:

    workspace_a, operator, made_first = module_scoped("workspace_a", "operator")

Made first, every test of the module sees the same rows, whichever of its tests ran before it
in its worker (xdist may share a module's tests among workers). Each test still runs in its
own savepoint, so its writes are rolled back at its end; a test must not change the fixtures'
objects in memory either.
"""

from __future__ import annotations

import inspect
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
    """The fixtures of this module with these names, then the autouse fixture that makes them
    first, to be bound under their names in a test module (an assignment, not an import: a
    fixture's parameter then shadows no unused import)."""

    def made_first(**_: Any) -> None:
        """Nothing to do: its parameters are the point."""

    # The fixtures named as its parameters: pytest then makes the module-scoped ones before
    # the test's savepoint (``db``), as it makes every fixture of a wider scope first.
    made_first.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in ("db", *names)]
    )
    return (*(globals()[name] for name in names), pytest.fixture(autouse=True)(made_first))
