"""Audit pages: the filtered, paginated trail, one event, exports and the chain check.

The list, its htmx fragment and both exports read through ``audit.selectors.audit_events``
(the same filterset as the API), so what you filter is what you export.

The event page shows what an event is about first, in the words of the app that recorded it
(its presenter, ``audit.presenters``: a policy's change, a recall's request, a run's counts);
the hashes come after, and the chain links last, folded. These pages import no app above
audit; they link to other apps' pages by URL name only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from audit.exports import csv_lines, jsonl_lines
from audit.filtersets import EventTypesField
from audit.keys import signing_key
from audit.memory_events import memory_relation
from audit.models import AuditEvent, EventType
from audit.presenters import Shown, listed_payloads, payload_of, presenter_for, type_groups
from audit.selectors import audit_events
from audit.services import audit_chain_check
from portal.errors import ValidationFailed
from portal.http import HtmxHttpRequest
from portal.pages import workspace_page

PAGE_SIZE = 50
FILTER_FIELDS = ("workload", "actor", "environment", "author", "since", "until", "memory")


def _filter_query(request: HttpRequest) -> str:
    """The current filters as a query string, without the page number or empty values (a
    repeated filter, the types, keeps each of its values)."""
    params = QueryDict(mutable=True)
    for key, values in request.GET.lists():
        kept = [value for value in values if value]
        if key != "page" and kept:
            params.setlist(key, kept)
    return params.urlencode()


def _chosen_types(request: HttpRequest) -> list[str]:
    """The types asked for, read as the filter reads them (repeated or comma-separated)."""
    return EventTypesField().to_python(request.GET.getlist("type"))


# --- the list --------------------------------------------------------------------------------


class Row(NamedTuple):
    """An event as the list shows it."""

    event: AuditEvent
    workload: str | None  # its workload's name
    title: str  # its type, in words
    summary: str
    hint: str  # the summary's tooltip
    relation: str  # filtered by a memory: how the event concerns it ("in a context", "changed")


def _row(
    event: AuditEvent, payload: Mapping[str, Any], workloads: dict[Any, str], memory: bool
) -> Row:
    presenter = presenter_for(event.type)
    return Row(
        event,
        workloads.get(event.workload_id),
        presenter.title,
        presenter.summary(event, payload),
        presenter.row_hint(event, payload),
        memory_relation(event) if memory else "",
    )


@login_required
@require_GET
def events(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    workloads = dict(workspace.workloads.order_by("name").values_list("id", "name"))
    filter_errors: dict[str, str] = {}
    try:
        queryset = audit_events(workspace=workspace, filters=request.GET)
    except ValidationFailed as exc:
        filter_errors = dict(exc.details["fields"])
        queryset = AuditEvent.objects.none()
    chosen = _chosen_types(request)
    known = set(EventType.values)
    if "type" in filter_errors:
        # The API's message lists every code; the page offers them as boxes to tick instead.
        unknown = ", ".join(f"“{t}”" for t in dict.fromkeys(chosen) if t not in known)
        filter_errors["type"] = f"Not an event type: {unknown}. Tick the types in the list."
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    query = _filter_query(request)
    memory = bool(request.GET.get("memory")) and not filter_errors
    events = list(page.object_list)
    payloads = listed_payloads(events)
    context = {
        **access.context(),
        "page": page,
        "rows": [_row(e, payloads[e.pk], workloads, memory) for e in events],
        "by_memory": memory,
        "filters": {name: request.GET.get(name, "") for name in FILTER_FIELDS},
        "filter_errors": filter_errors,
        "type_groups": type_groups(),
        "chosen_types": set(chosen),
        "chosen_titles": [presenter_for(t).title for t in dict.fromkeys(chosen) if t in known],
        "workloads": sorted(workloads.items(), key=lambda item: item[1]),
        "environments": list(workspace.environments.values_list("slug", flat=True)),
        "query": query,
        "page_prefix": f"?{query}&page=" if query else "?page=",
    }
    # A history restore (Back after hx-push-url, cache miss) must get the whole page.
    if request.htmx and not request.htmx.boosted and not request.htmx.history_restore_request:
        # htmx would push every empty filter field into the address bar; push the clean URL.
        number = f"page={page.number}" if page.number > 1 else ""
        clean = "&".join(part for part in (query, number) if part)
        # The picker's summary (outside the fragment) follows the types ticked.
        response = render(request, "audit/_results.html", {**context, "oob": True})
        return push_url(response, f"{request.path}?{clean}" if clean else request.path)
    return render(request, "audit/events.html", context, status=400 if filter_errors else 200)


# --- exports and the chain check ---------------------------------------------------------------


def _export(request: HttpRequest, slug: str, lines: Any, content_type: str, ext: str) -> Any:
    access = workspace_page(request, slug)
    try:
        queryset = audit_events(workspace=access.workspace, filters=request.GET)
    except ValidationFailed as exc:
        problems = "; ".join(f"{k}: {v}" for k, v in exc.details["fields"].items())
        return HttpResponse(
            f"The audit filters are not valid: {problems}\n", status=400, content_type="text/plain"
        )
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response = StreamingHttpResponse(lines(queryset), content_type=content_type)
    filename = f"audit-{access.workspace.slug}-{stamp}.{ext}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def export_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse | HttpResponse:
    return _export(request, slug, csv_lines, "text/csv; charset=utf-8", "csv")


@login_required
@require_GET
def export_jsonl(request: HttpRequest, slug: str) -> StreamingHttpResponse | HttpResponse:
    return _export(request, slug, jsonl_lines, "application/x-ndjson; charset=utf-8", "jsonl")


@login_required
@require_GET
def verify(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The list page loads the routine check lazily (hx-trigger="load"): the events appended
    since the last check. "Check every event" (``?full=1``) and the page itself, without
    htmx, walk the whole chain."""
    access = workspace_page(request, slug)
    full = request.GET.get("full") == "1" or not request.htmx
    check = audit_chain_check(workspace=access.workspace, full=full)
    context = {
        **access.context(),
        "verdict": check.verdict,
        "check": check,
        "checked_at": timezone.now(),
        "key_id": signing_key().id,
        "newest_anchor_at": parse_datetime(check.newest_anchor_at or ""),
        "anchor_file_set": bool(settings.AUDIT_ANCHOR_FILE),
    }
    if request.htmx:
        return render(request, "audit/_verify.html", context)
    return render(request, "audit/verify.html", context)


# --- one event: the page --------------------------------------------------------------------------


@login_required
@require_GET
def event(request: HttpRequest, slug: str, event_id: int) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    item = get_object_or_404(
        AuditEvent.objects.select_related("stored_query"), pk=event_id, workspace=workspace
    )
    workload = (
        workspace.workloads.filter(pk=item.workload_id).only("id", "name", "archived_at").first()
        if item.workload_id
        else None
    )
    payload = payload_of(item)
    presenter = presenter_for(item.type)
    shown = Shown(item, payload, workspace, workload)
    neighbours = workspace.audit_events.only("id")
    context = {
        **access.context(),
        "event": item,
        "title": presenter.title,
        "workload": workload,
        "payload": payload,
        "presenter_template": presenter.template,
        "no_environment": presenter.no_environment,
        "first_version": presenter.first_version(shown),
        "changes": presenter.changes(shown),
        "facts": presenter.facts(shown),
        **presenter.context(shown),
        "payload_json": _pretty(item.payload),
        "previous": neighbours.filter(pk__lt=item.pk).order_by("-pk").first(),
        "following": neighbours.filter(pk__gt=item.pk).order_by("pk").first(),
    }
    return render(request, "audit/event.html", context)


def _pretty(payload: Any) -> str:
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
