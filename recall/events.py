"""How the audit pages show the events recall records: a context assembled (its request, the
funnel's counts, where the tokens went, the memories it carried and a link back to the
sandbox), memories changed, an actor erased, a chat layout configuration saved.

Registered with ``audit.presenters`` when the app is ready (``RecallConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from audit.models import AuditEvent, EventType
from audit.presenters import (
    Fact,
    Presenter,
    Shown,
    changed_names,
    free_text,
    memories,
    number,
    presenter_register,
    quoted,
    stored_query,
)
from policies import labels
from portal.models import Workspace
from recall.envelope import FUNNEL
from recall.page_selectors import memories_present

# A memory event names up to 1,000 ids; the page links this many and counts the rest.
IDS_LINKED = 50

# Who asked for a context (the event's ``origin``; absent: an agent through the API).
ORIGIN_WORDS: dict[str, str] = {
    "": "an agent, through the API",
    "sandbox": "the sandbox (a dry run: it counted no hits and changed no memory)",
}

# How the eligible memories were ranked (the envelope's ``accessPath``).
ACCESS_PATHS: dict[str, str] = {
    "exact": "exact search",
    "hnsw": "approximate search (HNSW index)",
    "none": "nothing to rank",
}


# --- a context assembled ----------------------------------------------------------------------


@dataclass(frozen=True)
class Carried:
    """A memory an envelope carried, as the event page lists it."""

    id: int
    truncated: bool
    present: bool  # False once the memory was deleted or erased


def _carried(workspace: Workspace, payload: Mapping[str, Any]) -> list[Carried]:
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
    known = [(name, counts[name]) for name in FUNNEL if name in counts]
    others = sorted((k, v) for k, v in counts.items() if k not in FUNNEL)
    return [{"key": key, "hint": "", "n": number(n)} for key, n in known + others]


def _token_rows(tokens: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Where the used tokens went, in words."""
    rows = [
        (label, number(tokens[key]))
        for key, label in (
            ("entries", "In entries"),
            ("truncatedRefs", "In truncated refs"),
            ("query", "The query"),
        )
        if key in tokens
    ]
    per_kind: dict[str, Any] = tokens["perKind"] if isinstance(tokens.get("perKind"), dict) else {}
    rows += [
        (f"Used by {labels.value_label(kind)}", number(n))
        for kind, n in sorted(per_kind.items())
        if n  # a kind that used nothing is noise here
    ]
    return rows


def _sandbox_url(shown: Shown) -> str:
    """The sandbox prefilled with the event's request: its workload, environment, actor,
    top K and, when the workspace stored it, the query. Empty when the sandbox cannot take
    the request as it was (the workload archived or gone, the environment removed)."""
    event, workload, workspace, payload = (
        shown.event,
        shown.workload,
        shown.workspace,
        shown.payload,
    )
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
    query = stored_query(event)
    if query is not None:
        params["query"] = query
    return f"{reverse('recall:sandbox', args=[workspace.slug])}?{urlencode(params)}"


@presenter_register({EventType.ASSEMBLED: "Context assembled"})
class AssembledPresenter(Presenter):
    template = "recall/_assembled_event.html"

    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        tokens = payload.get("tokenCounts") or {}
        counts = payload.get("counts") or {}
        reused = " · prefix reused" if payload.get("reused") else ""
        return (
            f"{number(counts.get('afterBudgetAllocation', '?'))} of "
            f"{memories(counts.get('candidates', '?'))} · "
            f"{number(tokens.get('used', '?'))} of {number(tokens.get('budget', '?'))} tokens"
            f"{reused}"
        )

    def row_hint(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        if payload.get("origin") == "sandbox":
            return "Run in the sandbox: a dry run that counted no hits."
        return (
            f"Prefix reused: {labels.TERM_HINTS.get('reused', '')}" if payload.get("reused") else ""
        )

    def facts(self, shown: Shown) -> list[Fact]:
        return []  # the template shows the request, its counts, tokens and memories

    def context(self, shown: Shown) -> dict[str, Any]:
        payload = shown.payload
        tokens: dict[str, Any] = (
            payload["tokenCounts"] if isinstance(payload.get("tokenCounts"), dict) else {}
        )
        versions = payload.get("policyVersions")
        path = payload.get("accessPath")
        origin = payload.get("origin") or ""
        return {
            "query": stored_query(shown.event),
            "origin_words": ORIGIN_WORDS.get(origin, str(origin)),
            "override_rows": labels.axis_rows(payload.get("policyOverride")),
            "carried": _carried(shown.workspace, payload),
            "versions": versions if isinstance(versions, dict) else None,
            "funnel": _funnel(payload.get("counts")),
            "tokens_used": number(tokens.get("used", 0)),
            "tokens_budget": number(tokens["budget"]) if "budget" in tokens else "—",
            "token_rows": _token_rows(tokens),
            "sandbox_url": _sandbox_url(shown),
            "access_path": ACCESS_PATHS.get(path, path) if isinstance(path, str) else "",
        }


# --- memories changed and erased ---------------------------------------------------------------


def _memory_links(workspace: Workspace, ids: Iterable[Any], *, check: bool = True) -> Fact:
    """The first ``IDS_LINKED`` memory ids, linked while the memory exists."""
    listed = [int(pk) for pk in ids if str(pk).isdigit()]
    linked = listed[:IDS_LINKED]
    present = memories_present(workspace=workspace, ids=linked) if check else set()
    links = tuple(
        (f"#{pk}", reverse("recall:memory", args=[workspace.slug, pk]) if pk in present else "")
        for pk in linked
    )
    more = len(listed) - len(linked)
    return Fact(
        "Memory ids",
        f"and {more:,} more" if more > 0 else "",
        links=links,
        hint="An id without a link names a memory deleted or erased since."
        if check
        else "Gone: the trail keeps their ids, never their content.",
    )


@presenter_register({EventType.MEMORY_CHANGED: "Memories changed"})
class MemoryChangePresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        count = payload.get("count", len(payload.get("ids") or []))
        fields = ", ".join(labels.value_label(f) for f in changed_names(payload))
        text = f"{payload.get('action', 'changed')} {memories(count)}"
        return quoted(f"{text}: {fields}" if fields else text, payload.get("reason"))

    def facts(self, shown: Shown) -> list[Fact]:
        payload = shown.payload
        ids = payload.get("ids") or []
        facts = [
            Fact("Action", labels.value_label(payload.get("action", "changed"))),
            Fact("Actor", shown.event.actor_id or "—"),
            Fact("Memories", memories(payload.get("count", len(ids)))),
        ]
        if payload.get("reason"):  # a suppression's, as the editor gave it
            facts.append(Fact("Reason", free_text(payload["reason"])))
        if payload.get("previousStatus"):  # a reactivation
            facts.append(Fact("Status before", labels.value_label(payload["previousStatus"])))
        if payload.get("fields"):
            changed = ", ".join(labels.value_label(f) for f in payload["fields"])
            facts.append(
                Fact("Fields changed", changed, hint="The trail names fields, never content.")
            )
        if ids:
            facts.append(_memory_links(shown.workspace, ids))
        return facts


@presenter_register({EventType.MEMORY_ERASED: "Actor erased"})
class ErasurePresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        return f"erased {memories(payload.get('count', '?'))} of {event.actor_id}"

    def facts(self, shown: Shown) -> list[Fact]:
        payload, slug = shown.payload, shown.workspace.slug
        runs = tuple(
            (f"run #{pk}", reverse("maintenance:run", args=[slug, pk]))
            for pk in payload.get("archivesRewritten") or []
            if str(pk).isdigit()
        )
        facts = [
            Fact("Actor", shown.event.actor_id or "—"),
            Fact("Erased", memories(payload.get("count", "?"))),
        ]
        if payload.get("ids"):
            facts.append(_memory_links(shown.workspace, payload["ids"], check=False))
        if "archiveLinesRemoved" in payload:
            facts.append(Fact("Archive lines removed", number(payload["archiveLinesRemoved"])))
        # What the floors above erased with the actor (recall.erasure_actor_data_register).
        for key, label in (("sessionsRemoved", "Sessions removed"), ("turnsRemoved", "Turns")):
            if key in payload:
                facts.append(Fact(label, number(payload[key])))
        if runs:
            facts.append(Fact("Archives rewritten", links=runs))
        return facts


# --- a chat layout configuration saved ---------------------------------------------------------


@presenter_register({EventType.LAYOUT_CONFIG_SET: "Chat layout configuration saved"})
class LayoutConfigPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        changed = ", ".join(payload.get("changed") or []) or "no change"
        return quoted(f"v{payload.get('version')}: {changed}", payload.get("comment"))

    def facts(self, shown: Shown) -> list[Fact]:
        payload = shown.payload
        return [
            Fact("Version", f"v{payload.get('version')}"),
            Fact("Comment", free_text(payload.get("comment"))),
            Fact("Changed", ", ".join(payload.get("changed") or []) or "nothing", code=True),
        ]
