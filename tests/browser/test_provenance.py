"""Provenance in a real browser: the event page links the memories a context carried, and
"Run again now" compares that context with today's."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from audit.models import AuditEvent, EventType
from recall.services import memory_set_status
from tests.helpers import QUERY
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class ProvenanceTests:
    def test_the_event_links_its_memories_and_runs_again_now(
        self, page, live_server, login, editor, workload_a, shot
    ):
        rows = factories.memories(
            editor.workspace, *({"content": f"release summary preferences {n}"} for n in range(3))
        )
        response = editor.api().post(
            "/v1/memory/actors/user:ada/recall",
            {"workloadId": str(workload_a.id), "environment": "prod", "query": QUERY, "topK": 5},
            format="json",
        )
        assert response.status_code == 200, response.content
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        memory_set_status(memory=rows[1], status="suppressed", author="user:eddie")
        slug = editor.workspace.slug

        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/{slug}/audit/{event.pk}/")
        carried = page.get_by_role("region", name="Memories in this context")
        for row in rows:
            expect(carried.get_by_role("link", name=f"#{row.pk}")).to_be_visible()
        expect(page.get_by_text("floor v1")).to_be_visible()
        shot(page, "provenance-event")

        carried.get_by_role("link", name=f"#{rows[0].pk}").click()
        expect(page.get_by_text("in 1 context")).to_be_visible()
        page.go_back()

        page.get_by_role("link", name="Run again now").click()
        page.get_by_role("textbox", name="Query").fill("not what the agent asked")
        page.get_by_role("button", name="Run again now").click()
        expect(page.get_by_role("alert")).to_contain_text("not the query of envelope")

        page.get_by_role("textbox", name="Query").fill(QUERY)
        page.get_by_role("button", name="Run again now").click()
        expect(page.get_by_text("1 left")).to_be_visible()
        suppressed = page.get_by_role("row").filter(has_text=f"#{rows[1].pk}")
        expect(suppressed).to_contain_text("Suppressed since")
        expect(suppressed).to_contain_text("left")
        shot(page, "provenance-replay")


class ErasureTests:
    def test_an_operator_erases_an_actor_after_typing_the_count(
        self, page, live_server, login, operator, shot
    ):
        factories.memories(
            operator.workspace, *({"content": f"ada's secret {n}"} for n in range(3))
        )
        slug = operator.workspace.slug

        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/{slug}/memories/?actor=user:ada")
        page.get_by_role("link", name="Erase this actor…").click()
        expect(
            page.get_by_role("heading", name="Delete all 3 memories of user:ada")
        ).to_be_visible()
        page.get_by_label("Type 3 to confirm").fill("2")
        page.get_by_role("button", name="Erase 3 memories").click()
        expect(page.get_by_role("alert")).to_contain_text("Type 3, the number of memories")
        shot(page, "erase-confirm")

        page.get_by_label("Type 3 to confirm").fill("3")
        page.get_by_role("button", name="Erase 3 memories").click()
        expect(page.get_by_role("status").first).to_contain_text("Erased user:ada: 3 memories")
        expect(page.get_by_text("ada's secret")).to_have_count(0)
        shot(page, "erase-done")
