"""Explain and replay: run a recorded recall again now and say what changed since.

From a ``context.assembled`` event: the same actor, workload, environment, top K, request
override and, for a session's turn, token-budget cap under today's policies and memories,
computed without recording anything (``recall_preview``). Each memory in either context is
reported as entered, left or stayed, with the reason. The query text is kept (beside the
event) only when the workspace stores queries and until its actor is erased; otherwise the
caller supplies it and it is checked against the event's query hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from audit.models import AuditEvent, EventType
from audit.presenters import stored_query
from policies.algebra import PolicyError
from policies.axes import PolicyDocument
from policies.models import Workload
from policies.selectors import effective_policy_for
from portal.errors import ConflictError, DomainError, NotFoundError, UnprocessableError
from portal.models import Workspace
from recall.engine.policy_filter import SIMILARITY_CODE
from recall.envelope import Counts, query_hash
from recall.models import Actor
from recall.page_selectors import RecallPreview, decision_words, memory_codes, recall_preview

ENTERED, LEFT, STAYED = "entered", "left", "stayed"

# Why a memory entered, left or stayed, in words (the codes are the API's).
REASON_WORDS: dict[str, str] = {
    "erased": "Erased since (the actor's memories were erased)",
    "deleted": "Deleted since",
    "suppressed": "Suppressed since",
    "stale": "Turned stale since",
    "expired": "Expired since",
    "superseded": "Superseded by a newer memory since",
    "consent_withdrawn": "Consent withdrawn since",
    "not_active": "No longer active",
    "policy_changed": "The policy changed",
    "aged_out": "Older than the policy's maximum age now",
    "edited": "Edited since",
    "ranked_lower": "Ranked lower now (below top K)",
    "budget": "Cut by the token budget now",
    "new": "Added since",
    "ranked_higher": "Ranked higher now",
    "unchanged": "In both",
}

_FAIL_CLOSED = {"status_not_active", "not_current", "consent_withdrawn", "expired"}


class QueryMismatch(DomainError):
    status = 422

    def __init__(self, envelope_id: str) -> None:
        super().__init__(
            "QUERY_MISMATCH",
            f"This is not the query of envelope {envelope_id}: its hash differs. Paste the "
            "query exactly as the agent sent it.",
            {"fields": {"query": "Does not match the recorded query hash."}},
        )


@dataclass(frozen=True)
class ReplayedMemory:
    id: str
    change: str  # entered | left | stayed
    then: str | None  # "entry" | "truncated" | None
    now: str | None
    reason: str
    words: str
    present: bool  # False once deleted or erased


@dataclass(frozen=True)
class Replay:
    event: AuditEvent
    query_source: str  # "stored" | "pasted"
    query_checked: bool  # False only for events recorded before query hashes
    then_versions: dict[str, Any]
    now_versions: dict[str, Any]
    then_policy_hash: str
    now_policy_hash: str
    memories: list[ReplayedMemory]
    now_counts: Counts
    notes: list[str] = field(default_factory=list)
    # The request override this run applied (the recorded one), None without one.
    override: dict[str, Any] | None = None
    # The token-budget cap this run applied (a session turn's recorded one), None without one.
    token_budget_cap: int | None = None
    now_digest: str = ""

    @property
    def changed_versions(self) -> list[str]:
        keys = ("floor", "workload", "workloadEnvironment")
        return [k for k in keys if self.then_versions.get(k) != self.now_versions.get(k)]

    def counts(self) -> dict[str, int]:
        tally = {ENTERED: 0, LEFT: 0, STAYED: 0}
        for memory in self.memories:
            tally[memory.change] += 1
        return tally


def replay_event(*, workspace: Workspace, event_id: int, query: str | None) -> Replay:
    """Run the event's recall again now, read-only, and compare it with what was recorded."""
    event = (
        AuditEvent.objects.select_related("stored_query")
        .filter(workspace=workspace, pk=event_id)
        .first()
    )
    if event is None:
        raise NotFoundError(f"No event {event_id} in workspace {workspace.slug!r}.")
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.type != EventType.ASSEMBLED:
        raise ConflictError(
            f"Event {event_id} is a {event.type} event; only a context.assembled event can be "
            "run again.",
            code="NOT_REPLAYABLE",
        )
    if "memoryIds" not in payload or "policyVersions" not in payload:
        raise ConflictError(
            f"Event {event_id} was recorded before envelopes listed their memories and "
            "policy versions; there is nothing to compare it with.",
            code="NOT_REPLAYABLE",
        )
    text, source, checked = _query(event, payload, query)
    workload = (
        Workload.objects.filter(workspace=workspace, pk=event.workload_id).first()
        if event.workload_id
        else None
    )
    if workload is None:
        raise ConflictError(
            f"The workload of event {event_id} no longer exists; it cannot be run again.",
            code="NOT_REPLAYABLE",
        )
    if workload.archived_at is not None:
        raise ConflictError(
            f"Workload {workload.name!r} was archived; recall for it is refused, so it cannot "
            "be run again.",
            code="WORKLOAD_ARCHIVED",
        )
    now = timezone.now()
    override, notes = _override(payload)
    cap = _token_budget_cap(payload)
    if cap is not None:
        notes.append(
            f"This recall was assembled for turn {payload.get('turn')} of session"
            f" #{payload.get('sessionId')}: it runs again under that turn's token-budget cap"
            f" of {cap:,} tokens, the smaller of it and the policy's budget winning."
        )
    args: dict[str, Any] = {
        "workspace": workspace, "workload": workload, "environment": event.environment,
        "actor_id": event.actor_id, "query": text, "top_k": int(payload.get("topK") or 10),
        "token_budget_cap": cap,
    }  # fmt: skip
    try:
        preview = recall_preview(**args, override=override)
        effective = effective_policy_for(
            workload=workload, environment=event.environment, override=override
        )
    except PolicyError as exc:
        if override is None:
            raise
        # The override the agent sent is refused today (an axis no longer relaxable, or past
        # a narrower floor): run without it, and say so.
        notes.append(f"The recorded override is refused today ({exc.message}): this run has none.")
        override = None
        preview = recall_preview(**args, override=None)
        effective = effective_policy_for(workload=workload, environment=event.environment)
    now_versions = {
        "floor": effective.floor_version,
        "workload": effective.workload_version,
        "workloadEnvironment": effective.workload_environment,
        "override": override is not None,
    }
    then_versions = dict(payload["policyVersions"])
    memories = _compare(workspace, event, payload, preview, effective.policy, now)
    return Replay(
        event=event,
        query_source=source,
        query_checked=checked,
        then_versions=then_versions,
        now_versions=now_versions,
        then_policy_hash=str(payload.get("effectivePolicyHash", "")),
        now_policy_hash=preview.policy_hash,
        memories=memories,
        now_counts=preview.counts,
        notes=notes,
        override=override,
        token_budget_cap=cap,
        now_digest=str(preview.envelope["digest"]),
    )


def _token_budget_cap(payload: dict[str, Any]) -> int | None:
    """The token-budget cap a session's turn gave its recall (``tokenBudgetCap.cap``)."""
    recorded = payload.get("tokenBudgetCap")
    cap = recorded.get("cap") if isinstance(recorded, dict) else None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) else None


def _override(payload: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The request override the event recorded, and a note when it had one not recorded."""
    recorded = payload.get("policyOverride")
    if isinstance(recorded, dict) and recorded:
        return recorded, []
    if payload["policyVersions"].get("override"):
        return None, [
            "The recorded recall had a request override, recorded before overrides were kept:"
            " this run has none."
        ]
    return None, []


def _query(event: AuditEvent, payload: dict[str, Any], query: str | None) -> tuple[str, str, bool]:
    stored = stored_query(event)
    if stored is not None and not query:
        return stored, "stored", True
    if not query or not query.strip():
        # A well-formed request the data cannot serve: the event kept no query to run again.
        raise UnprocessableError(
            "QUERY_REQUIRED",
            "The query is needed to run the recall again: this workspace does not store "
            "queries. Paste the recall's query.",
            {
                "fields": {
                    "query": "This workspace does not store queries: paste the recall's query."
                }
            },
        )
    recorded = payload.get("queryHash")
    if recorded is None:
        return query, "pasted", False
    if query_hash(str(payload.get("envelopeId", "")), query) != recorded:
        raise QueryMismatch(str(payload.get("envelopeId", "")))
    return query, "pasted", True


def _compare(
    workspace: Workspace,
    event: AuditEvent,
    payload: dict[str, Any],
    preview: RecallPreview,
    policy: PolicyDocument,
    now: datetime,
) -> list[ReplayedMemory]:
    then = {str(pk): "entry" for pk in payload.get("memoryIds") or []}
    then.update({str(pk): "truncated" for pk in payload.get("truncatedIds") or []})
    current = {pk: "entry" for pk in preview.included}
    current.update({pk: "truncated" for pk in preview.truncated})
    ids = list(then) + [pk for pk in current if pk not in then]
    rows = memory_codes(workspace=workspace, ids=[int(pk) for pk in ids], policy=policy, now=now)
    erased = _actor_erased(workspace, event.actor_id)
    changed_policy = payload["policyVersions"].get("floor") is not None and (
        payload.get("effectivePolicyHash") != preview.policy_hash
    )
    out = []
    for pk in ids:
        found = rows.get(int(pk))
        was, now_as = then.get(pk), current.get(pk)
        if was and now_as:
            change = STAYED
            edited = found is not None and found[0].updated_at > event.occurred_at
            reason = "edited" if edited else "unchanged"
            words = REASON_WORDS[reason]
            if was != now_as:
                words += f"; now {'a truncated ref' if now_as == 'truncated' else 'an entry'}"
        elif was:
            change = LEFT
            reason, words = _why_left(found, event, preview.codes.get(pk), changed_policy, erased)
        else:
            change = ENTERED
            reason, words = _why_entered(found, event, changed_policy)
        out.append(ReplayedMemory(pk, change, was, now_as, reason, words, found is not None))
    return out


def _why_left(
    found: tuple[Any, str] | None,
    event: AuditEvent,
    ranking_code: str | None,
    changed_policy: bool,
    erased: bool,
) -> tuple[str, str]:
    if found is None:
        reason = "erased" if erased else "deleted"
        return reason, REASON_WORDS[reason]
    memory, code = found
    edited = memory.updated_at > event.occurred_at
    if code in _FAIL_CLOSED:
        reason = {
            "not_current": "superseded",
            "consent_withdrawn": "consent_withdrawn",
            "expired": "expired",
        }.get(code) or (
            memory.lifecycle_status
            if memory.lifecycle_status in ("suppressed", "stale", "expired")
            else "not_active"
        )
        return reason, REASON_WORDS[reason]
    if code == "embedding_pending":
        return "edited", f"{REASON_WORDS['edited']}: waiting for its new embedding"
    if code == "older_than_max_age":
        return "aged_out", REASON_WORDS["aged_out"]
    if code != "passes_policy":
        reason = "edited" if edited and not changed_policy else "policy_changed"
        return reason, f"{REASON_WORDS[reason]}: {decision_words(code).lower()}"
    cut = ranking_code or "below_top_k"
    if cut == SIMILARITY_CODE:  # the similarity floor, the one axis checked when ranking
        reason = "edited" if edited and not changed_policy else "policy_changed"
        return reason, f"{REASON_WORDS[reason]}: {decision_words(cut).lower()}"
    reason = (
        "budget"
        if cut.startswith("budget_") or cut == "segment_kind_forbidden"
        else ("ranked_lower")
    )
    words = REASON_WORDS[reason]
    if edited:
        words = f"{REASON_WORDS['edited']}; {words[0].lower()}{words[1:]}"
    return reason, words


def _why_entered(
    found: tuple[Any, str] | None, event: AuditEvent, changed_policy: bool
) -> tuple[str, str]:
    if found is None:  # deleted between the recall just run and this read
        return "deleted", REASON_WORDS["deleted"]
    memory = found[0]
    if memory.created_at > event.occurred_at:
        return "new", REASON_WORDS["new"]
    if memory.updated_at > event.occurred_at:
        return "edited", f"{REASON_WORDS['edited']} (or restored)"
    if changed_policy:
        return "policy_changed", f"{REASON_WORDS['policy_changed']}: it passes now"
    return "ranked_higher", REASON_WORDS["ranked_higher"]


def _actor_erased(workspace: Workspace, actor_id: str) -> bool:
    kind, _, name = actor_id.partition(":")
    return Actor.objects.filter(
        workspace=workspace, kind=kind, name=name, erased_at__isnull=False
    ).exists()
