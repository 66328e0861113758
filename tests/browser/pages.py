"""What several browser tests share: a memory carried by a recall, the portal's pages, and
how far a table overflows."""

from __future__ import annotations

from typing import Any

from audit.models import AuditEvent, EventType
from recall.models import MemoryRecord
from tests.helpers import post_recall
from tests.recall import factories


def a_recalled_memory(editor: Any, workload: Any) -> tuple[MemoryRecord, AuditEvent]:
    """ada's one memory and the context.assembled event of the editor's recall that carried it
    (so that every page has something to show)."""
    [memory] = factories.memories(editor.workspace, {"content": "release summary preferences"})
    response = post_recall(editor, workload, query="release")
    assert response.status_code == 200, response.content
    return memory, AuditEvent.objects.filter(type=EventType.ASSEMBLED).get()


def a_session(editor: Any, workload: Any) -> int:
    """A session of ada's with one assembled turn and a compaction run (call after
    ``a_recalled_memory``)."""
    api = editor.api()
    layout = {"memory": {"compaction": {"enabled": True}}}
    response = api.put(f"/v1/workloads/{workload.id}/layout-config", layout, format="json")
    assert response.status_code in (200, 201), response.content
    body = {"actorId": "user:ada", "workloadId": str(workload.id), "environment": "prod"}
    session = api.post("/v1/sessions", body, format="json").json()
    turn = {"messages": [{"role": "user", "content": "release summary"}]}
    response = api.post(f"/v1/sessions/{session['id']}/turns", turn, format="json")
    assert response.status_code == 201, response.content
    response = api.post(f"/v1/sessions/{session['id']}/compact")
    assert response.status_code == 200, response.content
    return int(session["id"])


def portal_pages(slug: str, *, memory_id: int, event_id: int, session_id: int) -> list[str]:
    """The paths of a workspace's pages, one of each kind (a memory's, an event's and a
    session's too); the last is an operator's only."""
    return [
        f"/w/{slug}/",
        f"/w/{slug}/policies/",
        f"/w/{slug}/sandbox/",
        f"/w/{slug}/sandbox/layout/",
        f"/w/{slug}/memories/?actor=user:ada",
        f"/w/{slug}/memories/{memory_id}/",
        f"/w/{slug}/audit/",
        f"/w/{slug}/audit/{event_id}/",
        f"/w/{slug}/maintenance/",
        f"/w/{slug}/maintenance/settings/",
        f"/w/{slug}/sessions/",
        f"/w/{slug}/sessions/{session_id}/",
        f"/w/{slug}/sessions/{session_id}/turns/1/prompt/",
        f"/w/{slug}/settings/access/",
    ]


def wider_than_its_card(page: Any) -> int:
    """How many pixels the page's table is wider than the card that holds it (it then
    scrolls sideways); 0 when it fits."""
    scroll, client = page.locator("div.table-wrap").evaluate("e => [e.scrollWidth, e.clientWidth]")
    return max(0, scroll - client)
