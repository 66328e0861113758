"""The layout sandbox page (SPEC section 6, seed 000): the chat layout planner as a form."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEvent
from recall.layout.services import layout_config_save
from recall.models import WorkloadLayoutConfigVersion
from tests.module_personas import module_scoped
from tests.recall.test_pages import HTMX, client_for

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

URL = "/w/team-a/sandbox/layout/"
PRESSURE_STAGES = [
    "drop_prior_session_history",
    "keep_last_10_turns",
    "drop_long_passages_below_0_3",
    "drop_passages_below_0_5",
    "keep_last_5_turns",
]


class FormValues(HTMLParser):
    """What a browser would submit from the page's POST form, as it was rendered."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._in_form = False
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("method") == "post":
            self._in_form = True
        if not self._in_form:
            return
        if tag == "input" and a.get("name"):
            self.values[a["name"]] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            self.values[a["name"]] = ""
        elif tag == "select":
            self._select = a["name"]
            self.values.setdefault(a["name"], "")
        elif tag == "option" and self._select and "selected" in a:
            self.values[self._select] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.values[self._textarea] += data


def form_values(html: str) -> dict[str, str]:
    parser = FormValues()
    parser.feed(html)
    values = parser.values
    values.pop("csrfmiddlewaretoken", None)
    # Browsers drop the one newline Django writes after <textarea> to keep leading blank lines.
    return {k: v.removeprefix("\n") for k, v in values.items()}


def prefilled(client: Client, query: str = "") -> dict[str, str]:
    response = client.get(URL + query)
    assert response.status_code == 200
    return form_values(response.content.decode())


def plan(client: Client, data: dict[str, Any], **extra: Any) -> Any:
    return client.post(URL, data, **extra)


def figure(html: str, value: int) -> bool:
    """The number is shown as an accounting figure, both machine- and human-readable."""
    return f'<data value="{value}">{value:,}</data>' in html


def errors_of(html: str, field: str) -> str:
    match = re.search(rf'<ul class="field-errors" id="id_{field}_error">(.*?)</ul>', html, re.S)
    assert match, f"no errors shown next to {field}"
    return re.sub(r"<[^>]+>", "", match.group(1))


def cascade_rows(html: str) -> list[list[str]]:
    table = re.search(r'<table class="cascade" id="cascade">(.*?)</table>', html, re.S)
    assert table
    body = table.group(1).split("<tbody>")[1]
    return [
        [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cell)).strip() for cell in cells]
        for cells in (
            re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in body.split("<tr")[1:]
        )
    ]


class LayoutPageAccessTests:
    @pytest.mark.parametrize("persona", ["operator", "editor", "viewer"])
    def test_every_member_can_open_it_and_plan(self, db, request, persona):
        client = client_for(request.getfixturevalue(persona))

        response = client.get(URL)

        assert response.status_code == 200
        html = response.content.decode()
        assert "Plan layout" in html and "Fill an example under pressure" in html
        assert plan(client, form_values(html)).status_code == 200

    def test_an_outsider_gets_404_and_an_anonymous_visitor_is_sent_to_log_in(
        self, outsider, editor
    ):
        data = prefilled(client_for(editor))
        client = client_for(outsider)

        assert client.get(URL).status_code == 404
        assert plan(client, data).status_code == 404
        response = Client().get(URL)
        assert response.status_code == 302 and "/login/" in response["Location"]

    def test_planning_needs_a_csrf_token(self, editor):
        client = client_for(editor, csrf=True)
        data = prefilled(client)

        assert plan(client, data).status_code == 403

        token = client.cookies["csrftoken"].value
        assert plan(client, data, HTTP_X_CSRFTOKEN=token).status_code == 200

    def test_planning_stores_nothing(self, viewer, workload_a):
        events = AuditEvent.objects.count()

        plan(client_for(viewer), {**prefilled(client_for(viewer)), "workload": workload_a.pk})

        assert AuditEvent.objects.count() == events
        assert not WorkloadLayoutConfigVersion.objects.exists()

    def test_the_sandbox_tabs_link_recall_and_layout(self, viewer):
        client = client_for(viewer)

        recall = client.get("/w/team-a/sandbox/").content.decode()
        layout = client.get(URL).content.decode()

        assert f'<a href="{URL}">Layout</a>' in recall
        assert '<a href="/w/team-a/sandbox/" aria-current="page">Recall</a>' in recall
        assert '<a href="/w/team-a/sandbox/">Recall</a>' in layout
        assert f'<a href="{URL}" aria-current="page">Layout</a>' in layout


class LayoutPageResultTests:
    def test_the_prefilled_example_reproduces_the_seeds_budget_numbers(self, editor):
        client = client_for(editor)
        data = prefilled(client)
        assert [data[name] for name in ("context_window", "system_prompt_tokens")] == [
            "32000",
            "1500",
        ]
        assert [data[name] for name in ("tool_schema_tokens", "output_buffer")] == ["500", "2500"]
        assert float(data["budget_ratio"]) == 0.30
        assert data["config"].startswith("memory:\n  context_window: 32000\n")

        response = plan(client, data)

        assert response.status_code == 200
        html = response.content.decode()
        assert figure(html, 4500) and figure(html, 27500) and figure(html, 8250)
        assert "max(0, 32,000 − 4,500) = <strong>27,500</strong>" in html
        assert "floor(27,500 × 0.30) = <strong>8,250</strong>" in html
        assert '<span class="badge sev sev-normal"' in html
        assert "No pruning needed" in html and 'id="cascade"' not in html
        assert '<svg class="layout-bar"' in html and 'id="layout-table"' in html

    def test_an_htmx_request_gets_only_the_fragment(self, editor):
        client = client_for(editor)

        response = plan(client, prefilled(client), **HTMX)

        html = response.content.decode()
        assert response.status_code == 200
        assert html.lstrip().startswith('<div id="layout-body"') and "<html" not in html
        assert 'id="layout-result"' in html

    def test_the_pressure_example_lists_the_stages_that_ran_in_order(self, editor):
        client = client_for(editor)
        data = prefilled(client, "?example=pressure")
        assert data["context_window"] == "4096"

        html = plan(client, data).content.decode()

        rows = cascade_rows(html)
        assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
        # Each stage in words first, its code beside.
        assert [row[1].split()[-1] for row in rows] == PRESSURE_STAGES
        assert rows[0][1].startswith("Drops all prior-session history.")
        assert [row[2] for row in rows] == [
            "6 prior-session turns",
            "4 current turns",
            "1 long-term passage",
            "1 long-term passage",
            "5 current turns",
        ]
        assert [row[4] for row in rows] == ["no", "no", "no", "no", "yes"]
        assert "Stopped at stage 5, the first that fits; stages 6–9 did not run." in html
        assert "keep_3_short_2_long_passages" not in html
        assert figure(html, 596) and figure(html, 298)
        assert 'role="alert"' not in html

    def test_an_emergency_overage_is_shown_prominently_with_every_stage(self, editor):
        client = client_for(editor)
        data = {**prefilled(client, "?example=pressure"), "context_window": "3550"}

        html = plan(client, data).content.decode()

        assert [row[0] for row in cascade_rows(html)] == [str(n) for n in range(1, 10)]
        alert = re.search(r'<div class="alert-overage" role="alert">(.*?)</div>', html, re.S)
        assert alert and "emergency overage" in alert.group(1)
        assert "over the 50-token dynamic budget" in alert.group(1)
        assert "All 9 stages ran and the emergency minimum still does not fit." in html
        assert '<span class="badge sev sev-overage"' in html
        assert "budget 50 · over by" in html  # the bar marks the edge instead of clipping

    def test_the_compaction_monitor_decides_for_this_turn(self, editor):
        client = client_for(editor)
        seed = plan(client, prefilled(client)).content.decode()
        overage = plan(
            client, {**prefilled(client, "?example=pressure"), "context_window": "3550"}
        ).content.decode()

        assert '<span class="badge">no</span>' in seed
        assert "Automatic compaction is not enabled." in seed
        assert '<span class="badge warn">yes</span>' in overage
        assert "Latest turn is overage" in overage and "time budget 45,000 ms" in overage


class LayoutPageConfigTests:
    def test_a_misspelled_config_key_is_an_error_naming_its_dotted_path(self, editor):
        client = client_for(editor)
        data = prefilled(client)
        data["config"] = (
            data["config"]
            .replace("budget_ratio: 0.30", "budget_ratoi: 0.30")
            .replace("known_facts: 15", "key_facts: 15")
        )

        response = plan(client, data)

        assert response.status_code == 422
        errors = errors_of(response.content.decode(), "config")
        assert "memory.supporting_context.budget_ratoi: unknown key" in errors
        assert "did you mean &#x27;budget_ratio&#x27;?" in errors
        assert "memory.supporting_context.max_items.key_facts" in errors
        assert "use &#x27;known_facts&#x27;" in errors
        assert 'id="layout-result"' not in response.content.decode()

    def test_the_workloads_stored_config_is_used_when_chosen(self, editor, workload_a):
        layout_config_save(
            workload=workload_a,
            document={
                "memory": {
                    "context_window": 16000,
                    "output_buffer": 1000,
                    "supporting_context": {"budget_ratio": 0.5, "max_items": {"passages": 1}},
                }
            },
            author="system:test",
        )
        client = client_for(editor)

        data = prefilled(client, f"?workload={workload_a.pk}")

        assert data["workload"] == str(workload_a.pk)
        assert (data["context_window"], data["output_buffer"]) == ("16000", "1000")
        assert float(data["budget_ratio"]) == 0.5
        assert "context_window: 16000" in data["config"]
        # Blank numbers come from the stored config; the textarea is not read.
        data.update(context_window="", output_buffer="", budget_ratio="", config="memory: [")
        response = plan(client, data)
        html = response.content.decode()
        assert response.status_code == 200
        assert "support-bot's stored configuration, version 1" in html
        assert figure(html, 3000) and figure(html, 13000) and figure(html, 6500)
        assert '<th scope="row">Passages</th><td class="num">3</td><td class="num">1</td>' in html

    def test_a_workload_without_a_stored_config_uses_the_defaults(self, editor, workload_a):
        client = client_for(editor)
        data = {**prefilled(client, f"?workload={workload_a.pk}"), "context_window": ""}

        html = plan(client, data).content.decode()

        assert "the planner's defaults (support-bot has none stored)" in html
        assert figure(html, 27500)

    def test_another_workspaces_workload_cannot_be_chosen(self, editor, workload_b):
        client = client_for(editor)

        response = plan(client, {**prefilled(client), "workload": str(workload_b.pk)})

        assert response.status_code == 422
        assert "Select a valid choice" in errors_of(response.content.decode(), "workload")


GARBAGE = [
    ("context_window", "lots", "Enter a whole number."),
    ("context_window", "1e400", "Enter a whole number."),
    ("context_window", "9" * 5000, "Enter a whole number."),
    ("context_window", "-1", "greater than or equal to 0"),
    ("system_prompt_tokens", "", "This field is required."),
    ("tool_schema_tokens", "12.5", "Enter a whole number."),
    ("output_buffer", "2000000000", "less than or equal to 1000000000"),
    ("budget_ratio", "1.5", "less than or equal to 1"),
    ("budget_ratio", "-0.1", "greater than or equal to 0"),
    ("budget_ratio", "nan", "Enter a number."),
    ("budget_ratio", "thirty", "Enter a number."),
    ("history", "user: hi\nno colon here", "Line 2: write it as role: content"),
    ("history", "bot: hi", "Line 1: role: &quot;bot&quot; is not one of: system, user"),
    ("prior_history", "\n\nuser hello", "Line 3: write it as role: content"),
    ("supporting", "passages | 0.5", "Line 1: expected four parts separated by |"),
    ("supporting", "passages | high | short | x", "relevancy: &#x27;high&#x27; is not a number"),
    ("supporting", "passages | 1.5 | short | x", "relevancy: Ensure this value is less than"),
    ("supporting", "passages | 0.5 | | x", "term: passages need a term: short or long."),
    ("supporting", "passages | 0.5 | medium | x", "term: &quot;medium&quot; is not one of"),
    ("supporting", "key_facts | 0.5 | | x", "use &#x27;known_facts&#x27;"),
    ("supporting", "insights | 0.5 | forever | x", "term: &quot;forever&quot; is not one of"),
    ("config", "memory: [", "memory: invalid YAML"),
    ("config", "- just\n- a list", "memory: must be a mapping"),
    ("config", "a: &x 1\nb: *x", "anchors and aliases are not supported"),
    ("config", "memory:\n  context_window: 10000000000", "memory.context_window: must be"),
    ("config", "memory:\n  context_window: .nan", "memory.context_window: must be"),
    ("config", "memroy:\n  context_window: 1", "memory.memroy: unknown key"),
    ("config", "memory: " + "[" * 5000, "memory: the YAML is nested too deeply"),
    ("config", "memory:\n  context_window: 1" + "0" * 5000, "memory: invalid YAML: Exceeds"),
    ("config", "memory:\n  output_buffer: 2020-13-45", "memory: invalid YAML: month"),
    ("query", "hello\x00world", "Null characters are not allowed."),
]


class LayoutPageBadInputTests:
    @pytest.mark.parametrize(("field", "value", "message"), GARBAGE)
    def test_garbage_is_a_422_with_the_error_next_to_the_field(self, editor, field, value, message):
        client = client_for(editor)

        response = plan(client, {**prefilled(client), field: value})

        assert response.status_code == 422
        html = response.content.decode()
        assert message in errors_of(html, field)
        assert 'id="layout-result"' not in html

    def test_many_bad_lines_are_summarised(self, editor):
        client = client_for(editor)

        response = plan(client, {**prefilled(client), "history": "nonsense\n" * 40})

        errors = errors_of(response.content.decode(), "history")
        assert "Line 12:" in errors and "Line 13:" not in errors
        assert "…and 28 more problems." in errors

    def test_an_htmx_post_with_errors_is_still_a_422_fragment(self, editor):
        client = client_for(editor)

        response = plan(client, {**prefilled(client), "budget_ratio": "2"}, **HTMX)

        assert response.status_code == 422
        assert response.content.decode().lstrip().startswith('<div id="layout-body"')
