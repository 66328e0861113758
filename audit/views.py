"""Audit pages: the filtered, paginated trail, one event, exports and the chain check.

The list, its htmx fragment and both exports read through ``audit.selectors.audit_events``
(the same filterset as the API), so what you filter is what you export.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from audit.exports import csv_lines, jsonl_lines
from audit.models import AuditEvent, EventType
from audit.selectors import audit_events
from audit.services import audit_chain_check
from policies import algebra
from policies.forms import diff_rows, floor_document
from policies.services import workspace_store_queries_set
from portal.errors import ValidationFailed
from portal.http import HtmxHttpRequest
from portal.models import Role
from portal.pages import workspace_page
from recall.page_selectors import memories_present

PAGE_SIZE = 50
FILTER_FIELDS = ("type", "workload", "actor", "environment", "author", "since", "until", "memory")
# The recall funnel, in the order rows pass through it.
COUNT_ORDER = ("candidates", "afterPolicy", "afterRanking", "afterBudgetAllocation")


def _filter_query(request: HttpRequest) -> str:
    """The current filters as a query string, without the page number."""
    params = request.GET.copy()
    params.pop("page", None)
    for key in list(params):
        if not params.get(key):
            params.pop(key)
    return params.urlencode()


def summary(event: AuditEvent) -> str:
    """One line about an event for the list: what changed or what was assembled."""
    payload = event.payload or {}
    if event.type in (EventType.WORKSPACE_POLICY_SET, EventType.WORKLOAD_POLICY_SET):
        # jsonb keeps keys in its own order: list the axes in the algebra's order.
        order = {name: n for n, name in enumerate(algebra.AXES)}
        axes = sorted(payload.get("diff") or {}, key=lambda a: (order.get(a, len(order)), a))
        changed = ", ".join(axes) or "no axis changed"
        comment = payload.get("comment")
        text = f"v{payload.get('version')}: {changed}"
        return f"{text} — “{comment}”" if comment else text
    if event.type == EventType.ASSEMBLED:
        tokens = payload.get("tokenCounts") or {}
        counts = payload.get("counts") or {}
        reused = " · prefix reused" if payload.get("reused") else ""
        return (
            f"{counts.get('afterBudgetAllocation', '?')} of {counts.get('candidates', '?')}"
            f" memories · {tokens.get('used', '?')}/{tokens.get('budget', '?')} tokens{reused}"
        )
    if event.type == EventType.MEMORY_ERASED:
        count = payload.get("count", "?")
        return f"erased {count} memor{'y' if count == 1 else 'ies'} of {event.actor_id}"
    if event.type == EventType.WORKSPACE_SETTINGS_SET and "storeQueries" in payload:
        after = (payload["storeQueries"] or {}).get("after")
        return "recall queries stored" if after else "recall queries not stored"
    if "name" in payload:
        return str(payload["name"])
    return ""


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
        filter_errors = exc.details["fields"]
        queryset = AuditEvent.objects.none()
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    query = _filter_query(request)
    context = {
        **access.context(),
        "page": page,
        "rows": [(e, workloads.get(e.workload_id), summary(e)) for e in page.object_list],
        "filters": {name: request.GET.get(name, "") for name in FILTER_FIELDS},
        "filter_errors": filter_errors,
        "types": EventType.choices,
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
        response = render(request, "audit/_results.html", context)
        return push_url(response, f"{request.path}?{clean}" if clean else request.path)
    return render(request, "audit/events.html", context, status=400 if filter_errors else 200)


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
    }
    if request.htmx:
        return render(request, "audit/_verify.html", context)
    return render(request, "audit/verify.html", context)


def _policy_diff(event: AuditEvent) -> list[Any]:
    """The change an event records, from its before/after (the stored diff as a fallback)."""
    payload = event.payload or {}
    before, after = payload.get("before"), payload.get("after")
    try:
        if event.type == EventType.WORKSPACE_POLICY_SET and isinstance(after, dict):
            old = floor_document(before["policy"], before["relaxableAxes"]) if before else {}
            new = floor_document(after["policy"], after["relaxableAxes"])
            return diff_rows(algebra.diff_documents(old, new), before=old, after=new)
        if event.type == EventType.WORKLOAD_POLICY_SET and isinstance(after, dict):
            old = before or {}
            return diff_rows(
                algebra.diff_documents(old, after),
                before=old,
                after=after,
                missing="inherits floor",
            )
    except (KeyError, TypeError):
        pass  # an older payload shape: fall back to the diff stored with the event
    return diff_rows(payload.get("diff") or {})


def _funnel(counts: Any) -> list[tuple[str, Any]]:
    """Recall counts in funnel order, any other keys after them."""
    if not isinstance(counts, dict):
        return []
    known = [(name, counts[name]) for name in COUNT_ORDER if name in counts]
    return known + sorted((k, v) for k, v in counts.items() if k not in COUNT_ORDER)


@login_required
@require_GET
def event(request: HttpRequest, slug: str, event_id: int) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    item = get_object_or_404(AuditEvent, pk=event_id, workspace=workspace)
    workload = (
        workspace.workloads.filter(pk=item.workload_id).only("id", "name").first()
        if item.workload_id
        else None
    )
    payload = item.payload if isinstance(item.payload, dict) else {}
    tokens: dict[str, Any] = (
        payload["tokenCounts"] if isinstance(payload.get("tokenCounts"), dict) else {}
    )
    is_policy = item.type in (EventType.WORKSPACE_POLICY_SET, EventType.WORKLOAD_POLICY_SET)
    is_assembled = item.type == EventType.ASSEMBLED
    neighbours = workspace.audit_events.only("id")
    context = {
        **access.context(),
        "event": item,
        "workload": workload,
        "payload": payload,
        "is_policy": is_policy,
        "is_assembled": is_assembled,
        "carried": _carried(workspace, payload) if is_assembled else [],
        "versions": versions
        if isinstance(versions := payload.get("policyVersions"), dict)
        else None,
        "is_maintenance": item.type.startswith("maintenance.") and "runId" in payload,
        "diff": _policy_diff(item) if is_policy else [],
        "counts": _funnel(payload.get("counts")),
        "token_counts": tokens,
        "per_kind": sorted((tokens.get("perKind") or {}).items()),
        "payload_json": _pretty(item.payload),
        "previous": neighbours.filter(pk__lt=item.pk).order_by("-pk").first(),
        "following": neighbours.filter(pk__gt=item.pk).order_by("pk").first(),
    }
    return render(request, "audit/event.html", context)


@dataclass(frozen=True)
class Carried:
    """A memory an envelope carried, as the event page lists it."""

    id: int
    truncated: bool
    present: bool  # False once the memory was deleted or erased


def _carried(workspace: Any, payload: dict[str, Any]) -> list[Carried]:
    """The event's memory ids (entries, then truncated refs), each marked present or gone."""
    listed = [
        (int(pk), truncated)
        for key, truncated in (("memoryIds", False), ("truncatedIds", True))
        for pk in (payload.get(key) or [])
        if str(pk).isdigit()
    ]
    present = memories_present(workspace=workspace, ids=[pk for pk, _ in listed])
    return [Carried(pk, truncated, pk in present) for pk, truncated in listed]


def _pretty(payload: Any) -> str:
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)


@login_required
@require_POST
def query_storage(request: HttpRequest, slug: str) -> HttpResponse:
    """Switch whether assembled events keep the query text: operators only, audited."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    choice = request.POST.get("store")
    if choice not in ("on", "off"):
        messages.error(request, "Choose to store queries or not.")
    else:
        workspace_store_queries_set(
            workspace=access.workspace, enabled=choice == "on", author=access.caller.label
        )
        messages.success(
            request,
            "Recall queries are stored from now on."
            if choice == "on"
            else "Recall queries are no longer stored (those already stored stay).",
        )
    return redirect("audit:events", slug=slug)
