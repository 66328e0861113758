"""The summarizers compaction may name (``COMPACTION_SERVICES``), parsed and checked.

Plain Python, no Django import. ``ChatConfig.ready`` checks the setting with it, so a
malformed entry stops the start-up with a message naming it.

``COMPACTION_SERVICES`` is a JSON object, service name → entry. An entry has a ``kind``:

* ``extractive`` (built in, offline, deterministic; not a language model): optional
  ``max_tokens`` (the summary's estimated tokens at most, default 300);
* ``openai`` (any OpenAI-compatible ``/chat/completions`` endpoint): ``base_url`` (up to the
  version, e.g. ``https://api.openai.com/v1``), ``model``, ``api_key_env`` (the name of the
  environment variable holding its key, never the key itself), optional ``timeout_seconds``
  (default 30) and ``max_tokens`` (default 300).

The service ``compaction`` (the default ``llm_service``) is the extractive one unless the
variable names an entry of that name (the settings put it first).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

KINDS: tuple[str, ...] = ("extractive", "openai")
DEFAULT_SERVICE = "compaction"
DEFAULT_MAX_TOKENS = 300
DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_TOKENS_LIMIT = 8000
TIMEOUT_LIMIT_SECONDS = 600.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KEYS: dict[str, tuple[str, ...]] = {
    "extractive": ("kind", "max_tokens"),
    "openai": ("kind", "base_url", "model", "api_key_env", "timeout_seconds", "max_tokens"),
}


@dataclass(frozen=True)
class ServiceConfig:
    """One summarizer compaction may name."""

    name: str
    kind: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    @property
    def label(self) -> str:
        """What the pages call it: honest about what it is."""
        if self.kind == "extractive":
            return "extractive (built in: selects sentences; not a language model)"
        host = urlsplit(self.base_url).netloc or self.base_url
        return f"{self.model} at {host} (OpenAI-compatible language model)"


class ServiceConfigError(ValueError):
    """A malformed ``COMPACTION_SERVICES``; the message names the entry and the key."""


def parse_services(data: Any) -> dict[str, ServiceConfig]:
    """The services of a parsed ``COMPACTION_SERVICES`` (None: none)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ServiceConfigError("must be a JSON object of service name → entry")
    services: dict[str, ServiceConfig] = {}
    for name, entry in data.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ServiceConfigError(
                f"service name {name!r} must be 1-100 letters, digits, '_', '.' or '-'"
            )
        services[name] = _entry(name, entry)
    return services


def _entry(name: str, entry: Any) -> ServiceConfig:
    where = f"service {name!r}"
    if not isinstance(entry, Mapping):
        raise ServiceConfigError(f"{where} must be an object with a kind")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ServiceConfigError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    unknown = sorted(set(entry) - set(_KEYS[kind]))
    if unknown:
        raise ServiceConfigError(
            f"{where}: unknown key {unknown[0]!r}; a {kind} service has {', '.join(_KEYS[kind])}"
        )
    max_tokens = entry.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not _whole(max_tokens) or not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise ServiceConfigError(
            f"{where}: max_tokens must be a whole number from 1 to {MAX_TOKENS_LIMIT}"
        )
    if kind == "extractive":
        return ServiceConfig(name=name, kind=kind, max_tokens=max_tokens)
    base_url = entry.get("base_url")
    parts = urlsplit(base_url) if isinstance(base_url, str) else None
    if parts is None or not isinstance(base_url, str):
        raise ServiceConfigError(f"{where}: base_url must be an http(s) URL, got {base_url!r}")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ServiceConfigError(f"{where}: base_url must be an http(s) URL, got {base_url!r}")
    model = entry.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ServiceConfigError(f"{where}: model must name the model")
    key_env = entry.get("api_key_env")
    if not isinstance(key_env, str) or not _ENV_NAME.match(key_env):
        raise ServiceConfigError(
            f"{where}: api_key_env must be the name of the environment variable holding the"
            " key (letters, digits and '_'), not the key"
        )
    timeout = entry.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if not _number(timeout) or not 0 < timeout <= TIMEOUT_LIMIT_SECONDS:
        raise ServiceConfigError(
            f"{where}: timeout_seconds must be a number above 0, at most {TIMEOUT_LIMIT_SECONDS:g}"
        )
    return ServiceConfig(
        name=name,
        kind=kind,
        max_tokens=max_tokens,
        base_url=base_url.rstrip("/"),
        model=model,
        api_key_env=key_env,
        timeout_seconds=float(timeout),
    )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
