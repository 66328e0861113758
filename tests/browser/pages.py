"""What several browser tests share: a memory carried by a recall, the portal's pages (named
by hand, or every one the URL conf has), what is wider than the screen, and how far a table
overflows."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern

from audit.models import AuditEvent, EventType
from recall.models import MemoryRecord
from tests.helpers import post_recall
from tests.recall import factories


def a_recalled_memory(editor: Any, workload: Any) -> tuple[MemoryRecord, AuditEvent]:
    """ada's one memory and the context.assembled event of the editor's recall that carried it
    (so that every page has something to show)."""
    [memory] = factories.memories(editor.workspace, {"content": "release summary preferences"})
    response = post_recall(editor, workload, query="release")
    assert response.status_code == 200, response.content
    return memory, AuditEvent.objects.filter(type=EventType.ASSEMBLED).get()


def a_session(editor: Any, workload: Any) -> int:
    """A session of ada's with one assembled turn and a compaction run (call after
    ``a_recalled_memory``)."""
    api = editor.api()
    layout = {"memory": {"compaction": {"enabled": True}}}
    response = api.put(f"/v1/workloads/{workload.id}/layout-config", layout, format="json")
    assert response.status_code in (200, 201), response.content
    body = {"actorId": "user:ada", "workloadId": str(workload.id), "environment": "prod"}
    session = api.post("/v1/sessions", body, format="json").json()
    turn = {"messages": [{"role": "user", "content": "release summary"}]}
    response = api.post(f"/v1/sessions/{session['id']}/turns", turn, format="json")
    assert response.status_code == 201, response.content
    response = api.post(f"/v1/sessions/{session['id']}/compact")
    assert response.status_code == 200, response.content
    return int(session["id"])


def portal_pages(slug: str, *, memory_id: int, event_id: int, session_id: int) -> list[str]:
    """The paths of a workspace's pages, one of each kind (a memory's, an event's and a
    session's too); the last is an operator's only."""
    return [
        f"/w/{slug}/",
        f"/w/{slug}/policies/",
        f"/w/{slug}/sandbox/",
        f"/w/{slug}/sandbox/layout/",
        f"/w/{slug}/memories/?actor=user:ada",
        f"/w/{slug}/memories/{memory_id}/",
        f"/w/{slug}/audit/",
        f"/w/{slug}/audit/{event_id}/",
        f"/w/{slug}/maintenance/",
        f"/w/{slug}/maintenance/settings/",
        f"/w/{slug}/sessions/",
        f"/w/{slug}/sessions/{session_id}/",
        f"/w/{slug}/sessions/{session_id}/turns/1/prompt/",
        f"/w/{slug}/settings/access/",
    ]


def wider_than_its_card(page: Any) -> int:
    """How many pixels the page's table is wider than the card that holds it (it then
    scrolls sideways); 0 when it fits."""
    scroll, client = page.locator("div.table-wrap").evaluate("e => [e.scrollWidth, e.clientWidth]")
    return max(0, scroll - client)


# --- every page the URL conf has ---------------------------------------------------------------

# Paths that are not the portal's pages: the API (JSON), Django's admin.
NOT_PAGES = ("v1/", "admin/")
_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(route, URL name) of every pattern, its includes' prefixes joined on."""
    for pattern in patterns:
        if not isinstance(pattern.pattern, RoutePattern):
            continue  # re_path: only the API's catch-all
        route = prefix + str(pattern.pattern)
        if route.startswith(NOT_PAGES):
            continue
        if isinstance(pattern, URLResolver):
            namespace = f"{pattern.namespace}:" if pattern.namespace else ""
            for inner, name in _routes(pattern.url_patterns, route):
                yield inner, namespace + name if name else ""
        elif isinstance(pattern, URLPattern):
            yield route, pattern.name or ""


def url_conf_pages(
    values: Mapping[str, Any], *, per_page: Mapping[str, Mapping[str, Any]] | None = None
) -> list[tuple[str, str]]:
    """(URL name, path) of every route outside the API and the admin, each parameter filled
    in from ``values`` (slug, workload_id, memory_id, ...), or for one page from
    ``per_page[name]`` (a page about a run that can be reverted, say): a new page is walked
    without being listed here. A parameter with no value fails, naming it, so that a new kind
    of page is never skipped silently: give it a value in the test that walks."""
    pages = []
    for route, name in _routes(get_resolver().url_patterns):
        own = {**values, **(per_page or {}).get(name, {})}
        missing = [p for p in _PARAMETER.findall(route) if p not in own]
        assert not missing, f"{name or route}: give the walk a value for {missing}"
        path = _PARAMETER.sub(lambda m, own=own: str(own[m.group(1)]), route)
        pages.append((name, "/" + path))
    return pages


# Elements wider than the screen: an element whose box passes either edge, unless it is inside
# a box that scrolls sideways on purpose (a table's wrapper, a code block). A card's own
# sideways scroll is only the last resort (portal.css) and does not count. Boxes parked off
# the screen on purpose (the skip link) are left out.
_WIDER_THAN_THE_SCREEN = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height || box.right <= 0) continue;
    if (box.right <= width + 1 && box.left >= -1) continue;
    let up = el.parentElement, scrolls = false;
    while (up && up !== document.body) {
      if (getComputedStyle(up).overflowX !== "visible" && !up.classList.contains("card")) {
        scrolls = true;
        break;
      }
      up = up.parentElement;
    }
    if (!scrolls) {
      const what = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
        + (el.classList.length ? "." + [...el.classList].join(".") : "");
      wide.push(`${what} ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  return wide.slice(0, 5);
}"""


def wider_than_the_screen(page: Any) -> list[str]:
    """The elements of the page wider than the screen (at most five), as ``tag#id.class
    left..right``; none on a page that fits."""
    return list(page.evaluate(_WIDER_THAN_THE_SCREEN))
