"""Compaction of a session, in plain Python: which turns a run summarises, what the layout's
estimate becomes when summaries replace them, and the built-in extractive summarizer.

Plain Python, no Django import. For one run over a session's current turns (the turns no
earlier run summarised), oldest first, phase by phase (``maintenance.compaction`` runs them
around the summarizer and the database):

1. **Candidates** (``candidates``): the current turns older than the last
   ``compaction_recency_window`` ones, which stay as they were.
2. **Chunks** (``chunks``): the candidates cut, oldest first, into consecutive chunks of
   ``max_turns_per_summary`` turns; a chunk shorter than ``min_turns_to_summarize`` (the
   last one) is not summarised.
3. **Estimate** (``Estimate``): it starts from the latest assembled turn's estimate *before
   pruning* over its dynamic budget (an upper bound: pruning only removes). A summarised turn
   that layout was given (the last ``max_history_turns`` current turns before its user
   message, or that message itself) leaves it with its message framing; each summary enters
   the ``summaries`` section with its item framing (and the section's header, if the section
   was empty).
4. **Stop** (``next_step``): before each chunk, the run stops once the estimate is at or below
   ``target_utilization`` (the target is met), or when the time budget is spent (it is
   exhausted); after the last chunk, the target is met or missed.
5. **Extractive summary** (``extractive_summary``): no language model. Each turn gives its
   most informative sentence (the most distinct words of three letters or more, the first on
   a tie), cut to ``EXTRACT_WORDS`` words, after its role; the lines follow a heading naming
   the turns, and the whole is cut to the service's ``max_tokens``. The same turns always
   give the same summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from recall.layout.estimate import (
    ITEM_OVERHEAD_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    SECTION_HEADER_TOKENS,
)

# The words a sentence keeps in an extractive summary.
EXTRACT_WORDS = 24
ELLIPSIS = "…"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]{3,}")


@dataclass(frozen=True)
class TurnText:
    """A current turn of the session, as a run reads it."""

    index: int
    role: str
    content: str
    tokens: int


# --- 1 and 2. candidates and chunks -------------------------------------------------------------


def candidates(turns: Sequence[TurnText], recency_window: int) -> list[TurnText]:
    """The current turns (oldest first) before the last ``recency_window``."""
    ordered = sorted(turns, key=lambda turn: turn.index)
    return ordered[: max(0, len(ordered) - recency_window)]


def chunks(turns: Sequence[TurnText], *, min_turns: int, max_turns: int) -> list[list[TurnText]]:
    """``turns`` cut into consecutive chunks of ``max_turns`` (at least one per chunk), the
    last dropped when shorter than ``min_turns``."""
    size = max(1, max_turns)
    cut = [list(turns[start : start + size]) for start in range(0, len(turns), size)]
    return [chunk for chunk in cut if len(chunk) >= max(1, min_turns)]


# --- 3. the estimate ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """The latest assembled turn's estimate as summaries replace turns.

    ``given`` are the indexes of the turns that layout was given (its history window and its
    user message); ``summaries_empty`` whether its ``summaries`` section held nothing.
    """

    tokens: int
    available_budget: int
    given: frozenset[int]
    summaries_empty: bool = True

    @property
    def utilization_pct(self) -> float | None:
        """``100 × tokens / available_budget``; None for a zero budget (no share of it)."""
        if self.available_budget <= 0:
            return None
        return 100.0 * self.tokens / self.available_budget

    def meets(self, target_utilization: float) -> bool:
        """At or below the target (a ratio, as ``target_utilization`` is written)."""
        pct = self.utilization_pct
        return pct is not None and pct <= target_utilization * 100.0

    def replaced(self, chunk: Sequence[TurnText], summary_tokens: int) -> Estimate:
        """The estimate once ``chunk`` is replaced by a summary of ``summary_tokens``."""
        leaving = sum(t.tokens + MESSAGE_OVERHEAD_TOKENS for t in chunk if t.index in self.given)
        entering = summary_tokens + ITEM_OVERHEAD_TOKENS
        if self.summaries_empty:
            entering += SECTION_HEADER_TOKENS
        return Estimate(
            tokens=max(0, self.tokens - leaving + entering),
            available_budget=self.available_budget,
            given=self.given - {t.index for t in chunk},
            summaries_empty=False,
        )


def given_turns(current: Iterable[int], *, query: int, max_history_turns: int) -> frozenset[int]:
    """The turns a layout of user turn ``query`` was given: its last ``max_history_turns``
    current turns before it, and itself."""
    before = sorted(index for index in current if index < query)
    window = before[max(0, len(before) - max_history_turns) :] if max_history_turns else []
    return frozenset([*window, query])


# --- 4. when to stop ----------------------------------------------------------------------------

TARGET_MET = "target_met"
TIME_BUDGET_EXHAUSTED = "time_budget_exhausted"
SUMMARISE = "summarise"


def next_step(estimate: Estimate, target_utilization: float, remaining_ms: float) -> str:
    """Before a chunk: stop at the target, stop when the time budget is spent, or go on."""
    if estimate.meets(target_utilization):
        return TARGET_MET
    if remaining_ms <= 0:
        return TIME_BUDGET_EXHAUSTED
    return SUMMARISE


# --- 5. the extractive summary ------------------------------------------------------------------


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def informative_sentence(text: str) -> str:
    """The sentence of ``text`` with the most distinct words of three letters or more (the
    first on a tie), cut to ``EXTRACT_WORDS`` words."""
    best, best_score = "", -1
    for sentence in sentences(text):
        score = len({word.lower() for word in _WORD.findall(sentence)})
        if score > best_score:
            best, best_score = sentence, score
    words = best.split()
    if len(words) > EXTRACT_WORDS:
        return " ".join(words[:EXTRACT_WORDS]) + ELLIPSIS
    return best


def summary_heading(chunk: Sequence[TurnText]) -> str:
    first, last = chunk[0].index, chunk[-1].index
    return f"Earlier in this conversation (turns {first}-{last}):"


def extractive_summary(
    chunk: Sequence[TurnText], *, max_tokens: int, estimator: Callable[[str], int]
) -> str:
    """The chunk's extractive summary (the module's phase 5), at most ``max_tokens`` by
    ``estimator`` (the heading always stays)."""
    text = summary_heading(chunk)
    for turn in chunk:
        sentence = informative_sentence(turn.content)
        if not sentence:
            continue
        line = f" {turn.role}: {sentence}"
        if estimator(text + line) > max_tokens:
            return _cut(text, line, max_tokens, estimator)
        text += line
    return text


def _cut(text: str, line: str, max_tokens: int, estimator: Callable[[str], int]) -> str:
    """``text`` with as many words of ``line`` as fit ``max_tokens``, marked as cut."""
    words = line.split()
    for keep in range(len(words) - 1, 1, -1):
        candidate = f"{text} {' '.join(words[:keep])}{ELLIPSIS}"
        if estimator(candidate) <= max_tokens:
            return candidate
    return text
