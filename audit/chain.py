"""The audit hash chain, in plain Python.

Each event's hash covers its own fields and its predecessor's hash, so editing, deleting or
reordering any row breaks every later link. Numbers are normalised before hashing because
PostgreSQL's jsonb may hand back an integral float (``1e20``) as an integer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.algebra import canonical_json

GENESIS_HASH = "0" * 64


def _normalise(value: Any) -> Any:
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
    body = canonical_json({"prevHash": prev_hash, **_normalise(dict(fields))})
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
    checked: int
    first_broken_id: int | None
    reason: str = ""


def verify_links(links: Iterable[ChainLink]) -> ChainVerdict:
    """Walk links in append order; stop at the first that does not hold."""
    expected_prev = GENESIS_HASH
    checked = 0
    for link in links:
        checked += 1
        if link.prev_hash != expected_prev:
            return ChainVerdict(
                False, checked, link.id, "prevHash does not match the previous event"
            )
        if event_hash(link.prev_hash, link.fields) != link.hash:
            return ChainVerdict(False, checked, link.id, "hash does not match the event's content")
        expected_prev = link.hash
    return ChainVerdict(True, checked, None)
