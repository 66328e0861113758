"""Saved policy vs draft override: each memory's decision on both sides (plain Python).

The sandbox's compare mode recalls under the saved policy and previews the same request under
a draft override. ``recall_compare`` tells, memory by memory, how the two outcomes differ:

1. *Sides.* On each side a memory is in the context (an entry, ``included``, or a truncated
   ref, ``truncated``) or out of it, with the decision code that left it out
   (``not_selected`` when that side's pipeline did not look at it).
2. *Changes.* A memory in the context on both sides ``stays``; on the saved side only, it
   ``leaves``; on the draft side only, it ``enters``; on neither, it is ``out``. Every memory
   either side decided on is listed: those in a context and those either side left out.
3. *Differs.* The two sides' decisions differ: it enters or leaves, it stays but is an entry on
   one side and a truncated ref on the other, or it is out on both for different reasons.
4. *Order.* Entering first, then leaving, then the others whose decision differs, then those
   decided alike; within each, the saved side's order (its entries, its truncated refs, then
   the memories it left out), then the draft side's.
5. *Same policy.* The draft changes nothing when both sides have the same effective policy
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
OUT = "out"


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
    change: str  # ENTERS, LEAVES, STAYS or OUT
    saved_code: str  # INCLUDED, TRUNCATED or why the saved side left it out
    draft_code: str

    @property
    def differs(self) -> bool:
        return self.saved_code != self.draft_code


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

    @property
    def differing(self) -> list[MemoryChange]:
        return [c for c in self.changes if c.differs]

    @property
    def alike(self) -> list[MemoryChange]:
        return [c for c in self.changes if not c.differs]


def _decisions(outcome: RecallOutcome) -> dict[str, str]:
    """Memory id -> its decision on this side, in the side's order: entries, truncated refs,
    then the memories it left out."""
    decided = {pk: INCLUDED for pk in outcome.included}
    decided.update({pk: TRUNCATED for pk in outcome.truncated})
    for pk, code in outcome.codes.items():
        decided.setdefault(pk, code)
    return decided


def _change(saved_code: str, draft_code: str) -> str:
    saved_in = saved_code in (INCLUDED, TRUNCATED)
    draft_in = draft_code in (INCLUDED, TRUNCATED)
    if saved_in and draft_in:
        return STAYS
    if saved_in or draft_in:
        return LEAVES if saved_in else ENTERS
    return OUT


def _rank(change: MemoryChange) -> int:
    if change.change in (ENTERS, LEAVES):
        return (ENTERS, LEAVES).index(change.change)
    return 2 if change.differs else 3


def recall_compare(saved: RecallOutcome, draft: RecallOutcome) -> RecallComparison:
    """Each memory either side decided on, with both decisions, differences first."""
    saved_side, draft_side = _decisions(saved), _decisions(draft)
    listed = list(saved_side) + [pk for pk in draft_side if pk not in saved_side]
    changes = []
    for pk in listed:
        saved_code = saved_side.get(pk, NOT_SELECTED)
        draft_code = draft_side.get(pk, NOT_SELECTED)
        changes.append(MemoryChange(pk, _change(saved_code, draft_code), saved_code, draft_code))
    changes.sort(key=_rank)  # stable: the sides' order kept
    same = saved.policy_hash == draft.policy_hash and saved.budget_hash == draft.budget_hash
    return RecallComparison(changes=changes, same_policy=same)
