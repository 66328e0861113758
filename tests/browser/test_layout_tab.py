"""The layout sandbox in a real browser: fill the pressure example, read the bar and the cascade."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from recall.layout.services import layout_config_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PRESSURE_STAGES = [
    ("1", "drop_prior_session_history", "6 prior-session turns", "no"),
    ("2", "keep_last_10_turns", "4 current turns", "no"),
    ("3", "drop_long_passages_below_0_3", "1 long-term passage", "no"),
    ("4", "drop_passages_below_0_5", "1 long-term passage", "no"),
    ("5", "keep_last_5_turns", "5 current turns", "yes"),
]


class LayoutTabBrowserTests:
    def test_an_editor_plans_the_pressure_example_and_reads_the_bar_and_the_cascade(
        self, page, live_server, login, editor, workload_a, shot
    ):
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/sandbox/")
        tabs = page.get_by_role("navigation", name="Sandbox tools")
        tabs.get_by_role("link", name="Layout").click()
        page.wait_for_url("**/w/team-a/sandbox/layout/")
        assert tabs.get_by_role("link", name="Layout").get_attribute("aria-current") == "page"
        assert page.get_by_label("Context window", exact=True).input_value() == "32000"

        page.get_by_role("button", name="Fill an example under pressure").click()
        expect(page.locator("#id_context_window")).to_have_value("4096")
        assert page.get_by_label("Tool schemas", exact=True).input_value() == "1000"
        page.get_by_role("button", name="Plan layout").click()
        result = page.locator("#layout-result")
        result.wait_for()

        labels = page.locator("svg.layout-bar text").all_text_contents()
        assert "4,096-token context window" in labels
        assert "Fixed costs 3,500" in labels
        assert "Dynamic budget 596, zoomed in" in labels
        assert "Free 154" in labels
        assert any(label.startswith("Supporting context ") for label in labels)

        rows = page.locator("table#cascade tbody tr")
        assert rows.count() == len(PRESSURE_STAGES)
        for row, (number, name, removed, fits) in zip(rows.all(), PRESSURE_STAGES, strict=True):
            cells = row.locator("td").all_inner_texts()
            assert cells[0] == number
            assert cells[1].split()[-1] == name  # the words first, the code beside
            assert cells[2] == removed
            assert cells[4] == fits
        assert "stages 6–9 did not run" in result.inner_text()
        assert page.locator(".badge.sev").inner_text().lower() == "elevated"
        assert "Compact after this turn?" in page.locator("#compaction").inner_text()
        shot(page, "sandbox-layout")

    def test_choosing_a_workload_fills_in_its_config_and_bad_input_is_shown_in_place(
        self, page, live_server, login, editor, workload_a
    ):
        layout_config_save(
            workload=workload_a,
            document={"memory": {"context_window": 16000, "output_buffer": 1000}},
            author="system:test",
        )
        login(page, "eddie", "pw-eddie")
        page.goto(f"{live_server.url}/w/team-a/sandbox/layout/")

        page.get_by_label("Use", exact=True).select_option(
            label="support-bot's stored configuration"
        )
        expect(page.locator("#id_context_window")).to_have_value("16000")
        assert page.get_by_label("Output buffer", exact=True).input_value() == "1000"
        assert "version 1" in page.locator("#config-source").inner_text()
        assert page.locator("#id_config").get_attribute("readonly") is not None

        page.get_by_label("Budget ratio", exact=True).fill("1.5")
        page.get_by_role("button", name="Plan layout").click()
        error = page.locator("#id_budget_ratio_error")
        error.wait_for()
        assert "less than or equal to 1" in error.inner_text()
        assert page.locator("#layout-result").count() == 0

        page.get_by_label("Budget ratio", exact=True).fill("0.5")
        page.get_by_role("button", name="Plan layout").click()
        page.locator("#layout-result").wait_for()
        assert (
            "support-bot's stored configuration, version 1"
            in page.locator("#layout-result").inner_text()
        )
        assert page.locator("dl.figures data").first.get_attribute("value") == "3000"


class LayoutTabOpensPlannedBrowserTests:
    def test_the_tab_opens_with_the_32000_token_example_planned(
        self, page, live_server, login, viewer, shot
    ):
        login(page, "vera", "pw-vera")
        page.goto(f"{live_server.url}/w/team-a/sandbox/layout/")
        result = page.locator("#layout-result")
        assert result.is_visible()  # no click needed: the example is already planned
        figures = page.locator("dl.figures data")
        assert [figures.nth(i).get_attribute("value") for i in range(3)] == [
            "4500",
            "27500",
            "8250",
        ]
        assert page.locator(".badge.sev").inner_text().lower() == "normal"
        assert "No pruning needed" in result.inner_text()
        assert "seed" not in page.locator("main").inner_text().lower()
        assert page.get_by_role("button", name="Reset to the 32,000-token example").is_visible()
        # every textarea shows its whole content: nothing to scroll inside it
        for name in ("config", "history", "prior_history", "supporting"):
            box = page.locator(f"#id_{name}")
            scroll, client = box.evaluate("e => [e.scrollHeight, e.clientHeight]")
            assert scroll <= client + 2, (name, scroll, client)
        shot(page, "sandbox-layout-opens-planned")

        page.get_by_role("button", name="Fill an example under pressure").click()
        expect(page.locator("#id_context_window")).to_have_value("4096")
        assert page.locator("table#cascade tbody tr").count() == 5  # planned at once too
        history = page.locator("#id_history")
        scroll, client = history.evaluate("e => [e.scrollHeight, e.clientHeight]")
        assert scroll <= client + 2
        page.get_by_role("button", name="Reset to the 32,000-token example").click()
        expect(page.locator("#id_context_window")).to_have_value("32000")
        assert "No pruning needed" in page.locator("#layout-result").inner_text()
