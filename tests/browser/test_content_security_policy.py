"""The Content-Security-Policy holds in a real browser: every page renders and behaves with
scripts and styles from this site only, and the browser reports no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from policies.services import workspace_create
from portal.models import Membership, Role
from tests.browser.pages import a_recalled_memory, a_session, portal_pages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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
    page.get_by_label("Type").select_option("context.assembled")
    expect(page).to_have_url(f"{live_server.url}/w/{slug}/audit/?type=context.assembled")
    page.get_by_label("Workspace").select_option("team-c")
    expect(page).to_have_url(f"{live_server.url}/w/team-c/")
    shot(page, "csp-switched-workspace")
    assert violations == []
