"""Token estimates of a laid-out prompt: its content and its formatting overhead.

Plain Python, no Django import.

Token figures are *estimates* (``estimate_tokens``), not provider tokenization: leave
headroom and inspect the formatted prompt. The formatter wraps each message in role markers,
gives each non-empty section a header line and each item a bullet/newline; those are
reserved here on top of the content (``MESSAGE_OVERHEAD_TOKENS`` per message, the query
included, ``SECTION_HEADER_TOKENS`` per non-empty section, prior-session turns counting as
one, and ``ITEM_OVERHEAD_TOKENS`` per item), so the content estimate alone cannot overfill
the window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from recall.layout.request import SupportingItem, Turn
from recall.tokens import estimate_tokens as _project_estimate_tokens

MESSAGE_OVERHEAD_TOKENS = 4
SECTION_HEADER_TOKENS = 6
ITEM_OVERHEAD_TOKENS = 2

TokenEstimator = Callable[[str], int]

# The default estimator is the project's shared heuristic (recall.tokens): about
# ceil(len(text) / 4), never below a third of the words, 0 for empty text. The
# per-message overhead above is added on top of it.
estimate_tokens: TokenEstimator = _project_estimate_tokens


@dataclass(frozen=True)
class Payload:
    """What would be sent: the thing the cascade prunes."""

    history: tuple[Turn, ...]
    prior: tuple[Turn, ...]
    supporting: Mapping[str, tuple[SupportingItem, ...]]


@dataclass(frozen=True)
class TokenBreakdown:
    """Estimated tokens per part; ``formatting`` is all framing (messages, headers, bullets)."""

    history: int
    prior_history: int
    supporting: int
    query: int
    formatting: int

    @property
    def total(self) -> int:
        return self.history + self.prior_history + self.supporting + self.query + self.formatting


class TokenCounter:
    """Wraps the estimator with a cache: the cascade re-estimates the same texts often."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self._estimator = estimator
        self._cache: dict[str, int] = {}

    def text(self, value: str) -> int:
        if value not in self._cache:
            tokens = self._estimator(value)
            if not isinstance(tokens, int) or tokens < 0:
                raise ValueError(f"token estimator returned {tokens!r}; expected an int >= 0")
            self._cache[value] = tokens
        return self._cache[value]

    def turns(self, turns: Iterable[Turn]) -> int:
        return sum(self.text(t.content) for t in turns)

    def items(self, items: Iterable[SupportingItem]) -> int:
        return sum(self.text(i.content) for i in items)


def item_cost(counter: TokenCounter, item: SupportingItem, opens_section: bool) -> int:
    """An item's content, its bullet and, for a section's first item, the section header."""
    header = SECTION_HEADER_TOKENS if opens_section else 0
    return counter.text(item.content) + ITEM_OVERHEAD_TOKENS + header


def formatting_overhead(payload: Payload, query: str) -> int:
    messages = len(payload.history) + len(payload.prior) + (1 if query else 0)
    sections = sum(1 for items in payload.supporting.values() if items)
    if payload.prior:
        sections += 1  # earlier-session turns get their own header
    items = sum(len(items) for items in payload.supporting.values())
    return (
        messages * MESSAGE_OVERHEAD_TOKENS
        + sections * SECTION_HEADER_TOKENS
        + items * ITEM_OVERHEAD_TOKENS
    )


def estimate_payload(payload: Payload, query: str, counter: TokenCounter) -> TokenBreakdown:
    return TokenBreakdown(
        history=counter.turns(payload.history),
        prior_history=counter.turns(payload.prior),
        supporting=sum(counter.items(items) for items in payload.supporting.values()),
        query=counter.text(query) if query else 0,
        formatting=formatting_overhead(payload, query),
    )
