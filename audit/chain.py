"""The audit hash chain, in plain Python.

Each event's hash covers its own fields and its predecessor's hash, so editing, deleting or
reordering any row breaks every later link. Numbers are normalised before hashing because
PostgreSQL's jsonb may hand back an integral float (``1e20``) as an integer.

The hash is keyed: an HMAC-SHA256 under a secret that lives outside the database, named by
the event's key id (also covered), so someone who can rewrite the table cannot recompute the
hashes. An unkeyed event (key id "", a plain SHA-256) is never accepted: the chains recorded
before keys were sealed with the key when it came (migration ``audit.0014``). Anchors
(``audit.anchors``) catch a rewrite made with the key itself: the chain must still pass
through every signed checkpoint taken of its head.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from portal.canonical import canonical_json

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


@dataclass(frozen=True)
class ChainKey:
    """A secret the chain is keyed with, and the id events name it by."""

    id: str
    secret: bytes = field(repr=False)


def event_hash(prev_hash: str, fields: Mapping[str, Any], key: ChainKey | None = None) -> str:
    """The event's hash: an HMAC under ``key`` (whose id it covers), or a plain SHA-256 for
    the events recorded before the chain was keyed."""
    normalised = {"prevHash": prev_hash, **_normalise(dict(fields))}
    if key is not None:
        normalised["keyId"] = key.id
    try:
        # What canonical_json produces for plain data, without its second walk of the tree.
        body = json.dumps(
            normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except TypeError:  # a set, which canonical_json writes as a sorted list
        body = canonical_json(normalised)
    if key is not None:
        return hmac.new(key.secret, body.encode(), hashlib.sha256).hexdigest()
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class ChainLink:
    id: int
    prev_hash: str
    hash: str
    fields: Mapping[str, Any]
    key_id: str = ""  # "" for an event recorded before the chain was keyed


@dataclass(frozen=True)
class AnchorPoint:
    """What a signed checkpoint saw at one position of the chain (1 is the first event)."""

    event_id: int
    hash: str
    at: str  # when the anchor was taken, as written in it


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
    keys: Mapping[str, ChainKey] | None = None,
    anchored: Mapping[int, AnchorPoint] | None = None,
    after_hash: str = GENESIS_HASH,
    after_count: int = 0,
    after_id: int | None = None,
) -> ChainVerdict:
    """Walk links in append order; stop at the first that does not hold.

    ``keys`` are the secrets by id that keyed events name; ``anchored`` what signed
    checkpoints saw at positions of the chain: the link at each such position must be that
    very event. By default from the start of the chain; ``after_*`` resumes after an event
    already found to hold (its hash, its position, its id), for a walk of only the events
    appended since.
    """
    keys = keys or {}
    anchored = anchored or {}
    expected_prev, checked, last_id = after_hash, after_count, after_id
    for link in links:
        checked += 1
        if link.prev_hash != expected_prev:
            return ChainVerdict(
                False, checked, link.id, "prevHash does not match the previous event"
            )
        if not link.key_id:
            return ChainVerdict(False, checked, link.id, "the event's hash is not keyed")
        key = keys.get(link.key_id)
        if key is None:
            return ChainVerdict(
                False,
                checked,
                link.id,
                f"the event is keyed with {link.key_id!r}, a key this server does not hold",
            )
        if event_hash(link.prev_hash, link.fields, key) != link.hash:
            return ChainVerdict(False, checked, link.id, "hash does not match the event's content")
        point = anchored.get(checked)
        if point is not None and (point.event_id, point.hash) != (link.id, link.hash):
            return ChainVerdict(
                False,
                checked,
                link.id,
                f"the chain differs from the anchor taken at {point.at}: event {point.event_id}"
                f" with hash {point.hash[:12]}... was at this position",
            )
        expected_prev, last_id = link.hash, link.id
    return ChainVerdict(True, checked, None, last_id=last_id, last_hash=expected_prev)
