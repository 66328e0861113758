"""The pure rules of a compaction run (``chat.compaction.rules``): candidates outside the
recency window, chunks between the minimum and the maximum, the estimate as summaries replace
turns, when a run stops, and the extractive summary."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chat.compaction.rules import (
    SUMMARISE,
    TARGET_MET,
    TIME_BUDGET_EXHAUSTED,
    Estimate,
    TurnText,
    candidates,
    chunks,
    extractive_summary,
    given_turns,
    informative_sentence,
    next_step,
)
from recall.tokens import estimate_tokens


def turns(n: int, tokens: int = 10) -> list[TurnText]:
    return [
        TurnText(i, "user" if i % 2 else "assistant", f"turn {i}.", tokens) for i in range(1, n + 1)
    ]


class CandidateAndChunkTests:
    def test_the_recency_window_keeps_the_last_turns(self):
        assert [t.index for t in candidates(turns(10), 4)] == [1, 2, 3, 4, 5, 6]
        assert candidates(turns(3), 4) == []

    def test_seed_values_cut_eight_turn_chunks_and_drop_a_short_last_one(self):
        """min_turns_to_summarize 5, max_turns_per_summary 8: 20 candidates give 8 and 8;
        the last 4 are fewer than 5."""
        cut = chunks(turns(20), min_turns=5, max_turns=8)

        assert [[t.index for t in c] for c in cut] == [list(range(1, 9)), list(range(9, 17))]

    @given(n=st.integers(0, 60), low=st.integers(0, 10), high=st.integers(0, 10))
    def test_chunks_are_consecutive_and_within_the_bounds(self, n, low, high):
        cut = chunks(turns(n), min_turns=low, max_turns=high)

        flat = [t.index for c in cut for t in c]
        assert flat == list(range(1, len(flat) + 1))
        for chunk in cut:
            assert max(1, low) <= len(chunk) <= max(1, high)


class EstimateTests:
    def test_a_summary_replaces_the_given_turns_with_their_framing(self):
        before = Estimate(tokens=900, available_budget=1000, given=frozenset({3, 4, 5}))

        after = before.replaced(turns(4, tokens=50), summary_tokens=30)

        # turns 3 and 4 leave (50 + 4 each); the summary enters (30 + 2) with its header (6)
        assert after.tokens == 900 - 108 + 38
        assert after.given == frozenset({5}) and after.summaries_empty is False
        assert after.replaced(turns(1), 30).tokens == after.tokens + 32  # no second header

    def test_the_target_is_met_at_or_below_it(self):
        assert Estimate(700, 1000, frozenset()).meets(0.70)
        assert not Estimate(701, 1000, frozenset()).meets(0.70)
        assert not Estimate(0, 0, frozenset()).meets(0.70)  # no budget: never met

    def test_the_given_turns_are_the_history_window_and_the_query(self):
        assert given_turns(range(1, 21), query=20, max_history_turns=15) == frozenset(range(5, 21))
        assert given_turns(range(1, 6), query=5, max_history_turns=15) == frozenset(range(1, 6))
        assert given_turns(range(1, 6), query=5, max_history_turns=0) == frozenset({5})

    def test_a_run_stops_at_the_target_before_the_time_budget(self):
        met = Estimate(600, 1000, frozenset())
        over = Estimate(800, 1000, frozenset())

        assert next_step(met, 0.7, remaining_ms=0) == TARGET_MET
        assert next_step(over, 0.7, remaining_ms=0) == TIME_BUDGET_EXHAUSTED
        assert next_step(over, 0.7, remaining_ms=1) == SUMMARISE

    @given(
        sizes=st.lists(st.integers(0, 400), min_size=1, max_size=30),
        summary=st.integers(0, 60),
    )
    def test_a_summary_shorter_than_its_given_turns_never_raises_the_estimate(self, sizes, summary):
        chunk = [TurnText(i + 1, "user", "", size) for i, size in enumerate(sizes)]
        before = Estimate(10_000, 20_000, frozenset(t.index for t in chunk))
        if summary + 8 <= sum(t.tokens + 4 for t in chunk):
            assert before.replaced(chunk, summary).tokens <= before.tokens


class ExtractiveSummaryTests:
    def test_the_most_informative_sentence_is_kept_and_cut(self):
        many = " ".join(a + b for a in "bcdfg" for b in ("alo", "eri", "uno", "ist", "oma", "eka"))
        text = f"Hi. The release train leaves on Friday with the notes. {many}."

        assert informative_sentence("Hi. The release train leaves on Friday.") == (
            "The release train leaves on Friday."
        )
        assert informative_sentence(text).endswith("…")
        assert len(informative_sentence(text).split()) == 24

    def test_it_stays_within_max_tokens(self):
        chunk = [
            TurnText(i, "user", "The release train leaves on Friday. " * 3, 30) for i in range(1, 9)
        ]

        summary = extractive_summary(chunk, max_tokens=40, estimator=estimate_tokens)

        assert estimate_tokens(summary) <= 40
        assert summary.startswith("Earlier in this conversation (turns 1-8):")
