"""The layout's words: section names, passage terms, the bound on every count, and the answer
to an unknown name.

Plain Python, no Django import. The configuration parser and the API's serializers both
reject unknown names; ``suggested_name`` is the one place that decides which known name the
caller probably meant (an earlier guide's name first, then the closest spelling), so the two
can word their messages differently without deciding differently.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

KNOWN_SECTIONS: tuple[str, ...] = (
    "known_facts",
    "passages",
    "insights",
    "summaries",
    "tools",
    "state",
    "entities",
)
PASSAGE_TERMS: tuple[str, ...] = ("short", "long")

# Names from older guides that are easy to type by mistake; the error says what to use.
LEGACY_NAMES: dict[str, str] = {"key_facts": "known_facts"}

# Every count in a layout (tokens, items, turns, milliseconds) is at most this. No real
# context window comes near it; the bound keeps later float maths from overflowing.
MAX_COUNT = 10**9


@dataclass(frozen=True)
class NameSuggestion:
    """The known name meant by an unknown one; ``legacy`` when it replaces an earlier name."""

    name: str
    legacy: bool


def suggested_name(name: object, known: Iterable[str]) -> NameSuggestion | None:
    """The known name ``name`` probably stands for, or None.

    An earlier guide's name (``LEGACY_NAMES``) wins when its replacement is among ``known``;
    otherwise the closest spelling (``difflib``), if one is close enough. A name that is not
    a string (a YAML key may be a number) has no suggestion.
    """
    if not isinstance(name, str):
        return None
    known = list(known)
    replacement = LEGACY_NAMES.get(name)
    if replacement is not None and replacement in known:
        return NameSuggestion(replacement, legacy=True)
    close = difflib.get_close_matches(name, known, n=1)
    return NameSuggestion(close[0], legacy=False) if close else None
