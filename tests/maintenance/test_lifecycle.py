"""The lifecycle rules: the seed's numbers, and the spec's invariants as properties."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maintenance import lifecycle
from maintenance.lifecycle import (
    Insight,
    LifecycleSettingsInvalid,
    MemoryFacts,
    dedup_plan,
    default_settings,
    normalize_settings,
)
from tests.properties import examples

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
S = default_settings()


def facts(**changes) -> MemoryFacts:
    base = {
        "id": 1,
        "tier": "short_term",
        "lifecycle_status": "active",
        "is_current": True,
        "confidence": 0.9,
        "created_at": NOW - timedelta(days=30),
        "last_accessed_at": None,
        "hit_count": 0,
    }
    return MemoryFacts(**{**base, **changes})


class SettingsTests:
    def test_the_defaults_are_the_seeds_numbers(self):
        assert S["decayRatePerHour"] == 0.01
        assert S["decayThreshold"] == 0.2
        assert S["minimumAgeHours"] == 24
        assert S["retentionDays"] == 30
        assert S["promotionThreshold"] == 0.7
        assert S["promotionWeights"] == {
            "age": 0.2, "access": 0.4, "confidence": 0.2, "connections": 0.2,
        }  # fmt: skip
        assert S["dedupSimilarity"] == 0.90
        assert S["dedupMaxInsights"] == 50

    def test_the_default_schedule_only_previews(self):
        assert set(S["schedule"].values()) <= {"preview", "off"}

    def test_it_names_every_key_that_breaks_a_rule(self):
        with pytest.raises(LifecycleSettingsInvalid) as caught:
            normalize_settings(
                {
                    "decayThreshold": 0,
                    "retentionDays": "thirty",
                    "promotionWeights": {"age": 0.5, "access": 0.5, "confidence": 0.5,
                                         "connections": 0},
                    "schedule": {"decay": "always"},
                    "decayRate": 0.1,
                    "dedupMaxInsights": 2.5,
                    "decayLongTerm": 1,
                }
            )  # fmt: skip
        fields = caught.value.fields
        assert set(fields) == {
            "decayThreshold", "retentionDays", "promotionWeights", "schedule", "decayRate",
            "dedupMaxInsights", "decayLongTerm",
        }  # fmt: skip
        assert "above 0" in fields["decayThreshold"]
        assert "add up to 1" in fields["promotionWeights"]
        assert fields["decayRate"] == "Unknown setting."
        assert caught.value.malformed

    def test_weights_that_only_fail_to_add_up_to_1_are_well_formed(self):
        unbalanced = {"age": 0.5, "access": 0.5, "confidence": 0.5, "connections": 0}
        with pytest.raises(LifecycleSettingsInvalid) as caught:
            normalize_settings({"promotionWeights": unbalanced})
        assert set(caught.value.fields) == {"promotionWeights"}
        assert not caught.value.malformed
        with pytest.raises(LifecycleSettingsInvalid) as caught:
            normalize_settings({"promotionWeights": {**unbalanced, "age": "half"}})
        assert caught.value.malformed

    def test_a_schedule_names_known_sweeps_only(self):
        with pytest.raises(LifecycleSettingsInvalid) as caught:
            normalize_settings({"schedule": {"compaction": "execute"}})
        assert "compaction" in caught.value.fields["schedule"]

    def test_a_partial_schedule_keeps_the_default_for_the_other_sweeps(self):
        schedule = normalize_settings({"schedule": {"expiry": "execute"}})["schedule"]
        assert schedule["expiry"] == "execute"
        assert schedule["decay"] == "preview"

    def test_a_document_is_a_json_object(self):
        with pytest.raises(LifecycleSettingsInvalid):
            normalize_settings(["decayThreshold", 0.3])


class DecayTests:
    @pytest.mark.parametrize(("hours", "expected"), [(24, 0.787), (72, 0.487), (168, 0.186)])
    def test_the_seeds_decay_numbers(self, hours, expected):
        memory = facts(last_accessed_at=NOW - timedelta(hours=hours))
        assert lifecycle.decay_score(memory, S, NOW) == pytest.approx(expected, abs=5e-4)

    def test_a_memory_never_recalled_decays_from_its_creation(self):
        memory = facts(created_at=NOW - timedelta(hours=72))
        assert lifecycle.decay_score(memory, S, NOW) == pytest.approx(0.487, abs=5e-4)

    def test_below_the_threshold_and_old_enough_it_becomes_stale(self):
        memory = facts(last_accessed_at=NOW - timedelta(hours=168))
        assert lifecycle.decay_due(memory, S, NOW) == pytest.approx(0.186, abs=5e-4)

    def test_a_memory_younger_than_the_minimum_age_never_becomes_stale(self):
        young = facts(created_at=NOW - timedelta(hours=23), last_accessed_at=None)
        slow = {**S, "decayRatePerHour": 1.0}  # score ~0 after 23 h
        assert lifecycle.decay_due(young, slow, NOW) is None
        older = facts(created_at=NOW - timedelta(hours=24))
        assert lifecycle.decay_due(older, slow, NOW) is not None

    def test_long_term_memories_do_not_decay_unless_the_settings_say_so(self):
        memory = facts(tier="long_term", last_accessed_at=NOW - timedelta(days=60))
        assert lifecycle.decay_due(memory, S, NOW) is None
        assert lifecycle.stale_at(memory, S) is None
        assert lifecycle.decay_due(memory, {**S, "decayLongTerm": True}, NOW) is not None

    @pytest.mark.parametrize("status", ["suppressed", "stale", "expired", "disabled"])
    def test_only_active_memories_decay(self, status):
        memory = facts(lifecycle_status=status, last_accessed_at=NOW - timedelta(days=60))
        assert lifecycle.decay_due(memory, S, NOW) is None

    def test_it_says_when_a_memory_turns_stale(self):
        accessed = NOW - timedelta(hours=10)
        memory = facts(last_accessed_at=accessed)
        hours = math.log(1 / 0.2) / 0.01  # 160.9 h
        assert lifecycle.stale_at(memory, S) == accessed + timedelta(hours=hours)
        assert lifecycle.decay_due(memory, S, accessed + timedelta(hours=hours + 0.01))
        assert lifecycle.decay_due(memory, S, accessed + timedelta(hours=hours - 0.01)) is None

    @given(
        st.floats(min_value=0, max_value=10_000),
        st.floats(min_value=0, max_value=10_000),
        st.floats(min_value=0.0001, max_value=1),
    )
    def test_decay_is_monotone_in_time(self, earlier, later_by, rate):
        memory = facts(last_accessed_at=NOW)
        s = {**S, "decayRatePerHour": rate}
        first = lifecycle.decay_score(memory, s, NOW + timedelta(hours=earlier))
        second = lifecycle.decay_score(memory, s, NOW + timedelta(hours=earlier + later_by))
        assert 0 <= second <= first <= 1

    @given(st.floats(min_value=0, max_value=5_000), st.floats(min_value=0, max_value=5_000))
    def test_once_due_a_memory_stays_due_while_left_alone(self, at, later_by):
        memory = facts(created_at=NOW, last_accessed_at=NOW)
        first = NOW + timedelta(hours=at)
        if lifecycle.decay_due(memory, S, first) is not None:
            assert lifecycle.decay_due(memory, S, first + timedelta(hours=later_by)) is not None


class ExpiryAndRetentionTests:
    def test_an_active_memory_past_its_expiry_is_due(self):
        assert lifecycle.expiry_due(facts(expires_at=NOW), NOW)
        assert not lifecycle.expiry_due(facts(expires_at=NOW + timedelta(seconds=1)), NOW)
        assert not lifecycle.expiry_due(facts(expires_at=None), NOW)

    @pytest.mark.parametrize("status", ["suppressed", "disabled", "stale", "expired"])
    def test_statuses_an_operator_or_another_sweep_set_are_left_alone(self, status):
        assert not lifecycle.expiry_due(facts(lifecycle_status=status, expires_at=NOW), NOW)

    def test_a_memory_stale_for_longer_than_30_days_is_due_for_deletion(self):
        stale = facts(lifecycle_status="stale", stale_since=NOW - timedelta(days=30, seconds=1))
        assert lifecycle.retention_due(stale, S, NOW)
        recent = facts(lifecycle_status="stale", stale_since=NOW - timedelta(days=30))
        assert not lifecycle.retention_due(recent, S, NOW)
        assert not lifecycle.retention_due(
            facts(stale_since=NOW - timedelta(days=90)), S, NOW
        )  # active


class PromotionTests:
    def test_the_weights_and_threshold_are_the_seeds(self):
        # Fully old, fully accessed, confidence 1, no connections: 0.2 + 0.4 + 0.2 = 0.8.
        memory = facts(confidence=1.0, hit_count=10, created_at=NOW - timedelta(days=7))
        signals = lifecycle.promotion_signals(memory, 0, S, NOW)
        assert (signals.age, signals.access, signals.confidence, signals.connections) == (
            1.0, 1.0, 1.0, 0.0,
        )  # fmt: skip
        assert signals.score == pytest.approx(0.8)
        assert lifecycle.promotion_due(signals, S)

    def test_it_normalises_each_signal_as_the_docstring_says(self):
        memory = facts(confidence=0.5, hit_count=3, created_at=NOW - timedelta(days=3.5))
        signals = lifecycle.promotion_signals(memory, 2, S, NOW)
        assert signals.age == pytest.approx(0.5)
        assert signals.access == pytest.approx(math.log(4) / math.log(11))
        assert signals.confidence == 0.5
        assert signals.connections == pytest.approx(0.4)
        expected = 0.2 * 0.5 + 0.4 * math.log(4) / math.log(11) + 0.2 * 0.5 + 0.2 * 0.4
        assert signals.score == pytest.approx(expected)

    def test_the_threshold_itself_promotes(self):
        # age 1 (0.2) + access 1 (0.4) + confidence 0.5 (0.1) = 0.7 exactly.
        memory = facts(confidence=0.5, hit_count=10, created_at=NOW - timedelta(days=8))
        signals = lifecycle.promotion_signals(memory, 0, S, NOW)
        assert signals.score == pytest.approx(0.7)
        assert lifecycle.promotion_due(signals, {**S, "promotionThreshold": signals.score})

    def test_connections_are_counted_only_where_they_can_tip_the_balance(self):
        sure = facts(confidence=1.0, hit_count=10, created_at=NOW - timedelta(days=7))
        hopeless = facts(confidence=0.1, hit_count=0, created_at=NOW - timedelta(hours=1))
        close = facts(confidence=0.9, hit_count=5, created_at=NOW - timedelta(days=7))
        assert not lifecycle.connections_matter(sure, S, NOW)
        assert not lifecycle.connections_matter(hopeless, S, NOW)
        assert lifecycle.connections_matter(close, S, NOW)

    def test_only_short_term_active_current_memories_are_promoted(self):
        assert lifecycle.promotion_applies(facts())
        assert not lifecycle.promotion_applies(facts(tier="long_term"))
        assert not lifecycle.promotion_applies(facts(lifecycle_status="stale"))
        assert not lifecycle.promotion_applies(facts(is_current=False))

    @given(
        st.integers(min_value=0, max_value=10_000),
        st.floats(min_value=0, max_value=1),
        st.integers(min_value=0, max_value=50),
        st.floats(min_value=0, max_value=24 * 400),
    )
    def test_the_score_stays_within_0_and_1_and_grows_with_each_signal(
        self, hits, confidence, links, hours
    ):
        memory = facts(confidence=confidence, hit_count=hits,
                       created_at=NOW - timedelta(hours=hours))  # fmt: skip
        base = lifecycle.promotion_signals(memory, links, S, NOW).score
        assert 0 <= base <= 1 + 1e-9
        more_hits = facts(confidence=confidence, hit_count=hits + 1,
                          created_at=NOW - timedelta(hours=hours))  # fmt: skip
        assert lifecycle.promotion_signals(more_hits, links, S, NOW).score >= base
        assert lifecycle.promotion_signals(memory, links + 1, S, NOW).score >= base

    @settings(max_examples=examples(200))
    @given(
        st.integers(min_value=0, max_value=30),
        st.floats(min_value=0, max_value=1),
        st.floats(min_value=0, max_value=24 * 30),
        st.integers(min_value=0, max_value=10),
    )
    def test_skipping_the_connection_count_never_changes_a_decision(
        self, hits, confidence, hours, links
    ):
        memory = facts(confidence=confidence, hit_count=hits,
                       created_at=NOW - timedelta(hours=hours))  # fmt: skip
        if lifecycle.connections_matter(memory, S, NOW):
            return
        with_links = lifecycle.promotion_due(lifecycle.promotion_signals(memory, links, S, NOW), S)
        without = lifecycle.promotion_due(lifecycle.promotion_signals(memory, 0, S, NOW), S)
        assert with_links == without


def insight(pk: int, hours_ago: float) -> Insight:
    return Insight(pk, NOW - timedelta(hours=hours_ago))


class DedupTests:
    def test_the_older_of_two_duplicates_is_superseded_by_the_newer(self):
        plan = dedup_plan([insight(1, 10), insight(2, 5)], {(1, 2): 0.93})
        assert [(s.older, s.newer) for s in plan] == [(1, 2)]

    def test_090_is_a_duplicate_and_0899_is_not(self):
        assert dedup_plan([insight(1, 10), insight(2, 5)], {(1, 2): 0.90})
        assert not dedup_plan([insight(1, 10), insight(2, 5)], {(1, 2): 0.8999})

    def test_a_chain_supersedes_into_the_newest_kept_insight(self):
        # 3 is newest; 2 repeats 3; 1 repeats 2 but not 3: 1 is kept (2 is not kept).
        plan = dedup_plan(
            [insight(1, 30), insight(2, 20), insight(3, 10)], {(2, 3): 0.95, (1, 2): 0.95}
        )
        assert [(s.older, s.newer) for s in plan] == [(2, 3)]

    def test_the_most_similar_kept_insight_wins(self):
        plan = dedup_plan(
            [insight(1, 30), insight(2, 20), insight(3, 10)],
            {(1, 2): 0.97, (1, 3): 0.92, (2, 3): 0.5},
        )
        assert [(s.older, s.newer) for s in plan] == [(1, 2)]

    @settings(max_examples=examples(200))
    @given(
        st.integers(min_value=1, max_value=12).flatmap(
            lambda n: st.tuples(
                st.just(n),
                st.dictionaries(
                    st.tuples(st.integers(1, n), st.integers(1, n)).filter(lambda p: p[0] < p[1]),
                    st.floats(min_value=0, max_value=1),
                ),
                st.lists(st.floats(min_value=0, max_value=100), min_size=n, max_size=n),
            )
        )
    )
    def test_every_superseded_insight_names_a_kept_newer_one_and_no_kept_pair_repeats(self, case):
        n, pairs, ages = case
        insights = [insight(pk, ages[pk - 1]) for pk in range(1, n + 1)]
        plan = dedup_plan(insights, pairs, 0.9)
        superseded = {s.older for s in plan}
        kept = {i.id for i in insights} - superseded
        created = {i.id: i.created_at for i in insights}

        def sim(a, b):
            return pairs.get((a, b), pairs.get((b, a), -1.0))

        for step in plan:
            assert step.newer in kept
            assert (created[step.newer], step.newer) > (created[step.older], step.older)
            assert sim(step.older, step.newer) >= 0.9
        for a in kept:
            for b in kept:
                if a < b:
                    assert sim(a, b) < 0.9
