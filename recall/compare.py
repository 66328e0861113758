"""Saved policy vs draft override: which memories enter or leave the context (plain Python).

The sandbox's compare mode recalls under the saved policy and previews the same request under
a draft override. ``recall_compare`` tells, memory by memory, how the two outcomes differ:

1. *Sides.* On each side a memory is in the context (an entry, ``included``, or a truncated
   ref, ``truncated``) or out of it, with the decision code that left it out
   (``not_selected`` when that side's pipeline did not look at it).
2. *Changes.* A memory in the context on both sides ``stays``; on the saved side only, it
   ``leaves``; on the draft side only, it ``enters``. A memory out of the context on both
   sides is no change and is not listed.
3. *Order.* Entering first, then leaving, then staying; within each, the saved side's order
   (its entries, then its truncated refs), then the draft side's.
4. *Same policy.* The draft changes nothing when both sides have the same effective policy
   and budget hashes, whatever the override said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

INCLUDED = "included"
TRUNCATED = "truncated"
NOT_SELECTED = "not_selected"

ENTERS = "enters"
LEAVES = "leaves"
STAYS = "stays"
CHANGE_ORDER = (ENTERS, LEAVES, STAYS)


@dataclass(frozen=True)
class RecallOutcome:
    """One side: what entered the context, and why the rest did not."""

    included: Sequence[str]  # memory ids of the entries, in order
    truncated: Sequence[str]  # memory ids of the truncated refs, in order
    policy_hash: str
    budget_hash: str
    codes: Mapping[str, str] = field(default_factory=dict)  # memory id -> decision code


@dataclass(frozen=True)
class MemoryChange:
    id: str
    change: str  # ENTERS, LEAVES or STAYS
    saved_code: str  # INCLUDED, TRUNCATED or why the saved side left it out
    draft_code: str


@dataclass(frozen=True)
class RecallComparison:
    changes: list[MemoryChange]
    same_policy: bool

    @property
    def entering(self) -> int:
        return sum(1 for c in self.changes if c.change == ENTERS)

    @property
    def leaving(self) -> int:
        return sum(1 for c in self.changes if c.change == LEAVES)


def _in_context(outcome: RecallOutcome) -> dict[str, str]:
    """Memory id -> INCLUDED or TRUNCATED, in the outcome's order (entries first)."""
    state = {pk: INCLUDED for pk in outcome.included}
    state.update({pk: TRUNCATED for pk in outcome.truncated})
    return state


def _change(pk: str, saved: Mapping[str, str], draft: Mapping[str, str]) -> str:
    if pk in saved and pk in draft:
        return STAYS
    return LEAVES if pk in saved else ENTERS


def recall_compare(saved: RecallOutcome, draft: RecallOutcome) -> RecallComparison:
    """How the draft side's context differs from the saved side's, memory by memory."""
    saved_state, draft_state = _in_context(saved), _in_context(draft)
    listed = list(saved_state) + [pk for pk in draft_state if pk not in saved_state]
    changes = [
        MemoryChange(
            id=pk,
            change=_change(pk, saved_state, draft_state),
            saved_code=saved_state.get(pk) or saved.codes.get(pk, NOT_SELECTED),
            draft_code=draft_state.get(pk) or draft.codes.get(pk, NOT_SELECTED),
        )
        for pk in listed
    ]
    changes.sort(key=lambda c: CHANGE_ORDER.index(c.change))  # stable: sides' order kept
    same = saved.policy_hash == draft.policy_hash and saved.budget_hash == draft.budget_hash
    return RecallComparison(changes=changes, same_policy=same)
