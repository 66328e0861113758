"""Where a later floor and an older workload policy disagree, the floor wins (plain Python).

A workload policy is judged against the floor of its day when it is saved. A later floor
change can then make the two disagree although no axis of the workload relaxes the new floor:
the floor forbids a kind the workload pins, or raises a pinned kind's reservation past the
workload's ceiling or total. Narrowing axis by axis (``policies.algebra``) would then give a
budget the planner cannot honour, and every recall of the workload would fail. ``settle``
resolves each such disagreement instead, in favour of the floor, and reports it as a
:class:`Conflict`, so the portal and the API can say what the effective policy uses instead.

Input: the floor and the *axis-by-axis* narrowing of a workload policy (a full document, every
axis within the floor). Output: the same document with these steps applied, in this order,
each visiting segment kinds in ``SEGMENT_KINDS`` order, plus one conflict per change:

1. **Pinned and forbidden.** A kind both pinned and forbidden loses the entry the floor does
   not hold: if the floor forbids it, it is no longer pinned (``FLOOR_FORBIDS_PINNED_KIND``);
   if the floor pins it, it is no longer forbidden (``FLOOR_PINS_FORBIDDEN_KIND``); if the
   floor does neither (a workload policy that could never have been saved), forbidden wins,
   fail closed, as in the budget planner (``WORKLOAD_PINS_FORBIDDEN_KIND``).
2. **Ceilings of floor-pinned kinds.** A floor-pinned kind keeps at least the floor's
   reservation ``F_k``. A ceiling below ``F_k`` is raised to ``F_k``
   (``FLOOR_RESERVATION_ABOVE_CEILING``); a reservation above its (possibly raised) ceiling is
   lowered to it (``RESERVATION_ABOVE_FLOOR_CEILING``), which is still at least ``F_k``.
3. **Reservations within the total.** While the reservations of the kinds that are not
   forbidden add up to more than ``totalTokenBudget``, they are cut in the *cut order* (the
   effective ``dropOrder`` without pinned kinds, then the other unpinned kinds in reverse
   ``SEGMENT_KINDS`` order, then the pinned kinds in reverse order: the planner's phase 5).
   Two passes over that order, each stopping as soon as the reservations fit, each cutting a
   kind only down to its limit before moving to the next kind:

   a. limit: the floor's own reservation for the kind, capped by the kind's ceiling (a raise
      the workload made is given back);
   b. limit: what the floor guarantees, ``F_k`` for a floor-pinned kind and 0 for any other.

   Every kind cut reports ``RESERVATION_RAISE_GIVEN_BACK`` (only step a touched it) or
   ``RESERVATION_CUT_TO_FIT`` (step b did).
4. **The total.** If the floor-pinned reservations alone still exceed the total, the total is
   raised to their sum (``FLOOR_RESERVATIONS_EXCEED_TOTAL``).

Why this stays within the floor: step 1 only removes a pin the floor does not hold or a
forbid the floor does not hold; step 2 raises a ceiling to ``F_k``, which is at most the
floor's own ceiling (the floor is honourable); steps 3a/3b never cut a floor-pinned kind below
``F_k``; step 4 raises the total to at most the sum of the floor's pinned reservations, which
the floor's own total covers. Why it is honourable: after step 1 no kind is both pinned and
forbidden, after step 2 no reservation passes its ceiling, and after steps 3-4 the counted
reservations fit the total. The result depends only on the inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.axes import PolicyDocument
from policies.vocabulary import SEGMENT_KINDS

FLOOR_FORBIDS_PINNED_KIND = "FLOOR_FORBIDS_PINNED_KIND"
FLOOR_PINS_FORBIDDEN_KIND = "FLOOR_PINS_FORBIDDEN_KIND"
WORKLOAD_PINS_FORBIDDEN_KIND = "WORKLOAD_PINS_FORBIDDEN_KIND"
FLOOR_RESERVATION_ABOVE_CEILING = "FLOOR_RESERVATION_ABOVE_CEILING"
RESERVATION_ABOVE_FLOOR_CEILING = "RESERVATION_ABOVE_FLOOR_CEILING"
RESERVATION_RAISE_GIVEN_BACK = "RESERVATION_RAISE_GIVEN_BACK"
RESERVATION_CUT_TO_FIT = "RESERVATION_CUT_TO_FIT"
FLOOR_RESERVATIONS_EXCEED_TOTAL = "FLOOR_RESERVATIONS_EXCEED_TOTAL"

CODES: tuple[str, ...] = (
    FLOOR_FORBIDS_PINNED_KIND,
    FLOOR_PINS_FORBIDDEN_KIND,
    WORKLOAD_PINS_FORBIDDEN_KIND,
    FLOOR_RESERVATION_ABOVE_CEILING,
    RESERVATION_ABOVE_FLOOR_CEILING,
    RESERVATION_RAISE_GIVEN_BACK,
    RESERVATION_CUT_TO_FIT,
    FLOOR_RESERVATIONS_EXCEED_TOTAL,
)

# A few words per code, for a table cell; ``Conflict.message`` says it in full.
SUMMARIES: dict[str, str] = {
    FLOOR_FORBIDS_PINNED_KIND: "forbidden by the floor",
    FLOOR_PINS_FORBIDDEN_KIND: "pinned by the floor",
    WORKLOAD_PINS_FORBIDDEN_KIND: "pinned and forbidden",
    FLOOR_RESERVATION_ABOVE_CEILING: "raised to the floor's reservation",
    RESERVATION_ABOVE_FLOOR_CEILING: "lowered to the ceiling",
    RESERVATION_RAISE_GIVEN_BACK: "raise given back to fit the total",
    RESERVATION_CUT_TO_FIT: "cut to fit the total",
    FLOOR_RESERVATIONS_EXCEED_TOTAL: "raised to hold the floor's reservations",
}


@dataclass(frozen=True)
class Conflict:
    """One place where the effective policy does not use what narrowing gave it.

    ``workload`` is the value narrowing alone gave (the workload's own, or the floor's where
    the workload left the axis out), ``floor`` the floor's entry that wins (None when the
    floor has none), ``effective`` what the effective policy uses instead. Set axes use the
    words ``"pinned"``, ``"forbidden"``, ``"not pinned"`` and ``"not forbidden"``.
    """

    code: str
    axis: str
    kind: str | None
    workload: Any
    floor: Any
    effective: Any
    message: str

    @property
    def summary(self) -> str:
        return SUMMARIES[self.code]

    def as_json(self) -> dict[str, Any]:
        """The camelCase form the API and the audit trail use."""
        return {
            "code": self.code,
            "axis": self.axis,
            "kind": self.kind,
            "workloadValue": self.workload,
            "floorValue": self.floor,
            "effectiveValue": self.effective,
            "message": self.message,
        }


def settle(
    floor: Mapping[str, Any], narrowed: PolicyDocument
) -> tuple[PolicyDocument, list[Conflict]]:
    """Steps 1-4 of the module docstring: ``(honourable policy, conflicts)``; inputs untouched."""
    policy = copy.deepcopy(narrowed)
    found = settle_pins(floor, policy)
    found += settle_ceilings(floor, policy)
    found += settle_total(floor, policy)
    return policy, found


# --- step 1: pinned and forbidden ---------------------------------------------------------------


def settle_pins(floor: Mapping[str, Any], policy: PolicyDocument) -> list[Conflict]:
    """Step 1, in place: no kind stays both pinned and forbidden."""
    pinned, forbidden = set(policy["pinned"]), set(policy["forbiddenSegmentKinds"])
    found = []
    for kind in SEGMENT_KINDS:
        if kind not in pinned or kind not in forbidden:
            continue
        if kind in floor["pinned"]:
            forbidden.discard(kind)
            found.append(
                Conflict(
                    FLOOR_PINS_FORBIDDEN_KIND,
                    "forbiddenSegmentKinds",
                    kind,
                    "forbidden",
                    "pinned",
                    "not forbidden",
                    f"The floor pins {kind}, which the workload policy forbids: {kind} stays "
                    "pinned and is not forbidden.",
                )
            )
            continue
        pinned.discard(kind)
        if kind in floor["forbiddenSegmentKinds"]:
            code, floor_value = FLOOR_FORBIDS_PINNED_KIND, "forbidden"
            message = f"The floor forbids {kind}, which the workload policy pins: it is not pinned."
        else:
            code, floor_value = WORKLOAD_PINS_FORBIDDEN_KIND, None
            message = f"The workload policy both pins and forbids {kind}: forbidden wins."
        found.append(Conflict(code, "pinned", kind, "pinned", floor_value, "not pinned", message))
    policy["pinned"], policy["forbiddenSegmentKinds"] = sorted(pinned), sorted(forbidden)
    return found


# --- step 2: ceilings of floor-pinned kinds -----------------------------------------------------


def settle_ceilings(floor: Mapping[str, Any], policy: PolicyDocument) -> list[Conflict]:
    """Step 2, in place: a floor-pinned kind's ceiling holds its floor reservation, and no more."""
    ceilings: dict[str, int] = policy["perSegmentCeiling"]
    reservations: dict[str, int] = policy["perSegmentReservation"]
    guaranteed = floor["perSegmentReservation"]
    found = []
    for kind in SEGMENT_KINDS:
        if kind not in floor["pinned"] or kind not in ceilings:
            continue
        least = guaranteed.get(kind, 0)
        if ceilings[kind] < least:
            found.append(
                Conflict(
                    FLOOR_RESERVATION_ABOVE_CEILING,
                    "perSegmentCeiling",
                    kind,
                    ceilings[kind],
                    least,
                    least,
                    f"The floor reserves {least} tokens for the pinned kind {kind}, more than "
                    f"the workload policy's ceiling of {ceilings[kind]}: the ceiling is {least}.",
                )
            )
            ceilings[kind] = least
        if reservations.get(kind, 0) > ceilings[kind]:
            found.append(
                Conflict(
                    RESERVATION_ABOVE_FLOOR_CEILING,
                    "perSegmentReservation",
                    kind,
                    reservations[kind],
                    ceilings[kind],
                    ceilings[kind],
                    f"The reservation for {kind} ({reservations[kind]}) is above its ceiling "
                    f"({ceilings[kind]}): it is lowered to the ceiling.",
                )
            )
            reservations[kind] = ceilings[kind]
    return found


# --- steps 3 and 4: reservations within the total -----------------------------------------------


def cut_order(policy: Mapping[str, Any]) -> list[str]:
    """The kinds that are not forbidden, in the order the budget planner cuts them (phase 5)."""
    forbidden, pinned = set(policy["forbiddenSegmentKinds"]), set(policy["pinned"])
    active = [kind for kind in SEGMENT_KINDS if kind not in forbidden]
    listed = [kind for kind in dict.fromkeys(policy["dropOrder"]) if kind in active]
    listed = [kind for kind in listed if kind not in pinned]
    backwards = list(reversed(active))
    unlisted = [kind for kind in backwards if kind not in listed and kind not in pinned]
    return [*listed, *unlisted, *(kind for kind in backwards if kind in pinned)]


def _cut_down_to(
    values: dict[str, int], limits: Mapping[str, int], order: Iterable[str], excess: int
) -> int:
    """Lower each kind in ``order`` towards its limit until ``excess`` is gone; return the rest."""
    for kind in order:
        cut = min(excess, values.get(kind, 0) - limits.get(kind, 0))
        if cut > 0:
            values[kind] -= cut
            excess -= cut
    return excess


def counted_reservations(policy: Mapping[str, Any]) -> int:
    """Tokens reserved by the kinds that are not forbidden (a forbidden kind is given 0)."""
    forbidden = set(policy["forbiddenSegmentKinds"])
    return sum(v for k, v in policy["perSegmentReservation"].items() if k not in forbidden)


def settle_total(floor: Mapping[str, Any], policy: PolicyDocument) -> list[Conflict]:
    """Steps 3 and 4, in place: the counted reservations fit ``totalTokenBudget``."""
    total: int = policy["totalTokenBudget"]
    counted = counted_reservations(policy)
    if counted <= total:
        return []
    reservations: dict[str, int] = policy["perSegmentReservation"]
    ceilings: Mapping[str, int] = policy["perSegmentCeiling"]
    floor_reserved: Mapping[str, int] = floor["perSegmentReservation"]
    floor_pinned = set(floor["pinned"])
    floor_level = {
        kind: min(floor_reserved.get(kind, 0), ceilings.get(kind, floor_reserved.get(kind, 0)))
        for kind in reservations
    }
    guaranteed = {
        kind: floor_reserved.get(kind, 0) if kind in floor_pinned else 0 for kind in reservations
    }
    order = cut_order(policy)
    before = dict(reservations)
    excess = _cut_down_to(reservations, floor_level, order, counted - total)
    given_back = dict(reservations)
    excess = _cut_down_to(reservations, guaranteed, order, excess)
    found = [
        Conflict(
            RESERVATION_RAISE_GIVEN_BACK
            if reservations[kind] == given_back[kind]
            else RESERVATION_CUT_TO_FIT,
            "perSegmentReservation",
            kind,
            before[kind],
            floor_reserved.get(kind),
            reservations[kind],
            f"Reservations add up to {counted} tokens, more than the totalTokenBudget of "
            f"{total}: the reservation for {kind} is cut from {before[kind]} to "
            f"{reservations[kind]}.",
        )
        for kind in order
        if reservations.get(kind, 0) != before.get(kind, 0)
    ]
    if excess > 0:
        needed = total + excess
        found.append(
            Conflict(
                FLOOR_RESERVATIONS_EXCEED_TOTAL,
                "totalTokenBudget",
                None,
                total,
                needed,
                needed,
                f"The floor's reservations for pinned kinds add up to {needed} tokens, more "
                f"than the workload policy's totalTokenBudget of {total}: the total is {needed}.",
            )
        )
        policy["totalTokenBudget"] = needed
    return found
