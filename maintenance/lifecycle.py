"""Memory lifecycle rules (seed 000, "Lifecycle scoring"; SPEC section 7). Plain Python.

A workspace's lifecycle settings are one flat document, versioned like a policy; each
maintenance sweep asks one question of each memory, answered here from the memory's facts:

* **expiry** — an active or inactive memory past its ``expiresAt`` becomes ``expired``.
* **decay** — a short-term, active, current memory whose decay score
  ``exp(−rate × hours since last access)`` (the seed's ``score × exp(−0.01 × h)`` from an
  initial score of 1.0; a never-recalled memory counts from its creation) is below the decay
  threshold, and which is at least the minimum age old, becomes ``stale``. Long-term memories
  do not decay unless ``decayLongTerm`` says so: promotion is what protects them.
* **retention** — a memory stale for longer than the retention period is archived, then
  deleted.
* **promotion** — a short-term, active, current memory whose promotion score reaches the
  threshold becomes long-term (see :func:`promotion_signals` for the normalisations).
* **dedup** — of an actor's current insights that say the same thing (cosine similarity at or
  above ``dedupSimilarity``, the seed's ``insight_similarity_threshold``), each older one is
  superseded by the newer one it repeats (:func:`dedup_plan`).
* **reembed** — a memory not embedded by the configured embedder is embedded again.
* **sessions** — a chat session ended longer ago than the session retention is deleted with
  its turns and assembled prompts (turn content is personal data; nothing is archived).

These are prioritisation heuristics, not estimates of factual reliability (seed 000).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from recall.scoring import (
    DECAY_THRESHOLD,
    DECAYED_RETENTION_DAYS,
    LIFECYCLE_DECAY_PER_HOUR,
    MIN_AGE_HOURS,
    PROMOTION_THRESHOLD,
    PROMOTION_WEIGHTS,
    becomes_stale,
    hours_between,
    is_past_retention,
    is_promotable,
    lifecycle_decay,
    promotion_score,
)

SWEEPS: tuple[str, ...] = (
    "expiry",
    "decay",
    "retention",
    "promotion",
    "dedup",
    "reembed",
    "sessions",
)
SCHEDULE_MODES: tuple[str, ...] = ("off", "preview", "execute")

# What each sweep does, in one line (the Maintenance page, the API schema, the command).
SWEEP_SUMMARY: dict[str, str] = {
    "expiry": "Memories past their expiry time become expired.",
    "decay": "Short-term memories not recalled for long (decay score below the threshold) "
    "and older than the minimum age become stale.",
    "retention": "Memories stale for longer than the retention period are archived, then deleted.",
    "promotion": "Short-term memories whose promotion score reaches the threshold become "
    "long-term.",
    "dedup": "Of an actor's current insights that say the same thing, each older one is "
    "superseded by the newer one.",
    "reembed": "Memories not embedded by the configured embedder are embedded again.",
    "sessions": "Chat sessions ended longer ago than the session retention are deleted, with "
    "their turns and prompts.",
}

# The seed's insight dedup defaults (compaction config: insight_similarity_threshold,
# max_insights_to_check).
INSIGHT_SIMILARITY_THRESHOLD = 0.90
MAX_INSIGHTS_TO_CHECK = 50

EXPIRABLE_STATUSES = ("active", "inactive")
# Days an ended chat session (its turns are personal data) is kept.
SESSION_RETENTION_DAYS = 30
WEIGHT_NAMES = ("age", "access", "confidence", "connections")


class LifecycleSettingsInvalid(Exception):
    """A settings document that breaks a rule; ``fields`` maps each key to its problem.
    ``malformed`` is False when every value is well formed and only a rule across values
    fails (promotion weights that do not add up to 1)."""

    def __init__(self, fields: dict[str, str], *, malformed: bool = True):
        super().__init__("The lifecycle settings are not valid.")
        self.fields = fields
        self.malformed = malformed


class WeightsUnbalanced(ValueError):
    """Promotion weights, each well formed, that do not add up to 1."""


@dataclass(frozen=True)
class Setting:
    """One key of the settings document: its type, default, bounds and words."""

    name: str
    kind: str  # "number", "integer", "bool", "weights" or "schedule"
    default: Any
    label: str
    help: str
    group: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    unit: str = ""


DEFAULT_SCHEDULE: dict[str, str] = {
    "expiry": "preview",
    "decay": "preview",
    "retention": "preview",
    "promotion": "preview",
    "dedup": "preview",
    "reembed": "off",
    "sessions": "preview",
}

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "decayRatePerHour", "number", LIFECYCLE_DECAY_PER_HOUR, "Decay rate",
        "Per hour since the last recall: the decay score is exp(−rate × hours).",
        "Decay", 0.0, 1.0, exclusive_minimum=True, unit="per hour",
    ),
    Setting(
        "decayThreshold", "number", DECAY_THRESHOLD, "Decay threshold",
        "A memory whose decay score falls below this becomes stale.",
        "Decay", 0.0, 1.0, exclusive_minimum=True,
    ),
    Setting(
        "minimumAgeHours", "number", MIN_AGE_HOURS, "Minimum age",
        "Younger memories never become stale, however little they were recalled.",
        "Decay", 0.0, 24 * 365 * 10, unit="hours",
    ),
    Setting(
        "decayLongTerm", "bool", False, "Long-term memories decay too",
        "Off: only short-term memories decay; promotion to long-term protects a memory.",
        "Decay",
    ),
    Setting(
        "retentionDays", "number", DECAYED_RETENTION_DAYS, "Retention of stale memories",
        "A memory stale for longer than this is archived, then deleted.",
        "Retention", 0.0, 3650, unit="days",
    ),
    Setting(
        "retentionMaxShare", "number", 0.10, "Largest share deleted without confirmation",
        "A retention run that would delete more than this share of the workspace's memories "
        "must be confirmed with the exact count.",
        "Retention", 0.0, 1.0,
    ),
    Setting(
        "archiveRetentionDays", "number", 90, "Archive kept for",
        "How long the archive of a retention run (the deleted memories, restorable) is kept.",
        "Retention", 1.0, 3650, unit="days",
    ),
    Setting(
        "promotionThreshold", "number", PROMOTION_THRESHOLD, "Promotion threshold",
        "A short-term memory whose promotion score reaches this becomes long-term.",
        "Promotion", 0.0, 1.0, exclusive_minimum=True,
    ),
    Setting(
        "promotionWeights", "weights", dict(zip(WEIGHT_NAMES, PROMOTION_WEIGHTS, strict=True)),
        "Promotion weights",
        "How much age, access, confidence and connections count; they add up to 1.",
        "Promotion",
    ),
    Setting(
        "promotionAgeFullDays", "number", 7, "Age that counts fully",
        "A memory this old gets the whole age weight; younger ones a share of it.",
        "Promotion", 0.0, 3650, exclusive_minimum=True, unit="days",
    ),
    Setting(
        "promotionAccessFullHits", "integer", 10, "Recalls that count fully",
        "A memory recalled this often gets the whole access weight (logarithmic below).",
        "Promotion", 1, 1_000_000,
    ),
    Setting(
        "connectionSimilarity", "number", 0.80, "Connection similarity",
        "Another of the actor's current memories at least this similar (cosine) counts as a "
        "connection.",
        "Promotion", 0.0, 1.0, exclusive_minimum=True,
    ),
    Setting(
        "connectionsFull", "integer", 5, "Connections that count fully",
        "A memory with this many connections gets the whole connections weight.",
        "Promotion", 1, 1000,
    ),
    Setting(
        "dedupSimilarity", "number", INSIGHT_SIMILARITY_THRESHOLD, "Duplicate similarity",
        "Two insights at least this similar (cosine) say the same thing.",
        "Dedup", 0.0, 1.0, exclusive_minimum=True,
    ),
    Setting(
        "dedupMaxInsights", "integer", MAX_INSIGHTS_TO_CHECK, "Insights checked per actor",
        "The most recent current insights of each actor compared with each other.",
        "Dedup", 2, 1000,
    ),
    Setting(
        "sessionRetentionDays", "number", SESSION_RETENTION_DAYS, "Retention of ended sessions",
        "A chat session ended longer ago than this is deleted with its turns and prompts.",
        "Sessions", 0.0, 3650, unit="days",
    ),
    Setting(
        "schedule", "schedule", DEFAULT_SCHEDULE, "Scheduled runs",
        "Per sweep: off, preview only (writes no memory) or execute.",
        "Schedule",
    ),
    Setting(
        "scheduleEveryHours", "number", 24, "Run the schedule every",
        "How often each scheduled sweep runs.",
        "Schedule", 1.0, 24 * 90, unit="hours",
    ),
    Setting(
        "previewMaxAgeHours", "number", 24, "A preview can be executed for",
        "After this, execute a fresh preview: the memories may have moved on.",
        "Schedule", 0.0, 24 * 30, exclusive_minimum=True, unit="hours",
    ),
)  # fmt: skip
SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}


def default_settings() -> dict[str, Any]:
    """The settings document with every key at its default (the seed's numbers)."""
    return normalize_settings({})


def settings_completed(document: Mapping[str, Any]) -> dict[str, Any]:
    """A stored settings document with the keys added since it was saved at their defaults:
    a setting, or a sweep's schedule entry (a workspace whose settings predate the
    ``sessions`` sweep runs it as ``DEFAULT_SCHEDULE`` says). Stored documents were checked
    when saved and are read as they were; only what they lack is filled in. The stored
    versions stay as saved: they are the record of what each save said.
    """
    completed = {**default_settings(), **document}
    schedule = document.get("schedule")
    if isinstance(schedule, Mapping):
        completed["schedule"] = {**DEFAULT_SCHEDULE, **schedule}
    return completed


def normalize_settings(document: Any) -> dict[str, Any]:
    """A complete, checked settings document: missing keys take their defaults.

    Raises ``LifecycleSettingsInvalid`` naming every key that breaks a rule (``malformed``
    False when only the promotion weights' sum does).
    """
    if not isinstance(document, Mapping):
        raise LifecycleSettingsInvalid({"settings": "Send the settings as a JSON object."})
    errors: dict[str, str] = {}
    for key in sorted(set(document) - set(SETTINGS_BY_NAME)):
        errors[key] = "Unknown setting."
    result: dict[str, Any] = {}
    unbalanced: set[str] = set()
    for setting in SETTINGS:
        raw = document.get(setting.name, setting.default)
        try:
            result[setting.name] = _CHECKS[setting.kind](setting, raw)
        except ValueError as exc:
            errors[setting.name] = str(exc)
            if isinstance(exc, WeightsUnbalanced):
                unbalanced.add(setting.name)
    if errors:
        raise LifecycleSettingsInvalid(errors, malformed=set(errors) != unbalanced)
    return result


def _number(setting: Setting, raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError("Must be a number.")
    value = float(raw)
    low, high = setting.minimum, setting.maximum
    if low is not None and (value <= low if setting.exclusive_minimum else value < low):
        raise ValueError(f"Must be {'above' if setting.exclusive_minimum else 'at least'} {low:g}.")
    if high is not None and value > high:
        raise ValueError(f"Must be at most {high:g}.")
    return value


def _integer(setting: Setting, raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError("Must be a whole number.")
    return int(_number(setting, raw))


def _bool(setting: Setting, raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise ValueError("Must be true or false.")
    return raw


def _weights(setting: Setting, raw: Any) -> dict[str, float]:
    if not isinstance(raw, Mapping) or set(raw) != set(WEIGHT_NAMES):
        raise ValueError(f"Give exactly the weights {', '.join(WEIGHT_NAMES)}.")
    weights = {}
    for name in WEIGHT_NAMES:
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"The {name} weight must be a number from 0 to 1.")
        weights[name] = float(value)
    if abs(sum(weights.values()) - 1.0) > 1e-6:
        raise WeightsUnbalanced(
            f"The weights must add up to 1; they add up to {sum(weights.values()):g}."
        )
    return weights


def _schedule(setting: Setting, raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise ValueError('Give a mode per sweep, e.g. {"decay": "preview"}.')
    unknown = sorted(set(raw) - set(SWEEPS))
    if unknown:
        raise ValueError(f"Unknown sweep {unknown[0]!r}; the sweeps are {', '.join(SWEEPS)}.")
    schedule = {}
    for sweep in SWEEPS:
        mode = raw.get(sweep, DEFAULT_SCHEDULE[sweep])
        if mode not in SCHEDULE_MODES:
            raise ValueError(f"The {sweep} mode must be one of {', '.join(SCHEDULE_MODES)}.")
        schedule[sweep] = mode
    return schedule


_CHECKS: dict[str, Callable[[Setting, Any], Any]] = {
    "number": _number,
    "integer": _integer,
    "bool": _bool,
    "weights": _weights,
    "schedule": _schedule,
}


# --- the facts a decision reads -----------------------------------------------------------------


@dataclass(frozen=True)
class MemoryFacts:
    """What the lifecycle rules read of one memory."""

    id: int
    tier: str
    lifecycle_status: str
    is_current: bool
    confidence: float
    created_at: datetime
    last_accessed_at: datetime | None
    hit_count: int
    expires_at: datetime | None = None
    stale_since: datetime | None = None
    reactivated_at: datetime | None = None

    @property
    def last_touched(self) -> datetime:
        """Where the decay clock starts: the last recall (the creation of a memory never
        recalled), or an operator's reactivation since."""
        touched = self.last_accessed_at or self.created_at
        if self.reactivated_at is not None and self.reactivated_at > touched:
            return self.reactivated_at
        return touched


def _decays(memory: MemoryFacts, settings: Mapping[str, Any]) -> bool:
    """Whether the decay rule applies to the memory at all (whatever its score)."""
    return (
        memory.lifecycle_status == "active"
        and memory.is_current
        and (memory.tier == "short_term" or bool(settings["decayLongTerm"]))
    )


def decay_score(memory: MemoryFacts, settings: Mapping[str, Any], now: datetime) -> float:
    """``exp(−rate × hours since the last recall)`` (or since a reactivation): 1.0 just after
    one, falling."""
    hours = hours_between(memory.last_touched, now)
    return lifecycle_decay(1.0, hours, settings["decayRatePerHour"])


def decay_due(memory: MemoryFacts, settings: Mapping[str, Any], now: datetime) -> float | None:
    """The decay score of a memory the decay sweep makes stale, or None."""
    if not _decays(memory, settings):
        return None
    score = decay_score(memory, settings, now)
    age = hours_between(memory.created_at, now)
    if becomes_stale(score, age, settings["decayThreshold"], settings["minimumAgeHours"]):
        return score
    return None


def stale_at(memory: MemoryFacts, settings: Mapping[str, Any]) -> datetime | None:
    """When the memory, left alone, becomes due for the decay sweep (None: it never will).

    The score falls below the threshold ``ln(1 / threshold) / rate`` hours after the last
    recall, and the memory must also have reached the minimum age.
    """
    if not _decays(memory, settings):
        return None
    hours = math.log(1.0 / settings["decayThreshold"]) / settings["decayRatePerHour"]
    by_score = memory.last_touched + timedelta(hours=hours)
    by_age = memory.created_at + timedelta(hours=settings["minimumAgeHours"])
    return max(by_score, by_age)


def expiry_due(memory: MemoryFacts, now: datetime) -> bool:
    """An active or inactive memory at or past its expiry time. Suppressed and disabled rows
    keep the status an operator gave them; stale ones are left to retention."""
    return (
        memory.lifecycle_status in EXPIRABLE_STATUSES
        and memory.expires_at is not None
        and memory.expires_at <= now
    )


def retention_due(memory: MemoryFacts, settings: Mapping[str, Any], now: datetime) -> bool:
    """A stale memory stale for longer than the retention period."""
    if memory.lifecycle_status != "stale" or memory.stale_since is None:
        return False
    return is_past_retention(hours_between(memory.stale_since, now), settings["retentionDays"])


def session_retention_due(
    ended_at: datetime | None, settings: Mapping[str, Any], now: datetime
) -> bool:
    """An ended session (``ended_at`` set) that ended longer ago than the session retention.
    Settings saved before the setting existed take its default."""
    if ended_at is None:
        return False
    days = settings.get("sessionRetentionDays", SESSION_RETENTION_DAYS)
    return is_past_retention(hours_between(ended_at, now), days)


# --- promotion ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromotionSignals:
    """The four normalised signals (each 0..1) and their weighted score."""

    age: float
    access: float
    confidence: float
    connections: float
    score: float


def promotion_signals(
    memory: MemoryFacts, connections: int, settings: Mapping[str, Any], now: datetime
) -> PromotionSignals:
    """The promotion score from four signals, each normalised to 0..1:

    * age = min(1, hours since creation / (promotionAgeFullDays × 24));
    * access = min(1, ln(1 + hitCount) / ln(1 + promotionAccessFullHits)) — the first
      recalls count most, like the usage boost of recall;
    * confidence = the memory's confidence, already 0..1;
    * connections = min(1, n / connectionsFull), where n is the number of the actor's other
      current, active memories (embedded by the same embedder) whose cosine similarity with
      this one is at least ``connectionSimilarity``.

    score = the weighted sum, with ``promotionWeights`` (0.2 / 0.4 / 0.2 / 0.2 by default).
    """
    hours = max(0.0, hours_between(memory.created_at, now))
    age = min(1.0, hours / (settings["promotionAgeFullDays"] * 24))
    full_hits = settings["promotionAccessFullHits"]
    access = min(1.0, math.log1p(max(0, memory.hit_count)) / math.log1p(full_hits))
    confidence = min(1.0, max(0.0, memory.confidence))
    linked = min(1.0, max(0, connections) / settings["connectionsFull"])
    weights = settings["promotionWeights"]
    score = promotion_score(
        age, access, confidence, linked, [weights[name] for name in WEIGHT_NAMES]
    )
    return PromotionSignals(age, access, confidence, linked, score)


def promotion_applies(memory: MemoryFacts) -> bool:
    """Only short-term, active, current memories are promoted."""
    return memory.tier == "short_term" and memory.lifecycle_status == "active" and memory.is_current


def promotion_due(signals: PromotionSignals, settings: Mapping[str, Any]) -> bool:
    return is_promotable(signals.score, settings["promotionThreshold"])


def connections_matter(memory: MemoryFacts, settings: Mapping[str, Any], now: datetime) -> bool:
    """Whether counting the memory's connections can change its promotion.

    Without connections it falls short of the threshold, and all of them could lift it over:
    for every other memory the answer is known without comparing vectors.
    """
    if not promotion_applies(memory):
        return False
    without = promotion_signals(memory, 0, settings, now).score
    most = without + settings["promotionWeights"]["connections"]
    threshold = settings["promotionThreshold"]
    return without < threshold and is_promotable(most, threshold)


# --- dedup --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Insight:
    id: int
    created_at: datetime


@dataclass(frozen=True)
class Supersession:
    older: int
    newer: int
    similarity: float


def dedup_plan(
    insights: Sequence[Insight],
    similarity: Mapping[tuple[int, int], float],
    threshold: float = INSIGHT_SIMILARITY_THRESHOLD,
) -> list[Supersession]:
    """Which of one actor's insights supersede which.

    ``similarity`` gives the cosine similarity of pairs (either order; a missing pair is below
    any threshold). Newest first, each insight is kept unless it repeats one already kept (at
    or above ``threshold``); then the most similar kept one, the newest on a tie, supersedes
    it. So every superseded insight names one that stays current, and no two kept insights
    repeat each other.
    """

    def similar(a: int, b: int) -> float:
        return similarity.get((a, b), similarity.get((b, a), -1.0))

    newest_first = sorted(insights, key=lambda i: (i.created_at, i.id), reverse=True)
    kept: list[Insight] = []
    plan: list[Supersession] = []
    for insight in newest_first:
        best: tuple[float, Insight] | None = None
        for other in kept:  # newest first, so a tie keeps the newer
            value = similar(insight.id, other.id)
            if value >= threshold and (best is None or value > best[0]):
                best = (value, other)
        if best is None:
            kept.append(insight)
        else:
            plan.append(Supersession(insight.id, best[1].id, best[0]))
    return plan
