"""The pages on narrow screens. On a phone (390 px) nothing on any page is wider than the
screen: a wide table scrolls inside its card, a long token breaks beside its Copy button, and
the header takes two short lines and the navigation. On a small laptop (1024 px) the audit
trail's events fit their card."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from maintenance.services import maintenance_start
from team.services import api_token_create
from tests.browser.pages import (
    a_recalled_memory,
    a_session,
    url_conf_pages,
    wider_than_its_card,
    wider_than_the_screen,
)
from tests.browser.test_sandbox import scene  # noqa: F401 (a fixture)
from tests.maintenance.helpers import ago
from tests.maintenance.helpers import memory as a_memory
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def test_no_page_has_anything_wider_than_a_phone(
    page, live_server, login, operator, editor, workload_a, shot
):
    # Every page the URL conf has, new ones included: a page needing a parameter the walk has
    # no value for fails here, naming it.
    memory, event = a_recalled_memory(editor, workload_a)
    session_id = a_session(editor, workload_a)
    run = maintenance_start(
        workspace=operator.workspace, sweep="dedup", mode="preview", author="user:olga"
    )
    # A run to revert: a decay run that changed a memory.
    stale = a_memory(operator.workspace, "Always answer Ada in French", created_at=ago(days=10))
    decay = maintenance_start(
        workspace=operator.workspace, sweep="decay", mode="execute", author="user:olga"
    )
    slug = operator.workspace.slug
    values = {
        "slug": slug,
        "workload_id": workload_a.pk,
        "memory_id": memory.pk,
        "event_id": event.pk,
        "session_id": session_id,
        "turn": 1,
        "run_id": run.pk,
        "sweep": "dedup",
        # The tokens page's forms post to these (POST only: the walk skips them).
        "token_id": 1,
        "member_id": 1,
    }
    # Pages that need a query to show anything: one with it too (or only).
    queries = {"recall:actor-erase": "?actor=user:ada"}
    more = [("recall:memories", f"/w/{slug}/memories/?actor=user:ada")]
    page.set_viewport_size(PHONE)
    login(page, "olga", "pw-olga")
    walked, wider = set(), {}
    per_page = {
        "maintenance:revert": {"run_id": decay.pk},
        "maintenance:reactivate": {"memory_id": stale},
    }
    for name, path in url_conf_pages(values, per_page=per_page) + more:
        path += queries.get(name, "")
        response = page.request.get(live_server.url + path)  # the page's session, no window
        if response.status == 405:
            continue  # a form's target (POST only), not a page
        assert response.status == 200, f"{name} {path}: {response.status}"
        html = "html" in response.headers.get("content-type", "")
        if not html or "<main" not in response.text():
            continue  # an export, or a fragment htmx swaps into its page
        page.goto(live_server.url + path)
        walked.add(name)
        found = wider_than_the_screen(page)
        if found:
            wider[path] = found
    assert wider == {}, f"wider than a 390 px screen: {wider}"
    assert {
        "dashboard",
        "policies:floor",
        "policies:floor-history",
        "policies:workload-policy",
        "policies:workload-history",
        "recall:sandbox",
        "recall:layout",
        "recall:memories",
        "recall:memory",
        "recall:memory-import",
        "recall:event-replay",
        "audit:events",
        "audit:event",
        "maintenance:index",
        "maintenance:settings",
        "maintenance:run",
        "chat:sessions",
        "chat:session",
        "chat:turn-prompt",
    } <= walked, walked
    # The header is compact: about a seventh of the screen (it took a third), and every link
    # of the navigation is on screen, not cut off at the right.
    page.goto(f"{live_server.url}/w/{slug}/")
    header = page.locator("header.topbar").bounding_box()
    assert header is not None and header["height"] <= 150, header
    links = page.locator(".topbar nav a")
    assert links.count() >= 6
    for i in range(links.count()):
        box = links.nth(i).bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"], links.nth(i)
    # The compliance table scrolls inside its card, its workload names kept in view.
    wrap = page.locator("div.table-wrap:has(table.compliance)")
    scroll, client = wrap.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll > client
    wrap.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
    name = page.locator("table.compliance th[scope=row]").first.bounding_box()
    assert name is not None and name["x"] >= 0, name
    shot(page, "narrow-dashboard")
    # The audit trail's table scrolls inside its card; its summaries keep a readable width.
    page.goto(f"{live_server.url}/w/{slug}/audit/")
    summary = page.locator("table.events td.summary").first.bounding_box()
    assert summary is not None and summary["width"] >= 120, summary
    page.goto(f"{live_server.url}/w/{slug}/memories/?actor=user:ada")
    shot(page, "narrow-memories")


@pytest.mark.usefixtures("scene")
def test_a_sandbox_result_fits_a_phone(page, live_server, login, editor, shot):
    # Its hashes ran one character a line and its content column collapsed: the page was
    # ~14,500 px long. Long tokens now break anywhere beside a Copy button, and a table with a
    # text column scrolls inside its card rather than squeeze the text.
    page.set_viewport_size(PHONE)
    login(page, "eddie", "pw-eddie")
    page.goto(f"{live_server.url}/w/team-a/sandbox/")
    page.locator("#id_actor").fill("user:ada")
    page.get_by_label("Query").fill("release summary preferences")
    page.get_by_role("button", name="Run recall").click()
    result = page.locator("#sandbox-result")
    result.wait_for()
    assert wider_than_the_screen(page) == [], wider_than_the_screen(page)
    for value in result.locator("dl.hashes .token-value").all():
        box = value.bounding_box()
        assert box is not None and box["width"] >= 250 and box["height"] <= 60, box
    assert result.locator("dl.hashes button.copy").first.is_visible()
    content = result.locator("#decisions-included td.content").first.bounding_box()
    assert content is not None and content["width"] >= 150, content
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 6000, height
    shot(page, "narrow-sandbox-result")


def test_a_sweeps_runs_fit_its_card_on_a_phone(page, live_server, login, operator, shot):
    # Its few runs' table (run, status, memories, when) fits the card; the recent runs' table
    # below, with seven columns, may scroll inside its own.
    maintenance_start(
        workspace=operator.workspace, sweep="dedup", mode="preview", author="user:olga"
    )
    page.set_viewport_size(PHONE)
    login(page, "olga", "pw-olga")
    page.goto(f"{live_server.url}/w/{operator.workspace.slug}/maintenance/")
    cards = page.locator("section.card.sweep")
    assert cards.locator("table.compact").count() == 1
    card = cards.filter(has=page.locator("table.compact"))
    scroll, client = card.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll <= client, f"the sweep's card scrolls {scroll - client} px sideways"
    shot(page, "narrow-maintenance")


@pytest.mark.parametrize("width", [1280, 1024])
def test_the_audit_trail_fits_its_card(
    page, live_server, login, operator, editor, workload_a, width, shot
):
    # The widest rows of the demo's trail: tokens issued and revoked, whose summaries hold an
    # unbroken key prefix, and a recall by an agent's token for a team.
    for name in ("onboarding_guide", "support_assistant"):
        api_token_create(workspace=operator.workspace, name=name, role="editor", replace=True)
    _, raw = api_token_create(
        workspace=operator.workspace, name="release_planner", role="editor", replace=True
    )
    factories.memories(
        operator.workspace, {"content": "release summary preferences"}, actor_id="team:platform"
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.post(
        "/v1/memory/actors/team:platform/recall",
        {"workloadId": str(workload_a.id), "environment": "prod", "query": "release"},
        format="json",
    )
    assert response.status_code == 200, response.content
    page.set_viewport_size({"width": width, "height": 900})
    login(page, "olga", "pw-olga")
    page.goto(f"{live_server.url}/w/{operator.workspace.slug}/audit/")
    assert wider_than_its_card(page) == 0
    shot(page, f"audit-trail-{width}")


def test_an_import_report_fits_a_phone(page, live_server, login, operator, shot):
    # An unknown key's message lists the keys a memory takes: it wraps inside the report,
    # and the line numbers stay on one line.
    lines = [
        '{"content": "fine", "memoryType": "fact", "sourceKind": "user"}',
        '{"content": "typo", "memoryTyp": "fact", "sourceKind": "user"}',
        '{"content": "far", "memoryType": "fact", "sourceKind": "user", "colour": 1}',
    ]
    page.set_viewport_size(PHONE)
    login(page, "olga", "pw-olga")
    page.goto(f"{live_server.url}/w/{operator.workspace.slug}/memories/import/")
    page.fill("input[name=actor]", "user:bob")
    page.set_input_files(
        "input[type=file]",
        {"name": "bad.jsonl", "mimeType": "application/jsonl", "buffer": "\n".join(lines).encode()},
    )
    page.click("form:has(input[type=file]) button[type=submit]")
    report = page.locator(".report")
    report.wait_for()
    assert "did you mean 'memoryType'?" in report.inner_text()
    scroll, client = report.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll <= client, f"the import report is {scroll - client} px wider than its box"
    # "Line 2" is laid out as one line of text (one client rect).
    rects = report.locator("td.line").first.evaluate(
        "c => { const r = document.createRange(); r.selectNodeContents(c);"
        " return r.getClientRects().length; }"
    )
    assert rects == 1
    shot(page, "narrow-import-report")
