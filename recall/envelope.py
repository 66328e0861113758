"""Fingerprints of an assembled context (plain Python).

``digest`` identifies exactly what entered the context: the ordered (id, content hash) of the
entries and truncated refs. ``prefixFingerprint`` identifies the stable prompt prefix: the
pinned part and the effective policy and budget hashes, so an unchanged prefix can reuse a
provider's prompt cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from portal.canonical import sha256_hex


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
