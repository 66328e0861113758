"""The audit hash chain, in plain Python.

Each event's hash covers its own fields and its predecessor's hash, so editing, deleting or
reordering any row breaks every later link. Numbers are normalised before hashing because
PostgreSQL's jsonb may hand back an integral float (``1e20``) as an integer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.algebra import canonical_json

GENESIS_HASH = "0" * 64


def _normalise(value: Any) -> Any:
    # Exact-type fast paths first (verification walks every event of a chain); the
    # isinstance checks below give the same result for every other type.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {str(k): _normalise(v) for k, v in value.items()}
    if kind is list:
        return [_normalise(v) for v in value]
    if kind is float:
        return int(value) if value.is_integer() else value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


def event_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    normalised = {"prevHash": prev_hash, **_normalise(dict(fields))}
    try:
        # What canonical_json produces for plain data, without its second walk of the tree.
        body = json.dumps(
            normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except TypeError:  # a set, which canonical_json writes as a sorted list
        body = canonical_json(normalised)
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class ChainLink:
    id: int
    prev_hash: str
    hash: str
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class ChainVerdict:
    ok: bool
    checked: int  # events of the chain covered, counting those before ``start``
    first_broken_id: int | None
    reason: str = ""
    last_id: int | None = None  # the last event that held, and its hash
    last_hash: str = GENESIS_HASH


def verify_links(
    links: Iterable[ChainLink],
    *,
    after_hash: str = GENESIS_HASH,
    after_count: int = 0,
    after_id: int | None = None,
) -> ChainVerdict:
    """Walk links in append order; stop at the first that does not hold.

    By default from the start of the chain; ``after_*`` resumes after an event already found
    to hold (its hash, its position, its id), for a walk of only the events appended since.
    """
    expected_prev, checked, last_id = after_hash, after_count, after_id
    for link in links:
        checked += 1
        if link.prev_hash != expected_prev:
            return ChainVerdict(
                False, checked, link.id, "prevHash does not match the previous event"
            )
        if event_hash(link.prev_hash, link.fields) != link.hash:
            return ChainVerdict(False, checked, link.id, "hash does not match the event's content")
        expected_prev, last_id = link.hash, link.id
    return ChainVerdict(True, checked, None, last_id=last_id, last_hash=expected_prev)
