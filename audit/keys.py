"""The secrets the audit chain is keyed with, read from the environment, never the database.

``AUDIT_HMAC_KEYS`` lists them as ``id:secret`` pairs separated by commas; new events are
keyed with ``AUDIT_HMAC_KEY_ID`` (by default the last listed). Rotating: add a new pair,
point the id at it, and keep the old pair for as long as its events are verified.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from django.core.exceptions import ImproperlyConfigured

from audit.chain import ChainKey

_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
MIN_SECRET_LENGTH = 32
DEVELOPMENT_KEY_ID = "dev"


def parse_chain_keys(raw: str, *, production: bool, fallback_secret: str) -> dict[str, ChainKey]:
    """``id:secret,id:secret`` to keys by id; outside production an empty value gives one
    development key derived from ``fallback_secret`` (the Django secret key)."""
    if not raw.strip():
        if production:
            raise ImproperlyConfigured(
                "AUDIT_HMAC_KEYS must be set in production: id:secret pairs (docs/deploy.md)."
            )
        secret = hmac.new(fallback_secret.encode(), b"audit-chain", hashlib.sha256).hexdigest()
        return {DEVELOPMENT_KEY_ID: ChainKey(DEVELOPMENT_KEY_ID, secret.encode())}
    keys: dict[str, ChainKey] = {}
    for number, pair in enumerate(raw.split(","), start=1):
        key_id, colon, secret = pair.strip().partition(":")
        if not colon or not _KEY_ID.match(key_id):
            raise ImproperlyConfigured(
                f"AUDIT_HMAC_KEYS: entry {number} must be id:secret with an id of 1-32 letters,"
                " digits, '.', '_' or '-'."
            )
        if key_id in keys:
            raise ImproperlyConfigured(f"AUDIT_HMAC_KEYS: the key id {key_id!r} appears twice.")
        if len(secret) < MIN_SECRET_LENGTH:
            raise ImproperlyConfigured(
                f"AUDIT_HMAC_KEYS: the secret of {key_id!r} must be at least"
                f" {MIN_SECRET_LENGTH} characters."
            )
        keys[key_id] = ChainKey(key_id, secret.encode())
    return keys


def current_key_id(keys: dict[str, ChainKey], chosen: str) -> str:
    if not chosen:
        return list(keys)[-1]
    if chosen not in keys:
        raise ImproperlyConfigured(
            f"AUDIT_HMAC_KEY_ID={chosen!r} names no key of AUDIT_HMAC_KEYS"
            f" (it has {', '.join(sorted(keys))})."
        )
    return chosen


def chain_keys() -> dict[str, ChainKey]:
    """Every key the chain may be verified with, by id."""
    from django.conf import settings

    return settings.AUDIT_HMAC_KEYS


def signing_key() -> ChainKey:
    """The key new events and anchors are keyed with."""
    from django.conf import settings

    return settings.AUDIT_HMAC_KEYS[settings.AUDIT_HMAC_KEY_ID]
