"""Recall inclusion scoring and memory lifecycle scoring (seed 000, SPEC §5 and §7).

Plain Python, no Django import. Two separate mechanisms live here, as in seed 000:

* **Inclusion score** — used by recall to rank candidates::

      score = similarity × age_factor × usage_boost
      age_factor  = exp(−0.005 × hours since creation)
      usage_boost = 1 + 0.1 × ln(1 + hitCount)

* **Lifecycle scoring** — used by the maintenance tasks::

      decayed   = score × exp(−0.01 × hours since last access)   (1.0 → 0.787/0.487/0.186
                                                                  at 24/72/168 h)
      promotion = 0.2·age + 0.4·access + 0.2·confidence + 0.2·connections (normalised 0..1)

  with the library defaults: promotion threshold 0.7, decay threshold 0.2, minimum age 24 h,
  decayed (stale) retention 30 days.

Both are prioritisation heuristics, not estimates of factual reliability.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

AGE_DECAY_PER_HOUR = 0.005
USAGE_BOOST_WEIGHT = 0.1
LIFECYCLE_DECAY_PER_HOUR = 0.01

PROMOTION_WEIGHTS: tuple[float, float, float, float] = (0.2, 0.4, 0.2, 0.2)
PROMOTION_THRESHOLD = 0.7
DECAY_THRESHOLD = 0.2
MIN_AGE_HOURS = 24
DECAYED_RETENTION_DAYS = 30

_SECONDS_PER_HOUR = 3600.0


def age_factor(hours_since_creation: float) -> float:
    """``exp(−0.005 × hours)``; a creation time in the future counts as age 0.

    Clock skew between the importer and the server can put ``createdAt`` slightly ahead of
    ``now``; clamping keeps the factor at most 1 instead of boosting such rows.
    """
    return math.exp(-AGE_DECAY_PER_HOUR * max(0.0, hours_since_creation))


def usage_boost(hit_count: int) -> float:
    """``1 + 0.1 × ln(1 + hit_count)``: 1.0 for a never-recalled memory, growing slowly."""
    if hit_count < 0:
        raise ValueError(f"hit_count must be >= 0, got {hit_count}")
    return 1.0 + USAGE_BOOST_WEIGHT * math.log1p(hit_count)


def hours_between(earlier: datetime, later: datetime) -> float:
    """Hours from ``earlier`` to ``later`` (negative if ``later`` comes first).

    Naive datetimes are refused: mixing a naive local time with an aware UTC one would
    silently shift ages by the server's UTC offset.
    """
    for value in (earlier, later):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("datetimes must be timezone-aware (UTC)")
    return (later - earlier).total_seconds() / _SECONDS_PER_HOUR


def inclusion_score(
    similarity: float, created_at: datetime, hit_count: int, now: datetime
) -> float:
    """Recall ranking score: similarity × age factor × usage boost."""
    hours = hours_between(created_at, now)
    return similarity * age_factor(hours) * usage_boost(hit_count)


def lifecycle_decay(
    score: float, hours_since_last_access: float, rate: float = LIFECYCLE_DECAY_PER_HOUR
) -> float:
    """``score × exp(−rate × hours)``; a last access in the future counts as 0 hours."""
    if rate < 0:
        raise ValueError(f"rate must be >= 0, got {rate}")
    return score * math.exp(-rate * max(0.0, hours_since_last_access))


def promotion_score(
    age_norm: float,
    access_norm: float,
    confidence: float,
    connections_norm: float,
    weights: Sequence[float] = PROMOTION_WEIGHTS,
) -> float:
    """Weighted sum of the four normalised signals (each in 0..1).

    Out-of-range inputs are refused rather than clamped: they mean the caller's
    normalisation is wrong, and clamping would hide that.
    """
    names = ("age_norm", "access_norm", "confidence", "connections_norm")
    signals = (age_norm, access_norm, confidence, connections_norm)
    if len(weights) != len(signals):
        raise ValueError(f"expected {len(signals)} weights, got {len(weights)}")
    for name, value in zip(names, signals, strict=True):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be within 0..1, got {value}")
    if any(weight < 0 for weight in weights):
        raise ValueError("promotion weights must be >= 0")
    return sum(weight * value for weight, value in zip(weights, signals, strict=True))


def is_promotable(promotion: float, threshold: float = PROMOTION_THRESHOLD) -> bool:
    """A memory is promoted once its promotion score reaches the threshold."""
    return promotion >= threshold


def becomes_stale(
    decayed_score: float,
    hours_since_creation: float,
    threshold: float = DECAY_THRESHOLD,
    min_age_hours: float = MIN_AGE_HOURS,
) -> bool:
    """Below the decay threshold *and* at least the minimum age old.

    The minimum age protects brand-new memories that have simply not been recalled yet.
    """
    return decayed_score < threshold and hours_since_creation >= min_age_hours


def is_past_retention(
    hours_since_stale: float, retention_days: float = DECAYED_RETENTION_DAYS
) -> bool:
    """A stale row is deleted once it has stayed stale for longer than the retention."""
    return hours_since_stale > retention_days * 24
