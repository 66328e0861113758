"""Ids in paths: ASCII digits only (``int()`` alone takes "１" and " 1" as 1)."""

from __future__ import annotations

from typing import Any

BIGINT_DIGITS = 18  # every id up to 10^18 - 1 fits PostgreSQL's bigint


def numeric_id(raw: Any) -> int | None:
    """The id ``raw`` spells in ASCII digits, or None for anything else."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw if raw > 0 else None
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= BIGINT_DIGITS:
        return int(raw) or None
    return None
