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

A workspace's trail is one or more such chains, its lanes: lane 0, the main chain, and the
lanes the recall hot path appends to (``AUDIT_RECALL_LANES``), so that concurrent recalls of
one workspace do not all race for one tip. Each lane is a chain of its own with its own head
and anchors, and a lane's events hash their lane too: an event moved to another lane, or
dropped from one, breaks that lane exactly as it would break the single chain. A walk reads
the lanes interleaved, in event id order (the order each lane was appended in).

A sealed event is one recorded while a query text was hashed with it, whose text has since
moved out of its payload (migration ``audit.0018``): its hash can no longer be computed from
its fields, so it stands as recorded (later events and anchors name it) and its seal, an
HMAC under the same key over that hash and the fields as they are now, is checked instead.
Someone without the key can no more change a sealed event than any other.
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


def event_seal(prev_hash: str, fields: Mapping[str, Any], recorded_hash: str, key: ChainKey) -> str:
    """The seal of an event whose hashed fields changed after it was recorded: its recorded
    hash and its fields (with their lane, ``lane_fields``) as they are now, under ``key``."""
    return event_hash(prev_hash, {**fields, "sealOf": recorded_hash}, key)


@dataclass(frozen=True)
class ChainLink:
    id: int
    prev_hash: str
    hash: str
    fields: Mapping[str, Any]
    key_id: str = ""  # "" for an event recorded before the chain was keyed
    lane: int = 0  # the workspace's chain the event is appended to (see ``lane_fields``)
    seal: str = ""  # a sealed event's seal (``event_seal``), "" for every other

    def holds(self, key: ChainKey) -> bool:
        """Whether the event's hash (or, sealed, its seal) matches its fields under ``key``."""
        fields = lane_fields(self.fields, self.lane)
        if self.seal:
            return hmac.compare_digest(
                event_seal(self.prev_hash, fields, self.hash, key), self.seal
            )
        return hmac.compare_digest(event_hash(self.prev_hash, fields, key), self.hash)


def lane_fields(fields: Mapping[str, Any], lane: int) -> Mapping[str, Any]:
    """The fields an event of ``lane`` is hashed over: its own, and its lane when that is not
    the main chain (lane 0), so an event cannot be moved from one lane to another while the
    events recorded before lanes existed keep their hashes."""
    return {**fields, "lane": lane} if lane else fields


@dataclass(frozen=True)
class AnchorPoint:
    """What a signed checkpoint saw at one position of a lane (1 is its first event)."""

    event_id: int
    hash: str
    at: str  # when the anchor was taken, as written in it


@dataclass(frozen=True)
class LaneTip:
    """Where a walk of one lane stands: its last event that held, its hash and how many of
    the lane's events it covered."""

    hash: str = GENESIS_HASH
    count: int = 0
    id: int | None = None


@dataclass(frozen=True)
class ChainVerdict:
    ok: bool
    checked: int  # events covered, in every lane, counting those before the walk resumed
    first_broken_id: int | None
    reason: str = ""
    last_id: int | None = None  # the last event that held (in any lane)
    tips: Mapping[int, LaneTip] = field(default_factory=dict)  # each lane's, where it held


def verify_links(
    links: Iterable[ChainLink],
    *,
    keys: Mapping[str, ChainKey] | None = None,
    anchored: Mapping[tuple[int, int], AnchorPoint] | None = None,
    after: Mapping[int, LaneTip] | None = None,
) -> ChainVerdict:
    """Walk links in append order (several lanes interleaved, each its own chain); stop at
    the first that does not hold.

    ``keys`` are the secrets by id that keyed events name; ``anchored`` what signed
    checkpoints saw at (lane, position): the link at each such position of that lane must be
    that very event. By default from the start of every lane; ``after`` resumes lanes after
    events already found to hold, for a walk of only the events appended since.
    """
    keys = keys or {}
    anchored = anchored or {}
    # Each lane's [hash, count, id] so far: lists, updated in place (a walk reads every event).
    lanes: dict[int, list[Any]] = {
        lane: [tip.hash, tip.count, tip.id] for lane, tip in (after or {}).items()
    }
    checked = sum(tip[1] for tip in lanes.values())
    last_id = max((tip[2] for tip in lanes.values() if tip[2] is not None), default=None)

    def broken(link: ChainLink, reason: str) -> ChainVerdict:
        return ChainVerdict(False, checked, link.id, reason, tips=_tips(lanes))

    for link in links:
        checked += 1
        tip = lanes.get(link.lane)
        if tip is None:
            tip = lanes[link.lane] = [GENESIS_HASH, 0, None]
        if link.prev_hash != tip[0]:
            return broken(link, "prevHash does not match the previous event")
        if not link.key_id:
            return broken(link, "the event's hash is not keyed")
        key = keys.get(link.key_id)
        if key is None:
            return broken(
                link, f"the event is keyed with {link.key_id!r}, a key this server does not hold"
            )
        if not link.holds(key):
            return broken(link, "hash does not match the event's content")
        point = anchored.get((link.lane, tip[1] + 1)) if anchored else None
        if point is not None and (point.event_id, point.hash) != (link.id, link.hash):
            return broken(
                link,
                f"the chain differs from the anchor taken at {point.at}: event {point.event_id}"
                f" with hash {point.hash[:12]}... was at this position",
            )
        tip[0], tip[1], tip[2] = link.hash, tip[1] + 1, link.id
        last_id = link.id
    return ChainVerdict(True, checked, None, last_id=last_id, tips=_tips(lanes))


def _tips(lanes: Mapping[int, list[Any]]) -> dict[int, LaneTip]:
    return {lane: LaneTip(digest, count, id_) for lane, (digest, count, id_) in lanes.items()}
