"""Every policy change has exactly one audit event, even when the request fails part-way.

The faults are real: a trigger, created by the database owner for the test, makes
PostgreSQL refuse one of the statements a save runs (the new version's row, or its audit
event). The request fails with a JSON error, nothing of the change is left, and the same
save afterwards records one version and one event.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from audit.models import AuditEvent, EventType
from tests.helpers import database_owner, error_of
from tests.policies.test_api_policies import floor, policy_url, state

pytestmark = pytest.mark.django_db

FAULT_FUNCTION = """
CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'injected fault'; END $$
"""


def inject_fault(table: str, when: str = "true") -> None:
    with database_owner(), connection.cursor() as cursor:
        cursor.execute(FAULT_FUNCTION)
        cursor.execute(
            f"CREATE TRIGGER test_fault BEFORE INSERT ON {table}"
            f" FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION test_fault()"
        )


def clear_fault(table: str) -> None:
    with database_owner(), connection.cursor() as cursor:
        cursor.execute(f"DROP TRIGGER test_fault ON {table}")
        cursor.execute("DROP FUNCTION test_fault()")


FAULTS = {
    "the version's row": ("policies_workloadpolicyversion", "true"),
    "the audit event": ("audit_auditevent", "NEW.type = 'context.workload_policy_set'"),
}
FLOOR_FAULTS = {
    "the floor's row": ("policies_workspacepolicyversion", "true"),
    "the audit event": ("audit_auditevent", "NEW.type = 'context.workspace_policy_set'"),
}


def _failing(client: Any) -> Any:
    client.raise_request_exception = False
    return client


@pytest.mark.parametrize("fault", FAULTS)
def test_a_workload_policy_save_that_fails_part_way_leaves_nothing(editor, workload_a, fault):
    workspace = workload_a.workspace
    before = state(workspace)
    inject_fault(*FAULTS[fault])

    response = _failing(editor.api()).put(
        policy_url(workload_a), {"totalTokenBudget": 3100}, format="json"
    )

    assert response.status_code == 500
    assert error_of(response, 500)
    assert state(workspace) == before
    clear_fault(FAULTS[fault][0])
    saved = editor.api().put(policy_url(workload_a), {"totalTokenBudget": 3100}, format="json")
    assert saved.status_code == 200
    after = state(workspace)
    assert len(after["versions"]) == len(before["versions"]) + 1
    assert after["events"] == before["events"] + 1
    assert (
        AuditEvent.objects.filter(workspace=workspace, type=EventType.WORKLOAD_POLICY_SET).count()
        == 1
    )


@pytest.mark.parametrize("fault", FLOOR_FAULTS)
def test_a_floor_save_that_fails_part_way_leaves_nothing(operator, fault):
    workspace = operator.workspace
    before = state(workspace)
    inject_fault(*FLOOR_FAULTS[fault])

    response = _failing(operator.api()).put(
        "/v1/workspaces/team-a/policy",
        {**floor(totalTokenBudget=2500), "comment": "Test change"},
        format="json",
    )

    assert response.status_code == 500
    assert state(workspace) == before
    clear_fault(FLOOR_FAULTS[fault][0])
    saved = operator.api().put(
        "/v1/workspaces/team-a/policy",
        {**floor(totalTokenBudget=2500), "comment": "Test change"},
        format="json",
    )
    assert saved.status_code == 200, saved.content
    after = state(workspace)
    assert (after["floors"], after["events"]) == (before["floors"] + 1, before["events"] + 1)
