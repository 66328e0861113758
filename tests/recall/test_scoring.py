"""Inclusion and lifecycle scoring (seed 000 numbers, SPEC §5 and §7)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.scoring import (
    DECAY_THRESHOLD,
    DECAYED_RETENTION_DAYS,
    MIN_AGE_HOURS,
    PROMOTION_THRESHOLD,
    age_factor,
    becomes_stale,
    hours_between,
    inclusion_score,
    is_past_retention,
    is_promotable,
    lifecycle_decay,
    promotion_score,
    usage_boost,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

hours = st.floats(min_value=0, max_value=24 * 365 * 5, allow_nan=False)
hits = st.integers(min_value=0, max_value=10**6)
similarities = st.floats(min_value=0.01, max_value=1.0)
unit = st.floats(min_value=0.0, max_value=1.0)


# --- seed numbers ------------------------------------------------------------------------


@pytest.mark.parametrize(("hours_", "expected"), [(24, 0.787), (72, 0.487), (168, 0.186)])
def test_lifecycle_decay_matches_the_seed_examples(hours_: int, expected: float) -> None:
    assert round(lifecycle_decay(1.0, hours_), 3) == expected


def test_library_defaults_match_the_seed() -> None:
    assert (PROMOTION_THRESHOLD, DECAY_THRESHOLD) == (0.7, 0.2)
    assert (MIN_AGE_HOURS, DECAYED_RETENTION_DAYS) == (24, 30)


def test_age_factor_is_exp_of_minus_0_005_per_hour() -> None:
    assert age_factor(0) == 1.0
    assert age_factor(100) == pytest.approx(math.exp(-0.5))
    assert age_factor(-5) == 1.0  # a future createdAt (clock skew) is not a bonus


def test_usage_boost_is_one_plus_a_tenth_of_ln_one_plus_hits() -> None:
    assert usage_boost(0) == 1.0
    assert usage_boost(9) == pytest.approx(1 + 0.1 * math.log(10))
    with pytest.raises(ValueError):
        usage_boost(-1)


def test_inclusion_score_multiplies_the_three_factors() -> None:
    created = NOW - timedelta(hours=48)
    expected = 0.8 * math.exp(-0.005 * 48) * (1 + 0.1 * math.log(1 + 3))
    assert inclusion_score(0.8, created, 3, NOW) == pytest.approx(expected)


def test_inclusion_score_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError):
        inclusion_score(0.5, datetime(2025, 1, 1), 0, NOW)
    with pytest.raises(ValueError):
        hours_between(NOW, datetime(2025, 1, 1))


def test_hours_between_honours_offsets() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert hours_between(datetime(2025, 6, 1, 14, 0, tzinfo=plus_two), NOW) == 0


def test_promotion_score_uses_the_default_weights() -> None:
    assert promotion_score(1, 0, 0, 0) == pytest.approx(0.2)
    assert promotion_score(0, 1, 0, 0) == pytest.approx(0.4)
    assert promotion_score(1, 1, 1, 1) == pytest.approx(1.0)
    assert promotion_score(0.5, 1, 0.5, 0.5) == pytest.approx(0.7)
    assert is_promotable(promotion_score(0.5, 1, 0.5, 0.5) + 1e-12)
    assert not is_promotable(0.69)


def test_promotion_score_refuses_unnormalised_inputs() -> None:
    with pytest.raises(ValueError):
        promotion_score(1.5, 0, 0, 0)
    with pytest.raises(ValueError):
        promotion_score(0, 0, 0, math.nan)
    with pytest.raises(ValueError):
        promotion_score(0, 0, 0, 0, weights=(0.5, 0.5))


def test_stale_needs_low_score_and_minimum_age() -> None:
    assert becomes_stale(0.19, 24)
    assert not becomes_stale(0.2, 1000)  # at the threshold is not below it
    assert not becomes_stale(0.01, 23.9)  # too young to judge
    assert not is_past_retention(30 * 24)
    assert is_past_retention(30 * 24 + 1)


# --- properties --------------------------------------------------------------------------


@given(similarities, hours, hours, hits)
def test_score_is_monotone_decreasing_in_age(sim: float, a: float, b: float, n: int) -> None:
    younger, older = sorted((a, b))
    score_younger = inclusion_score(sim, NOW - timedelta(hours=younger), n, NOW)
    score_older = inclusion_score(sim, NOW - timedelta(hours=older), n, NOW)
    assert score_older <= score_younger


@given(similarities, hours, hits, hits)
def test_score_is_monotone_increasing_in_hit_count(sim: float, h: float, a: int, b: int) -> None:
    fewer, more = sorted((a, b))
    created = NOW - timedelta(hours=h)
    assert inclusion_score(sim, created, fewer, NOW) <= inclusion_score(sim, created, more, NOW)


@given(similarities, st.floats(min_value=0, max_value=2000), hits)
def test_score_never_exceeds_similarity_times_boost(sim: float, h: float, n: int) -> None:
    score = inclusion_score(sim, NOW - timedelta(hours=h), n, NOW)
    assert 0 < score <= sim * usage_boost(n)


@given(st.floats(min_value=1e-6, max_value=1e6), st.floats(min_value=-100, max_value=1000))
def test_decay_stays_within_zero_and_score(score: float, h: float) -> None:
    decayed = lifecycle_decay(score, h)
    assert 0 < decayed <= score


@given(st.floats(min_value=0.01, max_value=10), hours, hours)
def test_decay_is_monotone_in_time(score: float, a: float, b: float) -> None:
    earlier, later = sorted((a, b))
    assert lifecycle_decay(score, later) <= lifecycle_decay(score, earlier)


@given(unit, unit, unit, unit)
def test_promotion_score_stays_within_zero_and_one(a: float, b: float, c: float, d: float) -> None:
    assert 0 <= promotion_score(a, b, c, d) <= 1 + 1e-12
