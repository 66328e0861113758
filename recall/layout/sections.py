"""Supporting sections before any pruning: filter the items, then fill the sections.

Plain Python, no Django import.

1. ``filter_supporting`` drops decayed and superseded items, summaries flagged redundant
   (when ``exclude_redundant_summaries``) and scored items below ``min_query_relevance``;
2. ``fill_sections`` walks the sections in ``section_priority`` order and, within each, the
   items in the caller's ranking order: an item is kept while its section is under its
   ``max_items`` cap and its cost (content, bullet, and the header for a section's first
   item) fits what is left of the supporting budget. An item that does not fit is skipped,
   not the end of the section: a later, smaller one may still fit. Sections not listed in
   ``section_priority`` get no space.

Every item left out is counted by reason in ``filtered`` (``FILTER_REASONS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from recall.layout.config import SupportingContextConfig
from recall.layout.estimate import TokenCounter, item_cost
from recall.layout.request import SupportingItem

FILTER_REASONS: tuple[str, ...] = (
    "decayed",
    "superseded",
    "redundant_summary",
    "below_min_query_relevance",
    "history_over_max_turns",
    "not_in_section_priority",
    "over_max_items",
    "over_supporting_budget",
)


def _exclusion_reason(
    item: SupportingItem, section: str, config: SupportingContextConfig
) -> str | None:
    if item.decayed:
        return "decayed"
    if item.superseded:
        return "superseded"
    if section == "summaries" and item.redundant and config.exclude_redundant_summaries:
        return "redundant_summary"
    # Unscored items (state, tools...) are not judged by query relevance.
    below = item.relevancy is not None and item.relevancy < config.min_query_relevance
    if config.min_query_relevance > 0 and below:
        return "below_min_query_relevance"
    return None


def filter_supporting(
    supporting: Mapping[str, Sequence[SupportingItem]],
    config: SupportingContextConfig,
    filtered: dict[str, int],
) -> dict[str, list[SupportingItem]]:
    """Drop decayed/superseded items, redundant summaries and low-relevance items."""
    kept: dict[str, list[SupportingItem]] = {}
    for section, items in supporting.items():
        kept[section] = []
        for item in items:
            reason = _exclusion_reason(item, section, config)
            if reason is None:
                kept[section].append(item)
            else:
                filtered[reason] += 1
    return kept


def _fill_section(
    items: Sequence[SupportingItem],
    cap: int | None,
    remaining: int,
    counter: TokenCounter,
    filtered: dict[str, int],
) -> tuple[list[SupportingItem], int]:
    kept: list[SupportingItem] = []
    for item in items:
        if cap is not None and len(kept) >= cap:
            filtered["over_max_items"] += 1
            continue
        cost = item_cost(counter, item, opens_section=not kept)
        # Skip rather than stop: a later, smaller item may still fit.
        if cost > remaining:
            filtered["over_supporting_budget"] += 1
            continue
        kept.append(item)
        remaining -= cost
    return kept, remaining


def fill_sections(
    supporting: Mapping[str, Sequence[SupportingItem]],
    config: SupportingContextConfig,
    supporting_budget: int,
    counter: TokenCounter,
    filtered: dict[str, int],
) -> dict[str, tuple[SupportingItem, ...]]:
    """Fill sections in ``section_priority`` order within the budget and ``max_items``.

    Each item costs its content plus formatting overhead (a bullet, and the section
    header for the first item), reserved here so formatting cannot overflow the budget.
    Sections not listed in ``section_priority`` get no space (counted and warned).
    """
    remaining = supporting_budget
    selected: dict[str, tuple[SupportingItem, ...]] = {}
    for section in config.section_priority:
        cap = config.max_items.get(section)
        items = supporting.get(section, [])
        kept, remaining = _fill_section(items, cap, remaining, counter, filtered)
        selected[section] = tuple(kept)
    for section, items in supporting.items():
        if section not in config.section_priority:
            filtered["not_in_section_priority"] += len(items)
    return selected
