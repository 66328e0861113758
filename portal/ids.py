"""Ids in paths: ASCII digits only (``int()`` alone takes "１" and " 1" as 1)."""

from __future__ import annotations

from typing import Any

BIGINT_DIGITS = 18  # every id up to 10^18 - 1 fits PostgreSQL's bigint
ID_MAX = 10**BIGINT_DIGITS - 1
# How the OpenAPI schema states an id in a path (``<id:...>``, settings'
# PATH_CONVERTER_OVERRIDES): what IdConverter matches.
ID_SCHEMA: dict[str, Any] = {"type": "integer", "format": "int64", "minimum": 1, "maximum": ID_MAX}


def numeric_id(raw: Any) -> int | None:
    """The id ``raw`` spells in ASCII digits, or None for anything else."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw if 0 < raw <= ID_MAX else None
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= BIGINT_DIGITS:
        return int(raw) or None
    return None


class IdConverter:
    """``<id:memory_id>``: a database id in a URL path, as an ``int``. Anything but 1 to
    ``ID_MAX`` in ASCII digits matches no route, so it is a 404 like an id that names nothing
    (never a query that overflows bigint)."""

    regex = "[0-9]+"

    def to_python(self, value: str) -> int:
        pk = numeric_id(value)
        if pk is None:
            raise ValueError(f"not an id: {value!r}")  # Django: this route does not match
        return pk

    def to_url(self, value: int | str) -> str:
        return str(value)
