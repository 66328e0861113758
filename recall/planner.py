"""The context budget planner (SPEC §5): share ``totalTokenBudget`` among segment kinds.

Plain Python, no Django import. Input: the ranked candidates (already cut to ``topK`` by the
caller; the order given is the rank order) and a :class:`BudgetPolicy`. Output: a
:class:`BudgetPlan` with the per-kind allocation and one :class:`Decision` per candidate.

Notation, per segment kind ``k``: ``raw_k`` = sum of the tokens of its candidates,
``res_k`` = its reservation (0 if absent), ``cap_k`` = its ceiling (absent = no cap),
``T`` = ``totalTokenBudget``.

Algorithm, phase by phase:

1. **Forbid.** A kind in ``forbiddenSegmentKinds`` is reported with reservation, ceiling,
   demand, allocation and use all 0, and each of its candidates gets
   ``segment_kind_forbidden``. Forbidden wins over pinned (fail closed; a warning says so).
2. **Demand.** ``demand_k = min(raw_k, cap_k)``. ``pressure`` is ``Σ demand_k > T``.
3. **Reservation floors.** ``floor_k = min(res_k, demand_k)``: a reservation is a floor
   the kind keeps under pressure, but the part of it the kind cannot use is released to
   the others rather than left idle.
4. **Distribute.** Without pressure every kind is allocated exactly its demand; budget left
   over stays unallocated (allocating tokens nobody can use would only blur the report).
5. **Cut in drop order** (pressure only). Starting from ``allocated_k = demand_k``, the
   excess ``Σ demand_k − T`` is removed kind by kind in the *cut order*, each kind down to
   its floor before the next one is touched:

   a. the kinds of ``dropOrder``, in that order, skipping pinned kinds (never cut by drop
      order) and repeated names;
   b. the other non-pinned kinds, in reverse ``SEGMENT_KINDS`` order (tool_result,
      retrieval, memory, system_policy: the seed's own drop order, so the stable
      system-policy prefix goes last);
   c. the pinned kinds, in the same reverse order. This only happens when pinned content
      alone does not fit next to the other kinds' floors; it sets ``pinned_overflow`` and
      adds a warning.

   With a valid policy (``Σ res_k ≤ T`` over non-forbidden kinds) the excess is gone by now,
   so floors always hold. Should the reservations themselves exceed ``T`` (a policy that
   validation should have rejected), the floors are cut too, in the same order, down to 0,
   with a warning: the total budget is never exceeded.
6. **Pack items.** Within each kind, candidates are taken greedily in rank order: an item
   is included if it fits in what is left of the kind's allocation, otherwise it is skipped
   and packing continues with the next (possibly smaller) item. Skipped items get one code
   for the whole kind:

   * kind cut by pressure (``allocated < demand``): ``budget_floor_hit`` if it is held at
     a non-zero floor (``allocated == floor > 0``), else ``budget_drop_order``;
   * otherwise (only its ceiling kept it below ``raw``): ``budget_ceiling_hit``.

   **Truncated ref.** With ``allow_truncated_refs``, if a kind has skipped items *and*
   allocated tokens that packing left unused (``leftover > 0``) *and*
   ``truncated_ref_tokens <= leftover``, its highest-ranked skipped item is kept as a
   truncated ref (id and metadata only) with code ``truncated``, costing
   ``truncated_ref_tokens``. At most one per kind: the ref stands for "there was more
   here", not a way round the budget.
7. **Report.** ``Decision.tokens`` is what the item costs in the budget (its tokens when
   included, ``truncated_ref_tokens`` when truncated, 0 when dropped), so per kind the
   decisions' tokens add up to ``used``. ``pinned_overflow`` is true when any candidate of
   a pinned kind is not included whole (cut by the total budget or by its own ceiling);
   every such case is spelled out in ``warnings``.

The plan depends only on the inputs: kinds are always visited in ``SEGMENT_KINDS`` or
``dropOrder`` order, never in the policy maps' iteration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

SEGMENT_KINDS: tuple[str, ...] = ("system_policy", "memory", "retrieval", "tool_result")


class DecisionCode(StrEnum):
    INCLUDED = "included"
    TRUNCATED = "truncated"
    BUDGET_FLOOR_HIT = "budget_floor_hit"
    BUDGET_DROP_ORDER = "budget_drop_order"
    BUDGET_CEILING_HIT = "budget_ceiling_hit"
    SEGMENT_KIND_FORBIDDEN = "segment_kind_forbidden"


@dataclass(frozen=True)
class Candidate:
    id: str
    segment_kind: str
    tokens: int
    score: float


def _check_kind(kind: str, where: str) -> None:
    if kind not in SEGMENT_KINDS:
        raise ValueError(f"unknown segment kind {kind!r} in {where}")


def _check_count(value: int, where: str) -> None:
    if value < 0:
        raise ValueError(f"{where} must be >= 0, got {value}")


def _frozen_map(values: Mapping[str, int], where: str) -> Mapping[str, int]:
    for kind, amount in values.items():
        _check_kind(kind, where)
        _check_count(amount, f"{where}[{kind}]")
    # Sorted and read-only, so two equal policies compare (and print) the same.
    return MappingProxyType(dict(sorted(values.items())))


@dataclass(frozen=True)
class BudgetPolicy:
    total_token_budget: int
    per_segment_reservation: Mapping[str, int] = field(default_factory=dict)
    per_segment_ceiling: Mapping[str, int] = field(default_factory=dict)  # missing = no cap
    drop_order: Sequence[str] = ()
    forbidden: frozenset[str] = frozenset()
    pinned: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _check_count(self.total_token_budget, "totalTokenBudget")
        reservation = _frozen_map(self.per_segment_reservation, "perSegmentReservation")
        ceiling = _frozen_map(self.per_segment_ceiling, "perSegmentCeiling")
        for kind in self.drop_order:
            _check_kind(kind, "dropOrder")
        for kind in self.forbidden:
            _check_kind(kind, "forbiddenSegmentKinds")
        for kind in self.pinned:
            _check_kind(kind, "pinned")
        # Frozen dataclass: normalise through object.__setattr__ once, here.
        object.__setattr__(self, "per_segment_reservation", reservation)
        object.__setattr__(self, "per_segment_ceiling", ceiling)
        object.__setattr__(self, "drop_order", tuple(dict.fromkeys(self.drop_order)))
        object.__setattr__(self, "forbidden", frozenset(self.forbidden))
        object.__setattr__(self, "pinned", frozenset(self.pinned))

    @classmethod
    def from_policy(cls, policy: Mapping[str, Any]) -> BudgetPolicy:
        """Build from the camelCase budget axes of a policy document; other axes are ignored.

        ``totalTokenBudget`` is required; the other axes default to empty. A ``null``
        ceiling means no cap, as a missing one does.
        """
        ceilings = policy.get("perSegmentCeiling") or {}
        return cls(
            total_token_budget=int(policy["totalTokenBudget"]),
            per_segment_reservation={
                kind: int(amount)
                for kind, amount in (policy.get("perSegmentReservation") or {}).items()
            },
            per_segment_ceiling={
                kind: int(amount) for kind, amount in ceilings.items() if amount is not None
            },
            drop_order=tuple(policy.get("dropOrder") or ()),
            forbidden=frozenset(policy.get("forbiddenSegmentKinds") or ()),
            pinned=frozenset(policy.get("pinned") or ()),
        )

    def reservation(self, kind: str) -> int:
        return self.per_segment_reservation.get(kind, 0)

    def ceiling(self, kind: str) -> int | None:
        return self.per_segment_ceiling.get(kind)


@dataclass(frozen=True)
class KindAllocation:
    reserved: int
    ceiling: int | None
    demand: int
    allocated: int
    used: int


@dataclass(frozen=True)
class Decision:
    id: str
    segment_kind: str
    code: DecisionCode
    tokens: int  # charged to the budget: 0 when dropped


@dataclass(frozen=True)
class BudgetPlan:
    total_token_budget: int
    per_kind: dict[str, KindAllocation]
    used_tokens: int
    pressure: bool
    decisions: list[Decision]
    included_ids: list[str]
    truncated_ids: list[str]
    pinned_overflow: bool
    warnings: list[str]

    def reason_counts(self) -> dict[str, int]:
        """``{code: n}`` over the decisions, codes in first-seen order."""
        counts: dict[str, int] = {}
        for decision in self.decisions:
            counts[decision.code.value] = counts.get(decision.code.value, 0) + 1
        return counts


# --- phases 1–3: forbid, demand, reservation floors -------------------------------------


def active_kinds(policy: BudgetPolicy) -> tuple[str, ...]:
    """Phase 1: the kinds that may receive budget, in ``SEGMENT_KINDS`` order."""
    return tuple(kind for kind in SEGMENT_KINDS if kind not in policy.forbidden)


def raw_tokens(candidates: Sequence[Candidate]) -> dict[str, int]:
    totals = dict.fromkeys(SEGMENT_KINDS, 0)
    for candidate in candidates:
        totals[candidate.segment_kind] += candidate.tokens
    return totals


def demand(raw: Mapping[str, int], policy: BudgetPolicy) -> dict[str, int]:
    """Phase 2: raw tokens capped by the ceiling; 0 for a forbidden kind."""
    result = dict.fromkeys(SEGMENT_KINDS, 0)
    for kind in active_kinds(policy):
        cap = policy.ceiling(kind)
        result[kind] = raw[kind] if cap is None else min(raw[kind], cap)
    return result


def reservation_floors(demands: Mapping[str, int], policy: BudgetPolicy) -> dict[str, int]:
    """Phase 3: the reservation, but never more than the kind can use."""
    return {kind: min(policy.reservation(kind), demands[kind]) for kind in SEGMENT_KINDS}


# --- phases 4–5: distribute, cut in drop order -----------------------------------------


def cut_order(policy: BudgetPolicy) -> tuple[str, ...]:
    """Phase 5's order: listed dropOrder, then unlisted kinds, then pinned kinds.

    Forbidden kinds are left out (they have nothing to cut).
    """
    active = active_kinds(policy)
    listed = [kind for kind in policy.drop_order if kind in active and kind not in policy.pinned]
    backwards = tuple(reversed(active))
    unlisted = [kind for kind in backwards if kind not in listed and kind not in policy.pinned]
    pinned = [kind for kind in backwards if kind in policy.pinned]
    return (*listed, *unlisted, *pinned)


def _cut_down_to(
    allocated: dict[str, int], limits: Mapping[str, int], order: Iterable[str], excess: int
) -> int:
    """Lower each kind in ``order`` towards its limit until ``excess`` is gone; return the rest."""
    for kind in order:
        cut = min(excess, allocated[kind] - limits[kind])
        if cut > 0:
            allocated[kind] -= cut
            excess -= cut
    return excess


def distribute(
    demands: Mapping[str, int], floors: Mapping[str, int], policy: BudgetPolicy
) -> tuple[dict[str, int], list[str]]:
    """Phases 4 and 5: every kind gets its demand, then the excess is cut in cut order."""
    allocated = dict(demands)
    excess = sum(demands.values()) - policy.total_token_budget
    if excess <= 0:
        return allocated, []
    order = cut_order(policy)
    excess = _cut_down_to(allocated, floors, order, excess)
    if excess <= 0:
        return allocated, []
    # Only reachable when the reservations alone exceed the total: the total still wins.
    _cut_down_to(allocated, dict.fromkeys(SEGMENT_KINDS, 0), order, excess)
    reserved = sum(policy.reservation(kind) for kind in active_kinds(policy))
    return allocated, [
        f"reservations ({reserved}) exceed totalTokenBudget ({policy.total_token_budget}); "
        "floors were cut in drop order"
    ]


# --- phase 6: pack items ----------------------------------------------------------------


def drop_code(demand_k: int, floor_k: int, allocated_k: int) -> DecisionCode:
    """The code for every item a kind could not keep (see the module docstring)."""
    if allocated_k < demand_k:
        if allocated_k == floor_k and floor_k > 0:
            return DecisionCode.BUDGET_FLOOR_HIT
        return DecisionCode.BUDGET_DROP_ORDER
    return DecisionCode.BUDGET_CEILING_HIT


@dataclass(frozen=True)
class KindPacking:
    decisions: dict[int, Decision]  # by candidate position in the input
    used: int


def pack_items(
    items: Sequence[tuple[int, Candidate]],
    allocated_k: int,
    code_if_dropped: DecisionCode,
    *,
    allow_truncated_refs: bool,
    truncated_ref_tokens: int,
) -> KindPacking:
    """Phase 6 for one kind: greedy in rank order, skipping what does not fit."""
    decisions: dict[int, Decision] = {}
    dropped: list[int] = []
    used = 0
    for position, candidate in items:
        if used + candidate.tokens <= allocated_k:
            used += candidate.tokens
            decisions[position] = _decide(candidate, DecisionCode.INCLUDED, candidate.tokens)
        else:
            dropped.append(position)
            decisions[position] = _decide(candidate, code_if_dropped, 0)
    leftover = allocated_k - used
    if allow_truncated_refs and dropped and 0 < leftover and truncated_ref_tokens <= leftover:
        first = decisions[dropped[0]]
        decisions[dropped[0]] = Decision(
            first.id, first.segment_kind, DecisionCode.TRUNCATED, truncated_ref_tokens
        )
        used += truncated_ref_tokens
    return KindPacking(decisions, used)


def _decide(candidate: Candidate, code: DecisionCode, tokens: int) -> Decision:
    return Decision(candidate.id, candidate.segment_kind, code, tokens)


# --- phase 7: report --------------------------------------------------------------------


def pinned_warnings(
    raw: Mapping[str, int],
    demands: Mapping[str, int],
    allocated: Mapping[str, int],
    policy: BudgetPolicy,
) -> list[str]:
    """Say, per pinned kind, why some of its content could not be kept whole."""
    warnings = []
    for kind in SEGMENT_KINDS:
        if kind not in policy.pinned:
            continue
        if kind in policy.forbidden:
            warnings.append(f"segment kind {kind!r} is both pinned and forbidden; forbidden wins")
            continue
        if demands[kind] < raw[kind]:
            warnings.append(
                f"pinned segment kind {kind!r} has {raw[kind]} tokens of candidates "
                f"but its ceiling is {policy.ceiling(kind)}"
            )
        if allocated[kind] < demands[kind]:
            warnings.append(
                f"pinned segment kind {kind!r} needs {demands[kind]} tokens but only "
                f"{allocated[kind]} fit in totalTokenBudget {policy.total_token_budget} "
                "next to the other kinds' reservations"
            )
    return warnings


def _kind_allocation(
    kind: str, policy: BudgetPolicy, demand_k: int, allocated_k: int, used_k: int
) -> KindAllocation:
    if kind in policy.forbidden:
        return KindAllocation(reserved=0, ceiling=0, demand=0, allocated=0, used=0)
    return KindAllocation(
        reserved=policy.reservation(kind),
        ceiling=policy.ceiling(kind),
        demand=demand_k,
        allocated=allocated_k,
        used=used_k,
    )


def _check_candidates(candidates: Sequence[Candidate], truncated_ref_tokens: int) -> None:
    _check_count(truncated_ref_tokens, "truncated_ref_tokens")
    for candidate in candidates:
        _check_kind(candidate.segment_kind, f"candidate {candidate.id!r}")
        _check_count(candidate.tokens, f"tokens of candidate {candidate.id!r}")


def plan_budget(
    candidates: Sequence[Candidate],
    policy: BudgetPolicy,
    *,
    allow_truncated_refs: bool = True,
    truncated_ref_tokens: int = 0,
) -> BudgetPlan:
    """Allocate the budget per kind and decide every candidate (see the module docstring)."""
    _check_candidates(candidates, truncated_ref_tokens)
    raw = raw_tokens(candidates)
    demands = demand(raw, policy)
    floors = reservation_floors(demands, policy)
    allocated, warnings = distribute(demands, floors, policy)

    decisions: dict[int, Decision] = {}
    used = dict.fromkeys(SEGMENT_KINDS, 0)
    for kind in SEGMENT_KINDS:
        items = [(i, c) for i, c in enumerate(candidates) if c.segment_kind == kind]
        if kind in policy.forbidden:
            for position, candidate in items:
                decisions[position] = _decide(candidate, DecisionCode.SEGMENT_KIND_FORBIDDEN, 0)
            continue
        packing = pack_items(
            items,
            allocated[kind],
            drop_code(demands[kind], floors[kind], allocated[kind]),
            allow_truncated_refs=allow_truncated_refs,
            truncated_ref_tokens=truncated_ref_tokens,
        )
        decisions.update(packing.decisions)
        used[kind] = packing.used

    ordered = [decisions[position] for position in range(len(candidates))]
    pinned_overflow = any(
        d.segment_kind in policy.pinned and d.code is not DecisionCode.INCLUDED
        for d in ordered
        if d.segment_kind not in policy.forbidden
    )
    return BudgetPlan(
        total_token_budget=policy.total_token_budget,
        per_kind={
            kind: _kind_allocation(kind, policy, demands[kind], allocated[kind], used[kind])
            for kind in SEGMENT_KINDS
        },
        used_tokens=sum(used.values()),
        pressure=sum(demands.values()) > policy.total_token_budget,
        decisions=ordered,
        included_ids=[d.id for d in ordered if d.code is DecisionCode.INCLUDED],
        truncated_ids=[d.id for d in ordered if d.code is DecisionCode.TRUNCATED],
        pinned_overflow=pinned_overflow,
        warnings=warnings + pinned_warnings(raw, demands, allocated, policy),
    )
