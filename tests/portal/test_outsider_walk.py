"""Every page, walked as an outsider: another workspace's pages and ids answer 403 or 404, and
no answer carries anything of that workspace.

The API is walked the same way in test_access.py; here the portal's pages, each with workspace
A's slug, and again with the outsider's own slug but A's ids in the path (the probe that the
workspace check alone would not stop, and row-level security does).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from maintenance.services import maintenance_start
from portal.models import ApiToken, Membership
from tests.recall import factories

pytestmark = pytest.mark.django_db

CANARY = "canary-7f3e of workspace a"


def page_patterns() -> list[tuple[str, str]]:
    """(name, route) of every page that names a workspace."""
    found: list[tuple[str, str]] = []

    def walk(patterns: list[Any], prefix: str, namespace: str | None) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace)
            elif (
                isinstance(pattern, URLPattern)
                and prefix.startswith("")
                and "<slug:slug>" in (prefix + str(pattern.pattern))
                and not (prefix + str(pattern.pattern)).startswith("v1/")
            ):
                found.append((f"{namespace}:{pattern.name}", prefix + str(pattern.pattern)))

    walk(get_resolver().url_patterns, "", None)
    return found


PAGES = page_patterns()


@pytest.fixture
def workspace_a_data(operator, workload_a) -> dict[str, Any]:
    memory = factories.memories(
        operator.workspace,
        {"content": CANARY},
        {"content": "expired " + CANARY, "expires_at": "2020-01-01T00:00:00Z"},
    )[0]
    run = maintenance_start(
        workspace=operator.workspace, sweep="expiry", mode="preview", author="t"
    )
    session = (
        operator.api()
        .post(
            "/v1/sessions",
            {"actorId": "user:ada", "workloadId": str(workload_a.id), "environment": "prod"},
            format="json",
        )
        .json()
    )
    operator.api().post(
        f"/v1/sessions/{session['id']}/turns",
        {"messages": [{"role": "user", "content": CANARY}]},
        format="json",
    )
    event = operator.workspace.audit_events.order_by("-id").first()
    token = ApiToken.objects.get(workspace=operator.workspace, name="olga-token")
    member = Membership.objects.get(workspace=operator.workspace, user=operator.user)
    return {
        "session_id": session["id"],
        "turn": "1",
        "workload_id": str(workload_a.id),
        "memory_id": str(memory.pk),
        "event_id": str(event.pk),
        "run_id": str(run.pk),
        "sweep": "expiry",
        "token_id": str(token.pk),
        "member_id": str(member.pk),
    }


def _url(route: str, slug: str, ids: dict[str, Any]) -> str:
    url = route.replace("<slug:slug>", slug)
    for name, value in ids.items():
        for converter in ("uuid", "int", "str"):
            url = url.replace(f"<{converter}:{name}>", value)
    assert "<" not in url, f"no value for a parameter of {route}"
    return "/" + url


def test_the_walk_covers_every_page():
    assert len(PAGES) >= 30
    assert {
        "recall:sandbox", "audit:export-csv", "recall:memory", "maintenance:run", "team:access",
        "team:token-revoke", "team:member-remove",
    } <= {name for name, _ in PAGES}  # fmt: skip


@pytest.mark.parametrize("slug", ["team-a", "team-b"], ids=["a's slug", "own slug, a's ids"])
def test_an_outsider_gets_nothing_of_workspace_a_from_any_page(outsider, workspace_a_data, slug):
    """With A's slug every page is refused (405 for a method a page does not take reveals
    nothing either); with the outsider's own slug, every page naming one of A's objects is a
    404. No answer carries A's memory content or workload id."""
    client = outsider.session()
    names_an_object = (
        "workload_id", "memory_id", "event_id", "run_id", "session_id", "token_id", "member_id",
    )  # fmt: skip
    leaks = []
    for name, route in PAGES:
        url = _url(route, slug, workspace_a_data)
        for method in ("get", "post"):
            response = getattr(client, method)(url)
            body = b"".join(response) if response.streaming else response.content
            text = body.decode(errors="replace")
            refused = response.status_code in (403, 404, 405)
            if (slug == "team-a" or any(f":{key}>" in route for key in names_an_object)) and (
                not refused
            ):
                leaks.append((name, method, response.status_code))
            if CANARY in text or workspace_a_data["workload_id"] in text:
                leaks.append((name, method, "content of workspace a"))

    assert leaks == []


def test_the_premise_a_member_of_a_sees_the_canary(operator, workspace_a_data):
    page = operator.session().get(f"/w/team-a/memories/{workspace_a_data['memory_id']}/")

    assert page.status_code == 200 and CANARY in page.content.decode()
