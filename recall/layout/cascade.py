"""The nine-stage pruning cascade (seed 000, SPEC section 6).

Plain Python, no Django import.

When the payload's estimate exceeds the dynamic budget, the stages of ``PRUNING_STAGES`` run
in the seed's order, each followed by a new estimate, and the cascade stops at the first
stage after which the payload fits:

1. drop all prior-session history;
2. keep at most the last 10 current-session turns;
3. remove long-term passages with relevancy below 0.3;
4. remove short- and long-term passages with relevancy below 0.5;
5. keep at most the last 5 current turns;
6. keep up to 3 short-term and 2 long-term passages, by relevance;
7. keep up to 3 insights and 3 summaries;
8. keep up to 5 entities and 5 known facts;
9. the emergency minimum: the last 2 turns and up to 2 short-term passages, nothing else.

Each stage is a pure function ``Payload -> (Payload, removed counts)``. Unscored items rank
below every score, so under pressure they go first; ties keep the caller's order. Stage 9's
minimum can still exceed a tiny budget: the report says so (``cascade_warnings``) rather
than hiding it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from recall.layout.estimate import Payload, TokenCounter, estimate_payload
from recall.layout.request import SupportingItem

Removed = dict[str, int]
_StageFn = Callable[[Payload], tuple[Payload, Removed]]


def _relevance_key(item: SupportingItem) -> float:
    # Unscored items rank below every score: under pressure they go first.
    return -math.inf if item.relevancy is None else item.relevancy


def _top_indices_by_relevance(
    items: Sequence[SupportingItem], indices: Sequence[int], keep: int
) -> set[int]:
    """Indices of the ``keep`` most relevant of ``items[indices]``; ties by position."""
    ranked = sorted(indices, key=lambda i: (-_relevance_key(items[i]), i))
    return set(ranked[:keep])


def _passage_mask(passages: Sequence[SupportingItem], short: int, long: int) -> list[bool]:
    """Mask keeping the top ``short`` short-term and ``long`` long-term passages."""
    chosen: set[int] = set()
    for term, keep in (("short", short), ("long", long)):
        indices = [i for i, p in enumerate(passages) if p.term == term]
        chosen |= _top_indices_by_relevance(passages, indices, keep)
    return [i in chosen for i in range(len(passages))]


def _with_sections(payload: Payload, **sections: tuple[SupportingItem, ...]) -> Payload:
    return replace(payload, supporting={**payload.supporting, **sections})


def _nonzero(counts: Removed) -> Removed:
    return {key: count for key, count in counts.items() if count}


def drop_prior_session_history(payload: Payload) -> tuple[Payload, Removed]:
    return replace(payload, prior=()), _nonzero({"prior_session_turns": len(payload.prior)})


def _keep_last_turns(payload: Payload, keep: int) -> tuple[Payload, Removed]:
    kept = payload.history[-keep:] if keep else ()
    return replace(payload, history=kept), _nonzero({"turns": len(payload.history) - len(kept)})


def keep_last_10_turns(payload: Payload) -> tuple[Payload, Removed]:
    return _keep_last_turns(payload, 10)


def keep_last_5_turns(payload: Payload) -> tuple[Payload, Removed]:
    return _keep_last_turns(payload, 5)


def _split_passages(
    passages: Sequence[SupportingItem], keep: Sequence[bool]
) -> tuple[tuple[SupportingItem, ...], Removed]:
    """Keep passages by index mask; count the rest per term (equal items stay distinct)."""
    kept = tuple(p for p, k in zip(passages, keep, strict=True) if k)
    removed: Removed = {}
    for passage, k in zip(passages, keep, strict=True):
        if not k:
            key = f"{passage.term}_passages"
            removed[key] = removed.get(key, 0) + 1
    return kept, removed


def _drop_passages_below(
    payload: Payload, terms: tuple[str, ...], threshold: float
) -> tuple[Payload, Removed]:
    passages = payload.supporting.get("passages", ())
    keep = [p.term not in terms or _relevance_key(p) >= threshold for p in passages]
    kept, removed = _split_passages(passages, keep)
    return _with_sections(payload, passages=kept), removed


def drop_long_passages_below_0_3(payload: Payload) -> tuple[Payload, Removed]:
    return _drop_passages_below(payload, ("long",), 0.3)


def drop_passages_below_0_5(payload: Payload) -> tuple[Payload, Removed]:
    return _drop_passages_below(payload, ("short", "long"), 0.5)


def _cap_passages(payload: Payload, short: int, long: int) -> tuple[Payload, Removed]:
    passages = payload.supporting.get("passages", ())
    kept, removed = _split_passages(passages, _passage_mask(passages, short, long))
    return _with_sections(payload, passages=kept), removed


def keep_3_short_2_long_passages(payload: Payload) -> tuple[Payload, Removed]:
    return _cap_passages(payload, short=3, long=2)


def _cap_sections(payload: Payload, caps: Mapping[str, int]) -> tuple[Payload, Removed]:
    """Keep the first N of each section, in the caller's ranking order."""
    capped = {name: payload.supporting.get(name, ())[:cap] for name, cap in caps.items()}
    removed = {name: len(payload.supporting.get(name, ())) - len(capped[name]) for name in caps}
    return _with_sections(payload, **capped), _nonzero(removed)


def keep_3_insights_3_summaries(payload: Payload) -> tuple[Payload, Removed]:
    return _cap_sections(payload, {"insights": 3, "summaries": 3})


def keep_5_entities_5_facts(payload: Payload) -> tuple[Payload, Removed]:
    return _cap_sections(payload, {"entities": 5, "known_facts": 5})


def emergency_minimum(payload: Payload) -> tuple[Payload, Removed]:
    """Last 2 turns and up to 2 short-term passages; every other item is cleared."""
    reduced, removed = _keep_last_turns(payload, 2)
    if payload.prior:  # stage 1 already emptied it; this keeps the stage correct alone
        removed["prior_session_turns"] = len(payload.prior)
    passages = payload.supporting.get("passages", ())
    kept, removed_passages = _split_passages(passages, _passage_mask(passages, 2, 0))
    removed.update(removed_passages)
    for name, items in payload.supporting.items():
        if name != "passages" and items:
            removed[name] = len(items)
    cleared = {name: () for name in payload.supporting if name != "passages"}
    return replace(reduced, prior=(), supporting={**cleared, "passages": kept}), removed


@dataclass(frozen=True)
class PruningStage:
    number: int
    name: str
    description: str
    apply: _StageFn


PRUNING_STAGES: tuple[PruningStage, ...] = (
    PruningStage(
        1,
        "drop_prior_session_history",
        "Drops all prior-session history.",
        drop_prior_session_history,
    ),
    PruningStage(
        2,
        "keep_last_10_turns",
        "Keeps at most the last 10 current-session turns.",
        keep_last_10_turns,
    ),
    PruningStage(
        3,
        "drop_long_passages_below_0_3",
        "Removes long-term passages with relevancy below 0.3.",
        drop_long_passages_below_0_3,
    ),
    PruningStage(
        4,
        "drop_passages_below_0_5",
        "Removes short/long-term passages with relevancy below 0.5.",
        drop_passages_below_0_5,
    ),
    PruningStage(
        5,
        "keep_last_5_turns",
        "Keeps at most the last 5 current turns.",
        keep_last_5_turns,
    ),
    PruningStage(
        6,
        "keep_3_short_2_long_passages",
        "Keeps up to 3 short-term and 2 long-term passages by relevance.",
        keep_3_short_2_long_passages,
    ),
    PruningStage(
        7,
        "keep_3_insights_3_summaries",
        "Keeps up to 3 insights and 3 summaries.",
        keep_3_insights_3_summaries,
    ),
    PruningStage(
        8,
        "keep_5_entities_5_facts",
        "Keeps up to 5 entities and 5 facts.",
        keep_5_entities_5_facts,
    ),
    PruningStage(
        9,
        "emergency_minimum",
        "Falls back to the last 2 turns and up to 2 short-term passages, clearing the "
        "other supporting items and emitting a pruning warning.",
        emergency_minimum,
    ),
)
EMERGENCY_STAGE = PRUNING_STAGES[-1].number


@dataclass(frozen=True)
class StageReport:
    """One cascade stage that ran: what it removed and whether the result then fit."""

    number: int
    name: str
    description: str
    removed: dict[str, int]
    estimate_after: int
    fits: bool


def run_cascade(
    payload: Payload, query: str, dynamic_budget: int, counter: TokenCounter
) -> tuple[Payload, list[StageReport]]:
    """Apply stages in order, checking the estimate after each; stop at the first fit."""
    reports: list[StageReport] = []
    for stage in PRUNING_STAGES:
        payload, removed = stage.apply(payload)
        estimate = estimate_payload(payload, query, counter).total
        fits = estimate <= dynamic_budget
        reports.append(
            StageReport(stage.number, stage.name, stage.description, removed, estimate, fits)
        )
        if fits:
            break
    return payload, reports


def _describe_removed(removed: Mapping[str, int]) -> str:
    if not removed:
        return "nothing more"
    return ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in removed.items())


def cascade_warnings(reports: Sequence[StageReport], dynamic_budget: int) -> list[str]:
    if not reports or reports[-1].number != EMERGENCY_STAGE:
        return []
    last = reports[-1]
    warnings = [
        "pruning reached the emergency minimum: kept only the last 2 turns and up to 2 "
        f"short-term passages; removed {_describe_removed(last.removed)}"
    ]
    if not last.fits:
        warnings.append(
            f"emergency overage: even the emergency minimum is estimated at "
            f"{last.estimate_after} tokens, {last.estimate_after - dynamic_budget} over the "
            f"{dynamic_budget}-token dynamic budget; reduce fixed costs, the query or turn "
            "sizes — do not raise context_window above the real model limit"
        )
    return warnings
