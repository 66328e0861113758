"""A session's page in a real browser: the utilisation chart, a turn's stages, and the
formatted prompt opened by an operator (an editor has no such button)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from chat.services import session_create, session_turns_post
from recall.layout.services import layout_config_save
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CANARY = "CANARY-browser-3Zt"


@pytest.fixture
def session(operator: Any, editor: Any, workload_a: Any) -> Any:
    """Two turns in a small window: the second runs the cascade."""
    factories.memories(operator.workspace, {"content": "release notes are short"})
    layout_config_save(
        workload=workload_a,
        document={"memory": {"context_window": 200, "output_buffer": 0}},
        author="system:test",
    )
    found = session_create(
        workspace=operator.workspace, actor_id="user:ada", workload_id=workload_a.id,
        environment="prod", author="system:test",
    )  # fmt: skip
    for messages in (
        [{"role": "user", "content": "release " + "words " * 60}],
        [{"role": "assistant", "content": "noted " * 100},
         {"role": "user", "content": f"release {CANARY}"}],
    ):  # fmt: skip
        session_turns_post(session=found, messages=messages, author="system:test")
        found.refresh_from_db()
    return found


class SessionPageBrowserTests:
    def test_an_operator_reads_the_chart_the_stages_and_opens_the_prompt(
        self, page, live_server, login, session, shot
    ):
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/sessions/")
        page.get_by_role("link", name=f"#{session.pk}").click()
        page.wait_for_url(f"**/w/team-a/sessions/{session.pk}/")

        chart = page.locator("svg.utilisation-chart")
        expect(chart).to_be_visible()
        labels = chart.locator("text").all_text_contents()
        assert {"70%", "85%", "95%", "100%"} <= set(labels)
        assert chart.locator("circle").count() == 2
        turn = page.locator("#turn-3")
        assert "emergency_minimum" in turn.inner_text()
        assert CANARY not in page.content()

        turn.get_by_role("link", name="Show the formatted prompt").click()
        prompt = page.locator("#prompt-3 .prompt-view")
        expect(prompt).to_be_visible()
        assert "Private content" in prompt.inner_text()
        assert CANARY in prompt.inner_text()
        assert page.url.endswith(f"/w/team-a/sessions/{session.pk}/")  # opened in place
        shot(page, "session-page")

    def test_an_editor_sees_the_turns_but_no_prompt(
        self, page, live_server, login, editor, session
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/")

        expect(page.locator("svg.utilisation-chart")).to_be_visible()
        assert "Turn 3" in page.locator("#turn-3").inner_text()
        assert page.get_by_role("link", name="Show the formatted prompt").count() == 0
        response = page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/turns/3/prompt/")
        assert response is not None and response.status == 403
        assert CANARY not in page.content()


class OpenInLayoutBrowserTests:
    def test_an_operator_opens_a_turn_in_the_layout_tab_and_plans_it_again(
        self, page, live_server, login, session, shot
    ):
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/")

        page.locator("#turn-3").get_by_role("link", name="Open in Layout").click()
        page.wait_for_url(f"**/w/team-a/sessions/{session.pk}/turns/3/layout/")

        tabs = page.get_by_role("navigation", name="Sandbox tools")
        assert tabs.get_by_role("link", name="Layout").get_attribute("aria-current") == "page"
        note = page.locator(".opened-from")
        expect(note).to_contain_text(f"turn 3 of session #{session.pk}")
        expect(note).to_contain_text("Private content")
        expect(page.locator("#id_query")).to_have_value(f"release {CANARY}")
        assert "assistant: noted" in page.locator("#id_history").input_value()
        assert "release notes are short" in page.locator("#id_supporting").input_value()
        assert "context_window: 200" in page.locator("#id_config").input_value()
        assert "emergency_minimum" in page.locator("#layout-result").inner_text()
        shot(page, "open-in-layout")

        page.get_by_label("Context window", exact=True).fill("20000")
        page.get_by_role("button", name="Plan layout").click()
        expect(page.locator("#layout-result")).not_to_contain_text("emergency_minimum")
        expect(page.locator("#id_context_window")).to_have_value("20000")

    def test_an_editor_has_no_link_and_is_refused(self, page, live_server, login, editor, session):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/")

        assert page.get_by_role("link", name="Open in Layout").count() == 0
        response = page.goto(f"{live_server.url}/w/team-a/sessions/{session.pk}/turns/3/layout/")
        assert response is not None and response.status == 403
        assert CANARY not in page.content()
