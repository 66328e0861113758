"""Anchors: signed checkpoints of every audit chain's head, kept outside the database.

The chain's HMAC stops someone who can write to the database but does not hold the key. An
anchor stops the rest: a line written to ``AUDIT_ANCHOR_FILE`` (by ``manage.py audit_anchor``
and by beat) saying "workspace W's chain had N events, the last one E with hash H", signed
with the chain's key. The operator ships the file where the database's administrators cannot
write (another host, a write-once store); verification then demands that the chain still
passes through every anchor. A chain rewritten even with the key no longer does.

One JSON object per line and lane of a workspace's chain (``audit.chain``), its keys sorted;
a lane other than the main chain's (0) is named by ``lane``, which the signature covers::

    {"at": "...", "eventId": 41, "hash": "...", "keyId": "k1", "length": 41,
     "signature": "...", "v": 1, "workspace": "acme", "workspaceId": 1}
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from audit.chain import AnchorPoint, ChainKey
from audit.keys import chain_keys, signing_key
from audit.models import AuditChainHead, AuditEvent

VERSION = 1


@dataclass(frozen=True)
class Anchor:
    workspace_id: int
    workspace: str  # the slug, for people reading the file
    length: int
    event_id: int
    hash: str
    at: str
    key_id: str
    lane: int = 0

    def body(self) -> dict[str, Any]:
        return {
            "v": VERSION,
            "workspaceId": self.workspace_id,
            "workspace": self.workspace,
            **({"lane": self.lane} if self.lane else {}),
            "length": self.length,
            "eventId": self.event_id,
            "hash": self.hash,
            "at": self.at,
            "keyId": self.key_id,
        }


def _signature(body: dict[str, Any], key: ChainKey) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key.secret, text.encode(), hashlib.sha256).hexdigest()


def anchor_line(anchor: Anchor, key: ChainKey) -> str:
    body = anchor.body()
    return json.dumps({**body, "signature": _signature(body, key)}, sort_keys=True)


def anchors_take() -> list[Anchor]:
    """An anchor for every lane of a chain that has events, read from the chain heads."""
    last_event = AuditEvent.objects.filter(
        workspace_id=OuterRef("workspace_id"), hash=OuterRef("last_hash")
    ).values("id")[:1]
    heads = (
        AuditChainHead.objects.filter(length__gt=0)
        .annotate(event_id=Subquery(last_event))
        .values_list("workspace_id", "workspace__slug", "length", "event_id", "last_hash", "lane")
        .order_by("workspace_id", "lane")
    )
    at = timezone.now().isoformat()
    key_id = signing_key().id
    return [
        Anchor(workspace_id, slug, length, event_id, last_hash, at, key_id, lane)
        for workspace_id, slug, length, event_id, last_hash, lane in heads
        if event_id is not None  # a head naming no event: verification reports that chain
    ]


def anchors_append(path: str | Path, anchors: Iterable[Anchor]) -> int:
    """Append signed lines to ``path`` and make them durable; returns how many."""
    key = signing_key()
    lines = [anchor_line(anchor, key) + "\n" for anchor in anchors]
    with open(path, "a", encoding="utf-8") as out:
        out.writelines(lines)
        out.flush()
        os.fsync(out.fileno())
    return len(lines)


def audit_anchor_record(path: str | Path | None = None) -> list[Anchor]:
    """Take an anchor of every chain and append it to ``path`` (``AUDIT_ANCHOR_FILE``)."""
    target = path or settings.AUDIT_ANCHOR_FILE
    if not target:
        raise ValueError("No anchor file: set AUDIT_ANCHOR_FILE or name one.")
    anchors = anchors_take()
    anchors_append(target, anchors)
    return anchors


@dataclass
class AnchorFile:
    """The anchors read from a file, by workspace and (lane, position), and the lines that
    failed."""

    points: dict[int, dict[tuple[int, int], AnchorPoint]] = field(default_factory=dict)
    problems: dict[int | None, list[str]] = field(default_factory=dict)  # None: any workspace

    def positions(self, workspace_id: int) -> dict[tuple[int, int], AnchorPoint]:
        return self.points.get(workspace_id, {})

    def problems_for(self, workspace_id: int) -> list[str]:
        return self.problems.get(None, []) + self.problems.get(workspace_id, [])

    def _problem(self, workspace_id: int | None, text: str) -> None:
        self.problems.setdefault(workspace_id, []).append(text)


def anchors_parse(lines: Iterable[str], keys: dict[str, ChainKey] | None = None) -> AnchorFile:
    keys = chain_keys() if keys is None else keys
    parsed = AnchorFile()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            signature = record.pop("signature")
            workspace_id = int(record["workspaceId"])
            position = (int(record.get("lane", 0)), int(record["length"]))
            point = AnchorPoint(int(record["eventId"]), str(record["hash"]), str(record["at"]))
            key_id = str(record["keyId"])
        except (ValueError, KeyError, TypeError, AttributeError):
            parsed._problem(None, f"anchor line {number} is not an anchor")
            continue
        key = keys.get(key_id)
        if key is None:
            parsed._problem(
                workspace_id, f"anchor line {number} is signed with {key_id!r}, a key not held"
            )
            continue
        if record.get("v") != VERSION or not hmac.compare_digest(
            _signature(record, key), str(signature)
        ):
            parsed._problem(workspace_id, f"anchor line {number}: its signature does not verify")
            continue
        seen = parsed.points.setdefault(workspace_id, {})
        earlier = seen.get(position)
        if earlier is not None and (earlier.event_id, earlier.hash) != (
            point.event_id,
            point.hash,
        ):
            parsed._problem(
                workspace_id,
                f"anchor line {number} disagrees with an earlier anchor at position"
                f" {position[1]}{f' of lane {position[0]}' if position[0] else ''}",
            )
            continue
        seen.setdefault(position, point)
    return parsed


def anchor_file_read(path: str | Path | None = None) -> AnchorFile:
    """The anchors of ``path``, or of ``AUDIT_ANCHOR_FILE``: none when no file is set or
    written yet. A named file that cannot be read raises ``OSError``; the configured one that
    cannot be read (a folder, no permission) fails every check that reads it, saying why,
    rather than passing without its anchors. Bytes that are not UTF-8 make their line fail."""
    source = path or settings.AUDIT_ANCHOR_FILE
    if not source:
        return AnchorFile()
    try:
        with open(source, encoding="utf-8", errors="replace") as lines:
            return anchors_parse(lines)
    except FileNotFoundError:
        if path:
            raise
        return AnchorFile()
    except OSError as exc:
        if path:
            raise
        unreadable = AnchorFile()
        unreadable._problem(
            None, f"the anchor file AUDIT_ANCHOR_FILE cannot be read: {exc.strerror}"
        )
        return unreadable
