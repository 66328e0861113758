"""Canonical JSON and its hash: one text for equal data, whoever writes it.

The ground floor's hashing, shared by the policy algebra (policy hashes, cache keys), the
envelope's digests and the audit chain (event hashes), so that all of them agree on what
"the same data" is. Plain Python: no Django, no app.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def _plain(obj: object) -> Any:
    # Exact-type fast paths first (hashing walks whole audit payloads); the isinstance
    # checks below give the same result for every other type.
    kind = type(obj)
    if kind is str or kind is int or kind is float or kind is bool or obj is None:
        return obj
    if kind is dict:
        return {str(k): _plain(v) for k, v in obj.items()}  # type: ignore[attr-defined]
    if kind is list:
        return [_plain(v) for v in obj]  # type: ignore[attr-defined]
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return sorted((_plain(v) for v in obj), key=canonical_json)
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def canonical_json(obj: object) -> str:
    """Deterministic JSON: sorted keys, no whitespace, Python sets as sorted lists.

    Lists keep their order (a policy's dropOrder is meaningful); sort a policy's set axes
    first (``policies.algebra.canonical_policy``).
    """
    return json.dumps(
        _plain(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(obj: object) -> str:
    """The SHA-256 of the canonical JSON's UTF-8 text, in hex."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()
