"""How the audit pages show the events team records: API tokens issued, rotated and revoked
(name, role, what an agent token may do and where, never more of the secret than its
first characters), and members added, their role changed, removed.

Registered with ``audit.presenters`` when the app is ready (``TeamConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.dateparse import parse_datetime

from audit.models import AuditEvent, EventType
from audit.presenters import Fact, Presenter, Shown, presenter_register

PREFIX_HINT = "Only the first characters: the token itself is never recorded."


def when(raw: Any) -> str:
    """A stored ISO 8601 time in words; "—" for none or one that does not read."""
    value = parse_datetime(raw) if isinstance(raw, str) else None
    return f"{value:%Y-%m-%d %H:%M} UTC" if value is not None else "—"


def listed(values: Any, none: str) -> str:
    return ", ".join(str(v) for v in values) if isinstance(values, list) and values else none


def grace(seconds: Any) -> str:
    """A rotation's grace in words."""
    if not isinstance(seconds, int) or seconds <= 0:
        return "none: the previous secret stopped at once"
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} seconds"


@presenter_register(
    {
        EventType.TOKEN_ISSUED: "API token issued",
        EventType.TOKEN_REVOKED: "API token revoked",
        EventType.TOKEN_ROTATED: "API token rotated",
    }
)
class TokenPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        text = f"{payload.get('name')} ({payload.get('role')}), {payload.get('prefix')}…"
        if event.type == EventType.TOKEN_ROTATED:
            text += f", the previous secret valid for {grace(payload.get('graceSeconds'))}"
        return text

    def facts(self, shown: Shown) -> list[Fact]:
        payload = shown.payload
        facts = [
            Fact("Name", str(payload.get("name", "—"))),
            Fact("Role", str(payload.get("role", "—"))),
            Fact("Token begins with", f"{payload.get('prefix', '')}…", code=True, hint=PREFIX_HINT),
        ]
        if "scopes" in payload:
            facts.append(Fact("Scopes", listed(payload["scopes"], "none")))
        if "boundWorkloads" in payload:
            facts.append(Fact("Workloads", listed(payload["boundWorkloads"], "any")))
        if "boundEnvironments" in payload:
            facts.append(Fact("Environments", listed(payload["boundEnvironments"], "any")))
        if "expiresAt" in payload:
            facts.append(Fact("Expires", when(payload["expiresAt"])))
        for key, label in (
            ("apiRatePerMinute", "Calls a minute"),
            ("recallRatePerMinute", "Recalls a minute"),
        ):
            if key in payload:
                facts.append(Fact(label, str(payload[key])))
        if shown.event.type == EventType.TOKEN_ROTATED:
            facts += [
                Fact(
                    "Previous secret began with",
                    f"{payload.get('previousPrefix', '')}…",
                    code=True,
                    hint=PREFIX_HINT,
                ),
                Fact("Previous secret valid for", grace(payload.get("graceSeconds"))),
                Fact("Previous secret valid until", when(payload.get("previousValidUntil"))),
            ]
        return facts


@presenter_register(
    {
        EventType.MEMBER_ADDED: "Member added",
        EventType.MEMBER_ROLE_CHANGED: "Member's role changed",
        EventType.MEMBER_REMOVED: "Member removed",
    }
)
class MemberPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        username = payload.get("username")
        if event.type == EventType.MEMBER_ROLE_CHANGED:
            return f"{username}: {payload.get('before')} → {payload.get('after')}"
        if event.type == EventType.MEMBER_REMOVED:
            return f"{username}, who was {payload.get('role')}"
        return f"{username} as {payload.get('role')}"

    def facts(self, shown: Shown) -> list[Fact]:
        payload = shown.payload
        facts = [Fact("Member", str(payload.get("username", "—")))]
        if shown.event.type == EventType.MEMBER_ROLE_CHANGED:
            facts += [
                Fact("Role before", str(payload.get("before", "—"))),
                Fact("Role after", str(payload.get("after", "—"))),
            ]
        else:
            label = "Role" if shown.event.type == EventType.MEMBER_ADDED else "Role they had"
            facts.append(Fact(label, str(payload.get("role", "—"))))
        return facts
