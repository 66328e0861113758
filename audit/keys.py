"""The secrets the audit chain is keyed with, read from the environment, never the database.

``AUDIT_HMAC_KEYS`` lists them as ``id:secret`` pairs separated by commas; new events are
keyed with ``AUDIT_HMAC_KEY_ID`` (by default the last listed); ``portal.env.env_keyring``
reads and checks them at start-up. Rotating: add a new pair,
point the id at it, and keep the old pair for as long as its events are verified.
"""

from __future__ import annotations

from django.conf import settings

from audit.chain import ChainKey


def chain_keys() -> dict[str, ChainKey]:
    """Every key the chain may be verified with, by id."""
    return {key_id: ChainKey(key_id, secret) for key_id, secret in settings.AUDIT_HMAC_KEYS.items()}


def signing_key() -> ChainKey:
    """The key new events and anchors are keyed with."""
    key_id = settings.AUDIT_HMAC_KEY_ID
    return ChainKey(key_id, settings.AUDIT_HMAC_KEYS[key_id])
