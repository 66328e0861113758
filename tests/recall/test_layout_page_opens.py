"""The layout tab opens planned: the 32,000-token example's accounting, cascade and severity
are on the page before any click, its textareas fit their content, and it speaks of "the
example", never of where the example came from."""

from __future__ import annotations

import re

from recall.layout.services import layout_config_save
from tests.recall.test_layout_page import URL, figure, form_values
from tests.recall.test_pages import HTMX, client_for


def visible_text(html: str) -> str:
    body = html[html.index("<main") :]
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    return re.sub(r"<[^>]+>", " ", body)


class LayoutTabOpensPlannedTests:
    def test_the_tab_opens_with_the_example_planned(self, viewer):
        response = client_for(viewer).get(URL)

        assert response.status_code == 200
        html = response.content.decode()
        assert 'id="layout-result"' in html and "layout-empty" not in html
        assert figure(html, 4500) and figure(html, 27500) and figure(html, 8250)
        assert '<span class="badge sev sev-normal"' in html
        assert "No pruning needed" in html
        assert form_values(html)["context_window"] == "32000"

    def test_the_pressure_example_opens_with_its_cascade(self, viewer):
        html = client_for(viewer).get(URL + "?example=pressure", **HTMX).content.decode()

        assert html.lstrip().startswith('<div id="layout-body"')
        assert '<table class="cascade" id="cascade">' in html
        assert "Stopped at stage 5, the first that fits" in html

    def test_a_malformed_number_in_the_link_opens_the_form_unplanned_without_errors(self, viewer):
        response = client_for(viewer).get(URL + "?context_window=lots")

        html = response.content.decode()
        assert response.status_code == 200
        assert 'id="layout-result"' not in html and "field-errors" not in html
        assert 'value="lots"' in html  # what the link said, to correct

    def test_each_textarea_is_as_tall_as_its_content(self, viewer):
        html = client_for(viewer).get(URL).content.decode()
        values = form_values(html)

        for name in ("config", "history", "prior_history", "supporting", "query"):
            tag = re.search(rf'<textarea name="{name}"[^>]*>', html)
            assert tag, name
            rows = int(re.search(r'rows="(\d+)"', tag.group(0)).group(1))
            lines = len(values[name].splitlines())
            assert rows == max(lines + 1, 2 if name == "query" else 3), (name, rows, lines)

    def test_the_page_says_the_example_not_the_seed(self, viewer):
        html = client_for(viewer).get(URL).content.decode()

        text = visible_text(html)
        assert "seed" not in text.lower()
        assert "Reset to the 32,000-token example" in text
        assert "The example's chat configuration" in text


class LayoutWorkloadSwitchTests:
    def test_the_switch_sends_the_numbers_and_the_choice_but_never_the_yaml(self, viewer):
        html = client_for(viewer).get(URL).content.decode()

        switch = re.search(r'<div class="field" hx-get="[^"]+"[^>]*>', html)
        assert switch
        assert 'hx-include="#layout-settings input, #layout-settings select"' in switch.group(0)

    def test_the_yaml_below_starts_as_a_copy_of_the_workload_chosen_before(
        self, editor, workload_a
    ):
        layout_config_save(
            workload=workload_a,
            document={"memory": {"context_window": 16000, "output_buffer": 1000}},
            author="system:test",
        )
        client = client_for(editor)
        chosen = client.get(URL, {"workload": str(workload_a.pk)}, **HTMX).content.decode()
        assert f'<input type="hidden" name="copy_of" value="{workload_a.pk}">' in chosen

        back = client.get(
            URL, {"workload": "", "copy_of": str(workload_a.pk), "context_window": "16000"}, **HTMX
        ).content.decode()

        values = form_values(back)
        assert values["workload"] == ""
        assert "context_window: 16000" in values["config"]
        assert re.search(r'<textarea name="config"[^>]*readonly', back) is None
        assert "copy_of" not in values
