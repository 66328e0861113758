"""The Content-Security-Policy holds in a real browser: every page renders and behaves with
scripts and styles from this site only, and the browser reports no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies.services import workspace_create
from portal.models import Membership, Role
from tests.browser.pages import a_recalled_memory, a_session, portal_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_no_page_breaks_the_policy(page, live_server, login, operator, editor, workload_a, shot):
    violations: list[str] = []
    page.on(
        "console",
        lambda m: (
            violations.append(f"{page.url}: {m.text[:90]}")
            if "Content Security Policy" in m.text
            else None
        ),
    )
    page.on("pageerror", lambda e: violations.append(f"page error: {e}"))
    memory, event = a_recalled_memory(editor, workload_a)
    session_id = a_session(editor, workload_a)
    other = workspace_create(slug="team-c", name="Team C", author="system:test")
    Membership.objects.create(user=operator.user, workspace=other, role=Role.VIEWER)
    slug = operator.workspace.slug

    login(page, "olga", "pw-olga")
    paths = [
        *portal_pages(slug, memory_id=memory.pk, event_id=event.pk, session_id=session_id),
        f"/w/{slug}/workloads/{workload_a.pk}/policy/",
        "/v1/docs/",
    ]
    for path in paths:
        response = page.goto(live_server.url + path)
        assert response is not None and response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_load_state("networkidle")
    expect(page.locator(".swagger-ui")).to_be_visible()  # the split view's script ran

    # htmx still works (the audit filters swap the results), and so does the portal's own
    # script (the workspace switcher navigates).
    page.goto(f"{live_server.url}/w/{slug}/audit/")
    page.get_by_text("Event types:").click()
    page.get_by_label("Context assembled").check()
    expect(page).to_have_url(f"{live_server.url}/w/{slug}/audit/?type=context.assembled")
    page.get_by_label("Workspace", exact=True).select_option("team-c")
    expect(page).to_have_url(f"{live_server.url}/w/team-c/")
    shot(page, "csp-switched-workspace")
    assert violations == []


def test_clicking_through_the_htmx_forms_reports_no_violation(
    page, live_server, login, operator, editor, workload_a, shot
):
    # htmx would add its indicator <style> and may set style attributes while it swaps: the
    # portal turns that off (includeIndicatorStyles: false), so a real click-through through
    # the forms that swap (the sandbox, an import, a sweep's preview, the audit filters, the
    # floor's impact preview, a workload's live check) reports nothing.
    reports: list[str] = []
    page.on(
        "console",
        lambda m: reports.append(f"{page.url}: {m.text[:120]}") if "Content" in m.text else None,
    )
    page.on("pageerror", lambda e: reports.append(f"page error: {e}"))
    a_recalled_memory(editor, workload_a)
    slug = operator.workspace.slug
    login(page, "olga", "pw-olga")

    page.goto(f"{live_server.url}/w/{slug}/sandbox/")
    page.locator("#id_actor").fill("user:ada")
    page.get_by_label("Query").fill("release")
    page.get_by_label("Compare: run the saved policy").check()
    page.get_by_role("button", name="Run recall").click()
    page.locator("#sandbox-result").wait_for()
    page.get_by_label("Compare: run the saved policy").uncheck()
    page.get_by_role("button", name="Run recall").click()
    page.locator("#sandbox-result").wait_for()

    page.goto(f"{live_server.url}/w/{slug}/memories/import/")
    page.fill("input[name=actor]", "user:bob")
    lines = '{"content": "fine", "memoryType": "fact", "sourceKind": "user"}\n{"oops": 1}'
    page.set_input_files(
        "input[type=file]",
        {"name": "bad.jsonl", "mimeType": "application/jsonl", "buffer": lines.encode()},
    )
    page.click("form:has(input[type=file]) button[type=submit]")
    page.locator(".report").wait_for()

    page.goto(f"{live_server.url}/w/{slug}/maintenance/")
    page.get_by_role("button", name="Preview expiry").click()
    page.wait_for_load_state("networkidle")

    page.goto(f"{live_server.url}/w/{slug}/audit/")
    page.get_by_text("Event types:").click()
    page.get_by_label("Context assembled").check()
    expect(page).to_have_url(f"{live_server.url}/w/{slug}/audit/?type=context.assembled")
    page.wait_for_load_state("networkidle")

    page.goto(f"{live_server.url}/w/{slug}/policies/")
    page.locator("#id_ax-confidenceMin").fill("0.5")
    page.get_by_role("button", name="Preview impact").click()
    page.locator("#impact table").wait_for()
    page.goto(f"{live_server.url}/w/{slug}/workloads/{workload_a.pk}/policy/?environment=prod")
    axis = page.locator("#axis-sensitivityCeiling")
    axis.get_by_label("Set for this workload").check()
    axis.get_by_label("sensitivityCeiling").select_option("restricted")
    page.locator("#err-sensitivityCeiling button.set-floor").click()
    page.locator("#impact table").wait_for()
    page.wait_for_load_state("networkidle")
    shot(page, "csp-click-through")
    assert reports == []
