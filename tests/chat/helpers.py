"""Starting sessions and posting turns through the API, for the chat tests."""

from __future__ import annotations

from typing import Any

from policies.algebra import default_floor
from policies.services import workspace_policy_save
from portal.models import Workspace
from recall.layout.services import layout_config_save


def start(persona: Any, workload: Any, **body: Any) -> Any:
    """``POST /v1/sessions`` for user:ada with ``workload`` in prod: the response."""
    return persona.api().post(
        "/v1/sessions",
        {"actorId": "user:ada", "workloadId": str(workload.id), "environment": "prod", **body},
        format="json",
    )


def started(persona: Any, workload: Any, **body: Any) -> dict[str, Any]:
    response = start(persona, workload, **body)
    assert response.status_code == 201, response.content
    return response.json()


def post_turns(persona: Any, session_id: str, *messages: tuple[str, str] | dict[str, Any]) -> Any:
    """``POST /v1/sessions/{id}/turns`` with the messages ((role, content) pairs)."""
    body = [m if isinstance(m, dict) else {"role": m[0], "content": m[1]} for m in messages]
    return persona.api().post(f"/v1/sessions/{session_id}/turns", {"messages": body}, format="json")


def turn(persona: Any, session_id: str, *messages: tuple[str, str]) -> dict[str, Any]:
    """``post_turns``, answered 201: the answer."""
    response = post_turns(persona, session_id, *messages)
    assert response.status_code == 201, response.content
    return response.json()


def roomy_floor(workspace: Workspace, total: int = 20_000) -> None:
    """An operator floor whose token budget is larger than any supporting-context budget
    below, without per-kind ceilings or reservations: the recall's cap decides."""
    floor = {
        **default_floor(),
        "totalTokenBudget": total,
        "perSegmentCeiling": {},
        "perSegmentReservation": {},
        "relaxableAxes": [],
    }
    workspace_policy_save(
        workspace=workspace, document=floor, author="system:test", comment="Test floor"
    )


def layout(workload: Any, memory: dict[str, Any]) -> None:
    """Save ``memory`` (the ``memory:`` fragment's keys) as the workload's layout config."""
    layout_config_save(workload=workload, document={"memory": memory}, author="system:test")


def prompt_text(answer: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in answer["prompt"]["messages"])


def in_flight(session: Any, **fields: Any) -> Any:
    """A queued compaction run of ``session`` (a ``Session``), set as its run in flight."""
    from chat.models import CompactionRun, Session

    run = CompactionRun.objects.create(
        **{
            "workspace": session.workspace, "session": session, "trigger": "manual",
            "reason": "manual", "severity": "normal", "config": {}, "service": "compaction",
            "time_budget_ms": 15000, "target_utilization": 0.7, "author": "system:test",
            **fields,
        }
    )  # fmt: skip
    Session.objects.filter(pk=session.pk).update(compaction_run=run)
    return run
