"""The pages on a phone-sized screen (390 px): nothing widens the page itself. A wide table
scrolls inside its card; the navigation wraps onto a second line."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent, EventType
from tests.recall import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_no_page_is_wider_than_a_phone(
    page, live_server, login, operator, editor, workload_a, shot
):
    [memory] = factories.memories(operator.workspace, {"content": "release summary preferences"})
    editor.api().post(
        "/v1/memory/actors/user:ada/recall",
        {"workloadId": str(workload_a.id), "environment": "prod", "query": "release"},
        format="json",
    )
    event = AuditEvent.objects.filter(type=EventType.ASSEMBLED).get()
    slug = operator.workspace.slug
    page.set_viewport_size(PHONE)
    login(page, "olga", "pw-olga")
    paths = [
        f"/w/{slug}/",
        f"/w/{slug}/policies/",
        f"/w/{slug}/sandbox/",
        f"/w/{slug}/sandbox/layout/",
        f"/w/{slug}/memories/?actor=user:ada",
        f"/w/{slug}/memories/{memory.pk}/",
        f"/w/{slug}/audit/",
        f"/w/{slug}/audit/{event.pk}/",
        f"/w/{slug}/maintenance/",
        f"/w/{slug}/maintenance/settings/",
    ]
    wider = {}
    for path in paths:
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
    page.goto(f"{live_server.url}/w/{slug}/memories/?actor=user:ada")
    shot(page, "narrow-memories")
