"""Audit pages: the filtered, paginated trail, one event, exports and the chain check.

The list, its htmx fragment and both exports read through ``audit.selectors.audit_events``
(the same filterset as the API), so what you filter is what you export.

The event page shows what an event is about first (a policy's change, a recall's request,
counts, tokens and memories, a token's or a workload's fields) in the words of
``policies.labels``; the hashes come after, and the chain links last, folded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from audit.exports import changed_names, csv_lines, jsonl_lines
from audit.keys import signing_key
from audit.models import AuditEvent, EventType
from audit.selectors import audit_events
from audit.services import audit_chain_check
from maintenance.lifecycle import SETTINGS_BY_NAME
from maintenance.words import STATUS_BADGES, SWEEP_TITLES, setting_value
from policies import algebra, labels
from policies.forms import diff_rows, floor_document
from policies.models import Workload
from policies.services import workspace_store_queries_set
from portal.errors import ValidationFailed
from portal.http import HtmxHttpRequest
from portal.models import Role, Workspace
from portal.pages import workspace_page
from recall.page_selectors import memories_present

PAGE_SIZE = 50
FILTER_FIELDS = ("type", "workload", "actor", "environment", "author", "since", "until", "memory")
# The recall funnel, in the order rows pass through it.
COUNT_ORDER = ("candidates", "afterPolicy", "afterRanking", "afterBudgetAllocation")
# A memory event names up to 1,000 ids; the page links this many and counts the rest.
IDS_LINKED = 50

# What happened, as the event page's title says it.
EVENT_TITLES: dict[str, str] = {
    EventType.WORKSPACE_POLICY_SET: "Operator floor saved",
    EventType.WORKLOAD_POLICY_SET: "Workload policy saved",
    EventType.ASSEMBLED: "Context assembled",
    EventType.WORKSPACE_RENAMED: "Workspace renamed",
    EventType.WORKSPACE_SETTINGS_SET: "Workspace setting changed",
    EventType.WORKLOAD_CREATED: "Workload created",
    EventType.WORKLOAD_UPDATED: "Workload changed",
    EventType.WORKLOAD_DELETED: "Workload deleted",
    EventType.WORKLOAD_ARCHIVED: "Workload archived",
    EventType.MEMORY_CHANGED: "Memories changed",
    EventType.MEMORY_ERASED: "Actor erased",
    EventType.MAINTENANCE_EXECUTED: "Maintenance run executed",
    EventType.MAINTENANCE_PREVIEWED: "Maintenance run previewed",
    EventType.LIFECYCLE_SETTINGS_SET: "Lifecycle settings saved",
    EventType.ARCHIVE_RESTORED: "Retention archive restored",
    EventType.LAYOUT_CONFIG_SET: "Chat layout configuration saved",
    EventType.TOKEN_ISSUED: "API token issued",
    EventType.TOKEN_REVOKED: "API token revoked",
}
assert set(EVENT_TITLES) == set(EventType.values), "every event type has a title"

# How the eligible memories were ranked (the envelope's ``accessPath``).
ACCESS_PATHS: dict[str, str] = {
    "exact": "exact search",
    "hnsw": "approximate search (HNSW index)",
    "none": "nothing to rank",
}

POLICY_TYPES = (EventType.WORKSPACE_POLICY_SET, EventType.WORKLOAD_POLICY_SET)
MAINTENANCE_RUN_TYPES = (EventType.MAINTENANCE_EXECUTED, EventType.MAINTENANCE_PREVIEWED)


def _filter_query(request: HttpRequest) -> str:
    """The current filters as a query string, without the page number."""
    params = request.GET.copy()
    params.pop("page", None)
    for key in list(params):
        if not params.get(key):
            params.pop(key)
    return params.urlencode()


# --- the list --------------------------------------------------------------------------------


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _memories(n: Any) -> str:
    return f"{_number(n)} memor{'y' if n == 1 else 'ies'}"


def _quoted(text: str, comment: Any) -> str:
    return f"{text} — “{comment}”" if comment else text


def _changed_labels(payload: Mapping[str, Any]) -> str:
    return ", ".join(labels.axis_label(name) for name in changed_names(payload))


def summary(event: AuditEvent) -> str:
    """One line about an event for the list: what changed, what was assembled, for whom."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    kind = event.type
    if kind in POLICY_TYPES:
        version = f"v{payload.get('version')}"
        changed = _changed_labels(payload)
        if _is_first_version(event):
            # The first floor sets every axis; a first workload policy, the axes it names.
            text = f"{version} created"
            if kind == EventType.WORKLOAD_POLICY_SET:
                text += f": {changed or 'inherits the floor'}"
        else:
            text = f"{version}: {changed or 'no axis changed'}"
        return _quoted(text, payload.get("comment"))
    if kind == EventType.ASSEMBLED:
        tokens = payload.get("tokenCounts") or {}
        counts = payload.get("counts") or {}
        reused = " · prefix reused" if payload.get("reused") else ""
        return (
            f"{_number(counts.get('afterBudgetAllocation', '?'))} of "
            f"{_memories(counts.get('candidates', '?'))} · "
            f"{_number(tokens.get('used', '?'))} of {_number(tokens.get('budget', '?'))} tokens"
            f"{reused}"
        )
    if kind == EventType.MEMORY_ERASED:
        return f"erased {_memories(payload.get('count', '?'))} of {event.actor_id}"
    if kind == EventType.MEMORY_CHANGED:
        count = payload.get("count", len(payload.get("ids") or []))
        fields = ", ".join(labels.value_label(f) for f in changed_names(payload))
        text = f"{payload.get('action', 'changed')} {_memories(count)}"
        return f"{text}: {fields}" if fields else text
    if kind == EventType.WORKSPACE_SETTINGS_SET and "storeQueries" in payload:
        after = (payload["storeQueries"] or {}).get("after")
        return "recall queries stored" if after else "recall queries not stored"
    if kind == EventType.WORKSPACE_RENAMED:
        return f"{payload.get('before')} → {payload.get('after')}"
    if kind == EventType.WORKLOAD_UPDATED:
        return "; ".join(
            f"{name}: {_text(change.get('before'), 40)} → {_text(change.get('after'), 40)}"
            for name, change in (payload.get("changes") or {}).items()
            if isinstance(change, dict)
        )
    if kind in (EventType.TOKEN_ISSUED, EventType.TOKEN_REVOKED):
        return f"{payload.get('name')} ({payload.get('role')}), {payload.get('prefix')}…"
    if kind in MAINTENANCE_RUN_TYPES:
        counts = payload.get("counts") or {}
        sweep = _sweep(payload)
        text = (
            f"{sweep} {payload.get('mode')}, {payload.get('status')}:"
            f" {_number(counts.get('listed'))} listed"
        )
        if payload.get("mode") == "execute":
            text += f", {_number(counts.get('applied', 0))} changed"
        return text
    if kind == EventType.LIFECYCLE_SETTINGS_SET:
        names = [_setting_label(name) for name in changed_names(payload)]
        return _quoted(f"v{payload.get('version')}: {', '.join(names)}", payload.get("comment"))
    if kind == EventType.ARCHIVE_RESTORED:
        return (
            f"run #{payload.get('runId')}: {_number(payload.get('restored'))} restored, "
            f"{_number(payload.get('alreadyPresent'))} already present"
        )
    if kind == EventType.LAYOUT_CONFIG_SET:
        changed = ", ".join(payload.get("changed") or []) or "no change"
        return _quoted(f"v{payload.get('version')}: {changed}", payload.get("comment"))
    if "name" in payload:
        return str(payload["name"])
    return ""


def _sweep(payload: Mapping[str, Any]) -> str:
    sweep = str(payload.get("sweep", "—"))
    return SWEEP_TITLES.get(sweep, sweep)


def _text(value: Any, limit: int = 0) -> str:
    """A free-text field's value (cut to ``limit`` characters, if given); an empty one says so."""
    if value in (None, ""):
        return "(empty)"
    text = str(value)
    if limit and len(text) > limit:
        return text[: limit - 1].rstrip(" ,;:.") + "…"
    return text


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


# --- one event: a versioned document's change ---------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One changed key of a versioned document (a policy axis, a lifecycle setting)."""

    key: str  # the API name, shown as a secondary hint
    label: str
    before: str
    after: str


def _policy_changes(event: AuditEvent) -> list[Change]:
    """The change a policy event records, from its before/after (the stored diff as a
    fallback). A first version lists what it set, with nothing before."""
    payload = event.payload or {}
    before, after = payload.get("before"), payload.get("after")
    rows: list[Any]
    try:
        if event.type == EventType.WORKSPACE_POLICY_SET and isinstance(after, dict):
            old = floor_document(before["policy"], before["relaxableAxes"]) if before else {}
            new = floor_document(after["policy"], after["relaxableAxes"])
            rows = diff_rows(algebra.diff_documents(old, new), before=old, after=new)
        elif event.type == EventType.WORKLOAD_POLICY_SET and isinstance(after, dict):
            old = before or {}
            rows = diff_rows(
                algebra.diff_documents(old, after),
                before=old,
                after=after,
                missing="inherits floor",
            )
        else:
            rows = diff_rows(payload.get("diff") or {})
    except (KeyError, TypeError):
        # an older payload shape: fall back to the diff stored with the event
        rows = diff_rows(payload.get("diff") or {})
    return [Change(r.axis, labels.axis_label(r.axis), r.before, r.after) for r in rows]


def _setting_label(name: str) -> str:
    setting = SETTINGS_BY_NAME.get(name)
    return setting.label if setting is not None else name


def _setting_text(name: str, value: Any) -> str:
    if value is None:
        return "—"
    try:
        return setting_value(name, value)
    except (KeyError, TypeError, ValueError):  # a setting that no longer exists
        return str(value)


def _settings_changes(payload: Mapping[str, Any]) -> list[Change]:
    diff: dict[str, Any] = payload["diff"] if isinstance(payload.get("diff"), dict) else {}
    return [
        Change(
            name,
            _setting_label(name),
            _setting_text(name, change.get("before")),
            _setting_text(name, change.get("after")),
        )
        for name, change in diff.items()
        if isinstance(change, dict)
    ]


def _changes(event: AuditEvent) -> list[Change]:
    if event.type in POLICY_TYPES:
        return _policy_changes(event)
    if event.type == EventType.LIFECYCLE_SETTINGS_SET:
        return _settings_changes(event.payload if isinstance(event.payload, dict) else {})
    return []


def _is_first_version(event: AuditEvent) -> bool:
    payload = event.payload or {}
    return "before" in payload and payload["before"] is None


# --- one event: a context.assembled --------------------------------------------------------------


@dataclass(frozen=True)
class Carried:
    """A memory an envelope carried, as the event page lists it."""

    id: int
    truncated: bool
    present: bool  # False once the memory was deleted or erased


def _carried(workspace: Workspace, payload: dict[str, Any]) -> list[Carried]:
    """The event's memory ids (entries, then truncated refs), each marked present or gone."""
    listed = [
        (int(pk), truncated)
        for key, truncated in (("memoryIds", False), ("truncatedIds", True))
        for pk in (payload.get(key) or [])
        if str(pk).isdigit()
    ]
    present = memories_present(workspace=workspace, ids=[pk for pk, _ in listed])
    return [Carried(pk, truncated, pk in present) for pk, truncated in listed]


def _funnel(counts: Any) -> list[dict[str, Any]]:
    """Recall counts in funnel order, any other keys after them, as steps of the sandbox's
    funnel partial (which labels each key)."""
    if not isinstance(counts, dict):
        return []
    known = [(name, counts[name]) for name in COUNT_ORDER if name in counts]
    others = sorted((k, v) for k, v in counts.items() if k not in COUNT_ORDER)
    return [{"key": key, "hint": "", "n": _number(n)} for key, n in known + others]


def _token_rows(tokens: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Where the used tokens went, in words."""
    rows = [
        (label, _number(tokens[key]))
        for key, label in (
            ("entries", "In entries"),
            ("truncatedRefs", "In truncated refs"),
            ("query", "The query"),
        )
        if key in tokens
    ]
    per_kind: dict[str, Any] = tokens["perKind"] if isinstance(tokens.get("perKind"), dict) else {}
    rows += [
        (f"Used by {labels.value_label(kind)}", _number(n))
        for kind, n in sorted(per_kind.items())
        if n  # a kind that used nothing is noise here
    ]
    return rows


def _sandbox_url(
    workspace: Workspace, event: AuditEvent, workload: Workload | None, payload: Mapping[str, Any]
) -> str:
    """The sandbox prefilled with the event's request: its workload, environment, actor,
    top K and, when the workspace stored it, the query. Empty when the sandbox cannot take
    the request as it was (the workload archived or gone, the environment removed)."""
    if workload is None or workload.archived_at is not None or not event.actor_id:
        return ""
    if not workspace.environments.filter(slug=event.environment).exists():
        return ""
    params: dict[str, Any] = {
        "workload": str(workload.pk),
        "environment": event.environment,
        "actor": event.actor_id,
    }
    if isinstance(payload.get("topK"), int):
        params["top_k"] = payload["topK"]
    if isinstance(payload.get("query"), str):
        params["query"] = payload["query"]
    return f"{reverse('recall:sandbox', args=[workspace.slug])}?{urlencode(params)}"


# --- one event: the fields of the others ---------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """One line of an event's details: a label and its value in words, maybe a link, a code
    value (ids, prefixes), a badge, a hint, or a list of links."""

    label: str
    value: str = ""
    href: str = ""
    code: bool = False
    badge: str | None = None  # the badge's class: "ok", "bad", "warn" or ""
    hint: str = ""
    links: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (text, href or "")


def _when(raw: Any) -> str:
    value = parse_datetime(raw) if isinstance(raw, str) else None
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value is not None else "—"


def _memory_links(workspace: Workspace, ids: Iterable[Any], *, check: bool = True) -> Fact:
    """The first ``IDS_LINKED`` memory ids, linked while the memory exists."""
    listed = [int(pk) for pk in ids if str(pk).isdigit()]
    shown = listed[:IDS_LINKED]
    present = memories_present(workspace=workspace, ids=shown) if check else set()
    links = tuple(
        (f"#{pk}", reverse("recall:memory", args=[workspace.slug, pk]) if pk in present else "")
        for pk in shown
    )
    more = len(listed) - len(shown)
    return Fact(
        "Memory ids",
        f"and {more:,} more" if more > 0 else "",
        links=links,
        hint="An id without a link names a memory deleted or erased since."
        if check
        else "Gone: the trail keeps their ids, never their content.",
    )


def _token_facts(payload: Mapping[str, Any]) -> list[Fact]:
    return [
        Fact("Name", str(payload.get("name", "—"))),
        Fact("Role", str(payload.get("role", "—"))),
        Fact(
            "Token begins with",
            f"{payload.get('prefix', '')}…",
            code=True,
            hint="Only the first characters: the token itself is never recorded.",
        ),
    ]


def _memory_facts(
    workspace: Workspace, event: AuditEvent, payload: Mapping[str, Any]
) -> list[Fact]:
    ids = payload.get("ids") or []
    facts = [
        Fact("Action", labels.value_label(payload.get("action", "changed"))),
        Fact("Actor", event.actor_id or "—"),
        Fact("Memories", _memories(payload.get("count", len(ids)))),
    ]
    if payload.get("fields"):
        changed = ", ".join(labels.value_label(f) for f in payload["fields"])
        facts.append(Fact("Fields changed", changed, hint="The trail names fields, never content."))
    if ids:
        facts.append(_memory_links(workspace, ids))
    return facts


def _erasure_facts(
    workspace: Workspace, event: AuditEvent, payload: Mapping[str, Any]
) -> list[Fact]:
    runs = tuple(
        (f"run #{pk}", reverse("maintenance:run", args=[workspace.slug, pk]))
        for pk in payload.get("archivesRewritten") or []
        if str(pk).isdigit()
    )
    facts = [
        Fact("Actor", event.actor_id or "—"),
        Fact("Erased", _memories(payload.get("count", "?"))),
    ]
    if payload.get("ids"):
        facts.append(_memory_links(workspace, payload["ids"], check=False))
    if "archiveLinesRemoved" in payload:
        facts.append(Fact("Archive lines removed", _number(payload["archiveLinesRemoved"])))
    if runs:
        facts.append(Fact("Archives rewritten", links=runs))
    return facts


def _run_facts(workspace: Workspace, payload: Mapping[str, Any]) -> list[Fact]:
    def run_link(pk: Any) -> str:
        return reverse("maintenance:run", args=[workspace.slug, pk]) if str(pk).isdigit() else ""

    counts = payload.get("counts") if isinstance(payload.get("counts"), dict) else {}
    mode = payload.get("mode")
    facts = [
        Fact("Run", f"#{payload.get('runId')}", href=run_link(payload.get("runId"))),
        Fact("Sweep", _sweep(payload)),
        Fact(
            "Mode",
            "preview (changes no memory)" if mode == "preview" else str(mode or "—"),
        ),
        Fact(
            "Status",
            str(payload.get("status", "—")),
            badge=STATUS_BADGES.get(str(payload.get("status")), ""),
        ),
    ]
    if counts:
        text = f"{_number(counts.get('listed', 0))} listed"
        if mode == "execute":
            text += (
                f", {_number(counts.get('applied', 0))} changed,"
                f" {_number(counts.get('skipped', 0))} skipped"
            )
        facts.append(Fact("Memories", text))
    if payload.get("preview"):
        facts.append(
            Fact("Preview executed", f"#{payload['preview']}", href=run_link(payload["preview"]))
        )
    if payload.get("confirm") is not None:
        facts.append(Fact("Count confirmed", _number(payload["confirm"])))
    if payload.get("trigger"):
        facts.append(
            Fact("Started", "by the schedule" if payload["trigger"] == "schedule" else "by hand")
        )
    if payload.get("asOf"):
        facts.append(Fact("As of", _when(payload["asOf"])))
    if payload.get("settingsVersion") is not None:
        version = payload["settingsVersion"]
        facts.append(
            Fact("Lifecycle settings", f"v{version}" if version else "the defaults (none saved)")
        )
    if payload.get("embedder"):
        facts.append(Fact("Embedder", str(payload["embedder"]), code=True))
    archive = payload.get("archive")
    if isinstance(archive, dict):
        facts.append(
            Fact(
                "Archive",
                f"{_memories(archive.get('count', 0))}, SHA-256 {archive.get('sha256', '')}",
            )
        )
    error = payload.get("error")
    if isinstance(error, dict):
        facts.append(Fact("Error", f"{error.get('code', '')}: {error.get('message', '')}"))
    return facts


def _facts(workspace: Workspace, event: AuditEvent, payload: Mapping[str, Any]) -> list[Fact]:
    """The fields of an event that is neither a versioned document's change nor an assembled
    context (those have their own sections)."""
    kind = event.type
    if kind in (*POLICY_TYPES, EventType.LIFECYCLE_SETTINGS_SET, EventType.ASSEMBLED):
        return []
    if kind in (EventType.TOKEN_ISSUED, EventType.TOKEN_REVOKED):
        return _token_facts(payload)
    if kind == EventType.MEMORY_CHANGED:
        return _memory_facts(workspace, event, payload)
    if kind == EventType.MEMORY_ERASED:
        return _erasure_facts(workspace, event, payload)
    if kind in MAINTENANCE_RUN_TYPES:
        return _run_facts(workspace, payload)
    if kind == EventType.ARCHIVE_RESTORED:
        pk = payload.get("runId")
        href = reverse("maintenance:run", args=[workspace.slug, pk]) if str(pk).isdigit() else ""
        return [
            Fact("Retention run", f"#{pk}", href=href),
            Fact("Memories restored", _number(payload.get("restored", 0))),
            Fact("Already back", _number(payload.get("alreadyPresent", 0))),
        ]
    if kind == EventType.WORKSPACE_RENAMED:
        return [
            Fact("Renamed from", _text(payload.get("before"))),
            Fact("Renamed to", _text(payload.get("after"))),
        ]
    if kind == EventType.WORKSPACE_SETTINGS_SET and isinstance(payload.get("storeQueries"), dict):
        change = payload["storeQueries"]
        words = {True: "stored", False: "not stored (a salted hash only)"}
        return [
            Fact(
                "Recall queries",
                f"{words.get(change.get('before'), '—')} → {words.get(change.get('after'), '—')}",
                hint="Only contexts assembled while queries are stored keep their query text.",
            )
        ]
    if kind == EventType.WORKLOAD_UPDATED:
        return [
            Fact(
                labels.value_label(name).capitalize(),
                f"{_text(change.get('before'))} → {_text(change.get('after'))}",
            )
            for name, change in (payload.get("changes") or {}).items()
            if isinstance(change, dict)
        ]
    if kind == EventType.LAYOUT_CONFIG_SET:
        return [
            Fact("Version", f"v{payload.get('version')}"),
            Fact("Comment", _text(payload.get("comment"))),
            Fact("Changed", ", ".join(payload.get("changed") or []) or "nothing", code=True),
        ]
    if "name" in payload:
        return [Fact("Name", str(payload["name"]))]
    return []


# --- one event: the page --------------------------------------------------------------------------


@login_required
@require_GET
def event(request: HttpRequest, slug: str, event_id: int) -> HttpResponse:
    access = workspace_page(request, slug)
    workspace = access.workspace
    item = get_object_or_404(AuditEvent, pk=event_id, workspace=workspace)
    workload = (
        workspace.workloads.filter(pk=item.workload_id).only("id", "name", "archived_at").first()
        if item.workload_id
        else None
    )
    payload = item.payload if isinstance(item.payload, dict) else {}
    tokens: dict[str, Any] = (
        payload["tokenCounts"] if isinstance(payload.get("tokenCounts"), dict) else {}
    )
    is_policy = item.type in POLICY_TYPES
    is_settings = item.type == EventType.LIFECYCLE_SETTINGS_SET
    is_assembled = item.type == EventType.ASSEMBLED
    neighbours = workspace.audit_events.only("id")
    context = {
        **access.context(),
        "event": item,
        "title": EVENT_TITLES.get(item.type, item.type),
        "workload": workload,
        "payload": payload,
        "is_policy": is_policy,
        "is_settings": is_settings,
        "is_assembled": is_assembled,
        "first_version": (is_policy or is_settings) and _is_first_version(item),
        "changes": _changes(item),
        "facts": _facts(workspace, item, payload),
        "carried": _carried(workspace, payload) if is_assembled else [],
        "versions": versions
        if isinstance(versions := payload.get("policyVersions"), dict)
        else None,
        "funnel": _funnel(payload.get("counts")),
        "tokens_used": _number(tokens.get("used", 0)),
        "tokens_budget": _number(tokens["budget"]) if "budget" in tokens else "—",
        "token_rows": _token_rows(tokens),
        "sandbox_url": _sandbox_url(workspace, item, workload, payload) if is_assembled else "",
        "access_path": ACCESS_PATHS.get(path, path)
        if isinstance(path := payload.get("accessPath"), str)
        else "",
        "payload_json": _pretty(item.payload),
        "previous": neighbours.filter(pk__lt=item.pk).order_by("-pk").first(),
        "following": neighbours.filter(pk__gt=item.pk).order_by("pk").first(),
    }
    return render(request, "audit/event.html", context)


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
