"""Typed readers for environment variables.

Each helper fails at start-up with a message naming the variable, so a typo in a deployment
never turns into a silently wrong setting.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}.")


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_json(name: str, default: Any) -> Any:
    """A JSON value; unset or blank gives ``default``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be JSON: {exc}.") from None


_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
MIN_SECRET_LENGTH = 32
DEVELOPMENT_KEY_ID = "dev"


def env_keyring(
    name: str, id_name: str, *, production: bool, fallback_secret: str, purpose: bytes
) -> tuple[dict[str, bytes], str]:
    """Secrets by id from ``name`` (``id:secret,id:secret``) and the id chosen by ``id_name``
    (by default the last listed). Outside production an empty value gives one development
    secret derived from ``fallback_secret`` (the Django secret key) and ``purpose``.
    A message never repeats a secret."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        if production:
            raise ImproperlyConfigured(
                f"{name} must be set in production: id:secret pairs (docs/deploy.md)."
            )
        secret = hmac.new(fallback_secret.encode(), purpose, hashlib.sha256).hexdigest()
        return {DEVELOPMENT_KEY_ID: secret.encode()}, DEVELOPMENT_KEY_ID
    keys: dict[str, bytes] = {}
    for number, pair in enumerate(raw.split(","), start=1):
        key_id, colon, secret = pair.strip().partition(":")
        if not colon or not _KEY_ID.match(key_id):
            raise ImproperlyConfigured(
                f"{name}: entry {number} must be id:secret with an id of 1-32 letters,"
                " digits, '.', '_' or '-'."
            )
        if key_id in keys:
            raise ImproperlyConfigured(f"{name}: the key id {key_id!r} appears twice.")
        if len(secret) < MIN_SECRET_LENGTH:
            raise ImproperlyConfigured(
                f"{name}: the secret of {key_id!r} must be at least {MIN_SECRET_LENGTH} characters."
            )
        keys[key_id] = secret.encode()
    chosen = os.environ.get(id_name, "")
    if not chosen:
        return keys, list(keys)[-1]
    if chosen not in keys:
        raise ImproperlyConfigured(
            f"{id_name}={chosen!r} names no key of {name} (it has {', '.join(sorted(keys))})."
        )
    return keys, chosen
