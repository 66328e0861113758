"""How the audit pages show the events chat records, in words: a session started or ended,
and a compaction run's outcome. None shows content: a session is named by its id and the
caller's external id.

Registered with ``audit.presenters`` when the app is ready (``ChatConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.urls import reverse

from audit.models import AuditEvent, EventType
from audit.presenters import Fact, Presenter, Shown, number, payload_of, presenter_register
from chat.models import Session

OUTCOME_WORDS: dict[str, str] = {
    "target_met": "target met",
    "target_missed": "target missed",
    "time_budget_exhausted": "time budget exhausted",
    "failed": "failed",
    "pending": "still running",
}
OUTCOME_BADGES: dict[str, str] = {
    "target_met": "ok",
    "target_missed": "warn",
    "time_budget_exhausted": "warn",
    "failed": "bad",
}


def pct(value: Any) -> str:
    return f"{value:.1f}%" if isinstance(value, int | float) else "—"


def tokens_line(payload: Mapping[str, Any]) -> str:
    before, after = payload.get("tokensBefore"), payload.get("tokensAfter")
    if before is None:
        return "—"
    text = f"{number(before)} ({pct(payload.get('utilizationBefore'))})"
    if after is not None:
        text += f" → {number(after)} ({pct(payload.get('utilizationAfter'))})"
    return text + f" of {number(payload.get('availableBudget'))}"


def trigger_words(payload: Mapping[str, Any]) -> str:
    if payload.get("trigger") == "manual":
        return "by hand (Compact now, or POST …/compact)"
    if payload.get("reason") == "rising_trend":
        return f"automatically: a rising trend ({payload.get('severity')})"
    return f"automatically: {payload.get('severity')} severity"


@presenter_register({EventType.COMPACTED: "Session compacted"})
class CompactedPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        outcome = OUTCOME_WORDS.get(str(payload.get("outcome")), str(payload.get("outcome")))
        turns = payload.get("turnsSummarised") or []
        return (
            f"session #{payload.get('sessionId')}, {payload.get('trigger')}: {outcome};"
            f" {len(turns)} turn{'s' if len(turns) != 1 else ''} summarised"
        )

    def facts(self, shown: Shown) -> list[Fact]:
        payload, slug = shown.payload, shown.workspace.slug
        session = str(payload.get("sessionId", ""))
        outcome = str(payload.get("outcome", ""))
        facts = [
            Fact(
                "Session",
                f"#{session}",
                href=reverse("chat:session", args=[slug, session]) if session.isdigit() else "",
            ),
            Fact("Run", f"#{payload.get('runId')}"),
            Fact("Started", trigger_words(payload)),
            Fact("Outcome", OUTCOME_WORDS.get(outcome, outcome), badge=OUTCOME_BADGES.get(outcome)),
            Fact(
                "Target",
                f"at or below {pct(100 * float(payload.get('targetUtilization') or 0))} of the"
                " dynamic budget",
            ),
            Fact("Tokens before → after", tokens_line(payload)),
            Fact(
                "Time",
                f"{number(payload.get('durationMs'))} ms of a {number(payload.get('timeBudgetMs'))}"
                " ms budget" + (", exhausted" if payload.get("timeBudgetExhausted") else ""),
            ),
            Fact("Summarizer", f"{payload.get('service')} ({payload.get('serviceKind') or '—'})"),
        ]
        turns = payload.get("turnsSummarised") or []
        facts.append(
            Fact("Turns summarised", ", ".join(str(t) for t in turns) if turns else "none")
        )
        for label, key in (
            ("Summary memories", "summaryIds"),
            ("Insights superseded", "insightsSuperseded"),
            ("Memories promoted", "memoriesPromoted"),
        ):
            ids = [str(pk) for pk in payload.get(key) or []]
            links = tuple(
                (f"#{pk}", reverse("recall:memory", args=[slug, pk]) if pk.isdigit() else "")
                for pk in ids
            )
            facts.append(Fact(label, "" if ids else "none", links=links))
        for note in payload.get("notes") or []:
            facts.append(Fact("Note", str(note)))
        error = payload.get("error")
        if isinstance(error, dict):
            facts.append(Fact("Error", f"{error.get('code')}: {error.get('message')}", badge="bad"))
        return facts


@presenter_register(
    {EventType.SESSION_STARTED: "Session started", EventType.SESSION_ENDED: "Session ended"}
)
class SessionPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        external = payload.get("externalId")
        text = f"session #{payload.get('sessionId')}"
        if external:
            text += f" ({external})"
        text += f" of {event.actor_id} in {event.environment or '—'}"
        if event.type == EventType.SESSION_ENDED:
            turns = payload.get("turns")
            text += f" after {number(turns)} turn{'s' if turns != 1 else ''}"
        return text

    def listed(self, events: Sequence[AuditEvent]) -> dict[int, dict[str, Any]]:
        """The external ids of the page's sessions still kept, in one query."""
        kept = _kept_external_ids(events)
        return {pk: {"externalId": external} for pk, external in kept.items() if external}

    def facts(self, shown: Shown) -> list[Fact]:
        payload, slug, event = shown.payload, shown.workspace.slug, shown.event
        session = str(payload.get("sessionId", ""))
        workload = shown.workload
        facts = [
            Fact(
                "Session",
                f"#{session}",
                href=reverse("chat:session", args=[slug, session]) if session.isdigit() else "",
            ),
            _external_id_fact(shown),
            Fact("Actor", event.actor_id or "—"),
            Fact("Workload", workload.name if workload is not None else "—"),
            Fact("Environment", event.environment or "—"),
        ]
        if event.type == EventType.SESSION_ENDED:
            facts.append(Fact("Turns", number(payload.get("turns"))))
        return facts


def _kept_external_ids(events: Sequence[AuditEvent]) -> dict[int, str]:
    """By event id, the external id ("" for none) of each event's session while the session
    is kept, read in one query; an event recorded before ids left the payload holds its own
    and is not asked for."""
    asked = {
        event.pk: (event.workspace_id, int(session))
        for event in events
        if "externalId" not in (payload := payload_of(event))
        and (session := str(payload.get("sessionId", ""))).isdigit()
    }
    if not asked:
        return {}
    kept = {
        (workspace, pk): external
        for pk, workspace, external in Session.objects.filter(
            pk__in={pk for _, pk in asked.values()},
            workspace_id__in={workspace for workspace, _ in asked.values()},
        ).values_list("pk", "workspace_id", "external_id")
    }
    return {event: kept[key] for event, key in asked.items() if key in kept}


def _external_id_fact(shown: Shown) -> Fact:
    """The session's external id, as the list reads it (``_kept_external_ids``); "none"
    without one, and said so once the session is gone (ended long ago and swept, or its actor
    erased)."""
    if "externalId" in shown.payload:
        found: str | None = shown.payload["externalId"] or ""
    else:
        found = _kept_external_ids([shown.event]).get(shown.event.pk)
    if found is None:
        return Fact("External id", "not kept: the session was deleted")
    return Fact("External id", str(found), code=True) if found else Fact("External id", "none")
