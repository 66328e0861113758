"""recall.compare: each memory's decision under the saved policy and a draft override (plain
Python, no database)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from recall.compare import (
    ENTERS,
    INCLUDED,
    LEAVES,
    NOT_SELECTED,
    OUT,
    STAYS,
    TRUNCATED,
    MemoryChange,
    RecallOutcome,
    recall_compare,
)


def outcome(
    included: list[str],
    truncated: list[str] = (),
    codes: dict[str, str] | None = None,
    *,
    policy: str = "p1",
    budget: str = "b1",
) -> RecallOutcome:
    return RecallOutcome(
        included=included,
        truncated=list(truncated),
        codes=codes or {},
        policy_hash=policy,
        budget_hash=budget,
    )


class RecallCompareTests:
    def test_a_narrower_draft_lists_what_leaves_with_the_draft_side_reason(self) -> None:
        # The sandbox's seed: the draft allows preference and decision only, so the episode
        # and the tool_result fact leave; the preference stays.
        saved = outcome(["1", "2", "5", "6"])
        draft = outcome(
            ["1", "2"],
            codes={"5": "memory_type_not_allowed", "6": "memory_type_not_allowed"},
            policy="p2",
        )
        comparison = recall_compare(saved, draft)
        assert [(c.id, c.change) for c in comparison.changes] == [
            ("5", LEAVES),
            ("6", LEAVES),
            ("1", STAYS),
            ("2", STAYS),
        ]
        assert comparison.changes[0].saved_code == INCLUDED
        assert comparison.changes[0].draft_code == "memory_type_not_allowed"
        assert (comparison.entering, comparison.leaving) == (0, 2)
        assert comparison.same_policy is False

    def test_a_wider_draft_lists_what_enters_first_with_the_saved_side_reason(self) -> None:
        saved = outcome(["1"], codes={"3": "below_confidence_min"})
        draft = outcome(["1", "3"], truncated=["4"], policy="p2")
        comparison = recall_compare(saved, draft)
        assert [(c.id, c.change) for c in comparison.changes] == [
            ("3", ENTERS),
            ("4", ENTERS),
            ("1", STAYS),
        ]
        entered, truncated = comparison.changes[0], comparison.changes[1]
        assert (entered.saved_code, entered.draft_code) == ("below_confidence_min", INCLUDED)
        # The saved side never looked at it: no reason of its own.
        assert (truncated.saved_code, truncated.draft_code) == (NOT_SELECTED, TRUNCATED)
        assert (comparison.entering, comparison.leaving) == (2, 0)

    def test_a_memory_truncated_on_one_side_and_an_entry_on_the_other_stays_and_differs(
        self,
    ) -> None:
        comparison = recall_compare(outcome(["1"], truncated=["2"]), outcome(["1", "2"]))
        assert [(c.id, c.change, c.saved_code, c.draft_code) for c in comparison.changes] == [
            ("2", STAYS, TRUNCATED, INCLUDED),
            ("1", STAYS, INCLUDED, INCLUDED),
        ]
        assert [c.id for c in comparison.differing] == ["2"]

    def test_memories_out_of_both_contexts_are_listed_with_both_reasons(self) -> None:
        # The draft's narrower type list filters 8, which the saved side ranked below top K;
        # 9 is too sensitive on both sides: listed, decided alike, after the differences.
        saved = outcome(["1"], codes={"8": "below_top_k", "9": "sensitivity_above_ceiling"})
        draft = outcome(
            ["1"], codes={"8": "memory_type_not_allowed", "9": "sensitivity_above_ceiling"}
        )
        comparison = recall_compare(saved, draft)
        assert [(c.id, c.change, c.differs) for c in comparison.changes] == [
            ("8", OUT, True),
            ("1", STAYS, False),
            ("9", OUT, False),
        ]
        assert comparison.changes[0].saved_code == "below_top_k"
        assert comparison.changes[0].draft_code == "memory_type_not_allowed"
        assert [c.id for c in comparison.alike] == ["1", "9"]

    def test_the_same_policy_is_told_by_both_hashes(self) -> None:
        assert recall_compare(outcome([]), outcome([])).same_policy is True
        assert recall_compare(outcome([]), outcome([], budget="b2")).same_policy is False
        assert recall_compare(outcome([]), outcome([], policy="p2")).same_policy is False


# --- properties --------------------------------------------------------------------------------

ids = st.sampled_from([str(n) for n in range(12)])


@st.composite
def outcomes(draw: st.DrawFn) -> RecallOutcome:
    in_context = draw(st.lists(ids, unique=True, max_size=8))
    cut = draw(st.integers(0, len(in_context)))
    looked_at = draw(st.dictionaries(ids, st.sampled_from(["below_top_k", "budget_exhausted"])))
    return outcome(in_context[:cut], in_context[cut:], looked_at)


def in_context(side: RecallOutcome) -> set[str]:
    return set(side.included) | set(side.truncated)


def decided(side: RecallOutcome) -> set[str]:
    return in_context(side) | set(side.codes)


class RecallComparePropertyTests:
    @given(outcomes(), outcomes())
    def test_every_memory_either_side_decided_on_is_listed_once_and_no_other(
        self, saved: RecallOutcome, draft: RecallOutcome
    ) -> None:
        listed = [c.id for c in recall_compare(saved, draft).changes]
        assert len(listed) == len(set(listed))
        assert set(listed) == decided(saved) | decided(draft)

    @given(outcomes(), outcomes())
    def test_the_change_says_on_which_sides_a_memory_is_in_context(
        self, saved: RecallOutcome, draft: RecallOutcome
    ) -> None:
        comparison = recall_compare(saved, draft)
        changes = {
            (True, True): STAYS,
            (True, False): LEAVES,
            (False, True): ENTERS,
            (False, False): OUT,
        }
        for c in comparison.changes:
            sides = (c.id in in_context(saved), c.id in in_context(draft))
            assert c.change == changes[sides]
            assert (c.saved_code in (INCLUDED, TRUNCATED)) is sides[0]
            assert (c.draft_code in (INCLUDED, TRUNCATED)) is sides[1]
            assert c.differs is (c.saved_code != c.draft_code)
        assert comparison.entering == len(in_context(draft) - in_context(saved))
        assert comparison.leaving == len(in_context(saved) - in_context(draft))

    @given(outcomes(), outcomes())
    def test_entering_then_leaving_then_other_differences_then_the_rest_each_in_sides_order(
        self, saved: RecallOutcome, draft: RecallOutcome
    ) -> None:
        changes = recall_compare(saved, draft).changes

        def rank(c: MemoryChange) -> int:
            if c.change in (ENTERS, LEAVES):
                return (ENTERS, LEAVES).index(c.change)
            return 2 if c.differs else 3

        ranks = [rank(c) for c in changes]
        assert ranks == sorted(ranks)
        sides_order = [
            *saved.included, *saved.truncated, *saved.codes,
            *draft.included, *draft.truncated, *draft.codes,
        ]  # fmt: skip
        for r in range(4):
            group = [c.id for c in changes if rank(c) == r]
            assert group == sorted(group, key=sides_order.index)

    @given(outcomes(), outcomes())
    def test_swapping_the_sides_swaps_entering_and_leaving(
        self, saved: RecallOutcome, draft: RecallOutcome
    ) -> None:
        forward = {c.id: c.change for c in recall_compare(saved, draft).changes}
        backward = {c.id: c.change for c in recall_compare(draft, saved).changes}
        swap = {ENTERS: LEAVES, LEAVES: ENTERS, STAYS: STAYS, OUT: OUT}
        assert backward == {pk: swap[change] for pk, change in forward.items()}

    @given(outcomes())
    def test_an_outcome_compared_with_itself_changes_nothing(self, side: RecallOutcome) -> None:
        comparison = recall_compare(side, side)
        assert all(c.change in (STAYS, OUT) and not c.differs for c in comparison.changes)
        assert comparison.same_policy
