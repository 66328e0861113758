"""The pages on narrow screens. On a phone (390 px) nothing widens the page itself: a wide
table scrolls inside its card, and the navigation wraps onto a second line. On a small laptop
(1024 px) the audit trail's events fit their card."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from maintenance.services import maintenance_start
from team.services import api_token_create
from tests.browser.pages import a_recalled_memory, a_session, portal_pages, wider_than_its_card
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_no_page_is_wider_than_a_phone(
    page, live_server, login, operator, editor, workload_a, shot
):
    memory, event = a_recalled_memory(editor, workload_a)
    session_id = a_session(editor, workload_a)
    slug = operator.workspace.slug
    page.set_viewport_size(PHONE)
    login(page, "olga", "pw-olga")
    wider = {}
    for path in portal_pages(slug, memory_id=memory.pk, event_id=event.pk, session_id=session_id):
        response = page.goto(live_server.url + path)
        assert response is not None and response.status == 200, path
        extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        if extra > 0:
            wider[path] = extra
    assert wider == {}, f"pages wider than the screen (px): {wider}"
    # Every link of the navigation is on screen, not cut off at the right.
    links = page.locator(".topbar nav a")
    assert links.count() >= 6
    for i in range(links.count()):
        box = links.nth(i).bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"], links.nth(i)
    # The audit trail's table scrolls inside its card; its summaries keep a readable width.
    page.goto(f"{live_server.url}/w/{slug}/audit/")
    summary = page.locator("table.events td.summary").first.bounding_box()
    assert summary is not None and summary["width"] >= 120, summary
    page.goto(f"{live_server.url}/w/{slug}/memories/?actor=user:ada")
    shot(page, "narrow-memories")


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
