"""The envelope a recall returns: its shape and its fingerprints (plain Python).

:class:`Envelope` is the response body of ``POST /v1/memory/actors/{actorId}/recall`` as
``recall.services`` builds it, key for key and in the order it is sent (the reference's
section 7 describes every field).

``digest`` identifies exactly what entered the context: the ordered (id, content hash) of the
entries and truncated refs. ``prefixFingerprint`` identifies the stable prompt prefix: the
pinned part and the effective policy and budget hashes, so an unchanged prefix can reuse a
provider's prompt cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import NotRequired, TypedDict

from portal.canonical import sha256_hex

# ``diagnostics.warnings`` holds the budget planner's sentences (``recall.planner``) and this
# code: the workspace has no actor of the id recalled (no memory was ever written for it), so
# the envelope is empty. A new user's first recall says so rather than failing.
ACTOR_UNKNOWN = "actor_unknown"


class Entry(TypedDict):
    """An included memory, in rank order."""

    id: str
    segmentKind: str
    memoryType: str
    sourceKind: str
    confirmationStatus: str
    confidence: float
    sensitivity: str
    content: str
    tokens: int
    similarity: float
    score: float
    createdAt: str


class TruncatedRef(TypedDict):
    """A memory that did not fit whole: its id and metadata only."""

    id: str
    segmentKind: str
    memoryType: str
    tokens: int


class KindBudget(TypedDict):
    reserved: int
    ceiling: int | None  # None: no cap
    demand: int
    allocated: int
    used: int


class Budget(TypedDict):
    totalTokenBudget: int
    perKind: dict[str, KindBudget]  # every segment kind, in ``SEGMENT_KINDS`` order
    usedTokens: int
    pressure: bool
    pinnedOverflow: bool


class Counts(TypedDict):
    """The recall funnel."""

    candidates: int
    afterPolicy: int
    afterRanking: int
    afterBudgetAllocation: int


# The funnel's steps in the order rows pass through them: the one order every page, event
# page and export that shows the counts follows.
FUNNEL: tuple[str, ...] = tuple(Counts.__annotations__)


class ReportedDecision(TypedDict):
    """A ranked memory's decision (every key), or a memory that failed a policy axis (``id``
    and ``code`` only)."""

    id: str
    code: str
    segmentKind: NotRequired[str]
    tokens: NotRequired[int]
    similarity: NotRequired[float]
    score: NotRequired[float]


class Diagnostics(TypedDict):
    verbosity: str
    counts: Counts
    # From verbosity ``summary`` up; left out at ``none``.
    reasons: NotRequired[dict[str, int]]
    accessPath: NotRequired[str]
    warnings: NotRequired[list[str]]
    decisions: list[ReportedDecision]  # filled at ``full`` only


class TokenCounts(TypedDict):
    entries: int  # tokens of the entries
    truncatedRefs: int  # how many
    used: int
    budget: int
    query: int  # estimated tokens of the query
    perKind: dict[str, int]  # used per kind


class Envelope(TypedDict):
    envelopeId: str
    entries: list[Entry]
    truncatedRefs: list[TruncatedRef]
    budget: Budget
    diagnostics: Diagnostics
    effectivePolicyHash: str
    effectiveBudgetHash: str
    prefixFingerprint: str
    digest: str
    tokenCounts: TokenCounts
    reused: bool
    generatedAt: str  # ISO 8601


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def context_digest(items: Iterable[tuple[str, str]]) -> str:
    """``items``: (id, content hash) of entries then truncated refs, in envelope order."""
    return sha256_hex([[item_id, digest] for item_id, digest in items])


def prefix_fingerprint(
    pinned_items: Iterable[tuple[str, str]], policy_hash: str, budget_hash: str
) -> str:
    return sha256_hex(
        {
            "pinned": [[item_id, digest] for item_id, digest in pinned_items],
            "effectivePolicyHash": policy_hash,
            "effectiveBudgetHash": budget_hash,
        }
    )


def query_hash(envelope_id: str, query: str) -> str:
    """What an assembled event keeps of its query by default: SHA-256 of the envelope id and
    the query text. Salted by the envelope id, so equal queries of two recalls differ and no
    table of common queries answers them all; a replay checks a pasted query against it."""
    return hashlib.sha256(f"{envelope_id}\n{query}".encode()).hexdigest()
