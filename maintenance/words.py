"""Runs and their items in an operator's words (the pages and the command)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from maintenance.lifecycle import SESSION_RETENTION_DAYS, SETTINGS_BY_NAME
from maintenance.models import MaintenanceItem, MaintenanceRun

SWEEP_TITLES = {
    "expiry": "Expiry",
    "decay": "Decay",
    "retention": "Retention",
    "promotion": "Promotion",
    "dedup": "Insight dedup",
    "reembed": "Re-embedding",
    "sessions": "Session retention",
}

# What executing a sweep does to n memories, as a button says it.
ACTIONS = {
    "expiry": "Expire {n} memor{ies}",
    "decay": "Mark {n} memor{ies} stale",
    "retention": "Archive and delete {n} memor{ies}",
    "promotion": "Promote {n} memor{ies} to long-term",
    "dedup": "Supersede {n} duplicate insight{s}",
    "reembed": "Re-embed {n} memor{ies}",
    "sessions": "Delete {n} ended session{s}",
}

# What undoes an execute of each sweep, and how (its confirmation page). ``{archive_days}``:
# how long a retention run's archive is kept.
UNDO = {
    "expiry": "You can undo this: “Revert this run” on the run's page makes every memory not"
    " changed since active again. They stay past their expiry, though, so recall still leaves"
    " them out and the next expiry sweep expires them again: to keep one, reactivate it from its"
    " page, which clears its past expiry or sets a new one.",
    "decay": "You can undo this: “Revert this run” on the run's page makes every memory not"
    " changed since active again, and “Reactivate” on a memory's page does it one at a time."
    " Unless recalled or made long-term, they are due again at the next decay sweep.",
    "retention": "You can undo this while the archive is kept ({archive_days}): “Restore these"
    " memories” on the run's page puts them back as they were, under their own ids. Once the"
    " archive is deleted, it cannot be undone.",
    "promotion": "You can undo this: “Revert this run” on the run's page makes every memory not"
    " changed since short-term again.",
    "dedup": "You can undo this: “Revert this run” on the run's page makes every superseded"
    " insight not changed since current again.",
    "reembed": "This cannot be undone: the earlier vectors are not kept. With RECALL_EMBEDDER"
    " set back, a re-embed computes them again.",
}

# The settings each sweep reads, shown on its card.
SWEEP_SETTINGS = {
    "expiry": [],
    "decay": ["decayRatePerHour", "decayThreshold", "minimumAgeHours", "decayLongTerm"],
    "retention": ["retentionDays", "retentionMaxShare", "archiveRetentionDays"],
    "promotion": ["promotionThreshold", "promotionWeights", "promotionAgeFullDays",
                  "promotionAccessFullHits", "connectionSimilarity", "connectionsFull"],
    "dedup": ["dedupSimilarity", "dedupMaxInsights"],
    "reembed": [],
    "sessions": ["sessionRetentionDays"],
}  # fmt: skip

STATUS_BADGES = {
    "succeeded": "ok",
    "failed": "bad",
    "refused": "warn",
    "cancelled": "warn",
    "queued": "",
    "running": "",
}


def undo_words(sweep: str, archive_days: str = "") -> str:
    return UNDO[sweep].format(archive_days=archive_days)


def revert_words(item: MaintenanceItem) -> str:
    """What a revert puts back on the item's memory: "stale → active"."""
    before, after = item.before or {}, item.after or {}
    if "lifecycle_status" in before:
        return f"{after.get('lifecycle_status', '?')} → {before['lifecycle_status']}"
    if "tier" in before:
        return f"{_tier(after.get('tier'))} → {_tier(before['tier'])}"
    if "is_current" in before:
        now = f"superseded by #{after.get('superseded_by_id')}"
        return f"{now} → {'current' if before['is_current'] else 'not current'}"
    return "—"


def _tier(value: Any) -> str:
    return str(value).replace("_", "-")


def action(sweep: str, n: int) -> str:
    return ACTIONS[sweep].format(n=n, ies="y" if n == 1 else "ies", s="" if n == 1 else "s")


def setting_value(name: str, value: Any) -> str:
    """A setting's value with its unit: "0.2", "24 hours", "on", "age 0.2, access 0.4, …"."""
    setting = SETTINGS_BY_NAME[name]
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k}: {v}"
                         for k, v in value.items())  # fmt: skip
    if name == "retentionMaxShare":
        return f"{value:.0%}"
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{text} {setting.unit}".strip()


def duration(hours: float) -> str:
    """Hours as people say them: "5 h", "3 days"."""
    if hours < 48:
        return f"{hours:.0f} h"
    return f"{hours / 24:.0f} days"


def _when(raw: Any) -> str:
    value = parse_datetime(raw) if isinstance(raw, str) else raw
    return value.strftime("%Y-%m-%d %H:%M UTC") if isinstance(value, datetime) else "never"


def item_words(run: MaintenanceRun, item: MaintenanceItem) -> str:
    """Why the item is listed, with the numbers the rule compared."""
    d, s = item.details, run.settings
    if item.reason == "past_expiry":
        return f"Expired at {_when(d.get('expiresAt'))}"
    if item.reason == "decayed":
        hours = float(d.get("hoursSinceRecall") or 0)
        since = "last recalled" if d.get("lastRecalledAt") else "never recalled, created"
        return (
            f"Decay score {item.score:.3f} < {s['decayThreshold']:g}: {since} {duration(hours)} ago"
        )
    if item.reason == "past_retention":
        return f"Stale since {_when(d.get('staleSince'))}, more than {s['retentionDays']:g} days"
    if item.reason == "promotable":
        signals = d.get("signals", {})
        parts = ", ".join(f"{k} {v:.2f}" for k, v in signals.items())
        return (
            f"Promotion score {item.score:.3f} ≥ {s['promotionThreshold']:g} ({parts};"
            f" {d.get('connections', 0)} connection{'s' if d.get('connections') != 1 else ''})"
        )
    if item.reason == "duplicate_insight":
        return f"Repeats the newer insight #{d.get('supersededBy')} (similarity {item.score:.3f})"
    if item.reason == "past_session_retention":
        days = s.get("sessionRetentionDays", SESSION_RETENTION_DAYS)
        turns = d.get("turns", 0)
        return (
            f"Session ended {_when(d.get('endedAt'))}, more than {days:g} days ago"
            f" ({turns} turn{'s' if turns != 1 else ''})"
        )
    if item.reason == "not_embedded":
        return "Not embedded yet"
    if item.reason == "other_embedder":
        return f"Embedded by {d.get('embeddingModel')}, not {run.embedder}"
    return item.reason.replace("_", " ")
