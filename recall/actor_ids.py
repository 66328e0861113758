"""Actor ids (plain Python): ``kind:name``, normalised so that ids which look alike are one id
or refused.

The name is put in Unicode NFC form; then refused if it holds control, format (zero-width,
bidirectional controls) or whitespace characters, or if its letters mix scripts in a way
UTS #39's "highly restrictive" level does not allow: one script, or Latin with Han and
Hiragana/Katakana (Japanese), with Han and Bopomofo (Chinese) or with Han and Hangul
(Korean). Digits and punctuation count as no script; compatibility forms (full-width
letters, ligatures) are refused. So ``user:ada`` and ``user:ada`` in NFD
are one actor, while ``user:аda`` (a Cyrillic ``а``), ``user:ada\u200b`` and ``user:ada `` are
refused rather than silently becoming other actors.
"""

from __future__ import annotations

import unicodedata

ACTOR_KINDS = ("user", "agent", "team", "org", "service")
NAME_MAX = 200

_ALLOWED_SCRIPT_SETS: tuple[frozenset[str], ...] = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
# unicodedata names a character's script as the first word of its name, mostly; these
# first words are the same script under another name.
_SCRIPT_ALIASES = {"CJK": "HAN", "KANGXI": "HAN", "IDEOGRAPHIC": "HAN"}


class ActorIdError(ValueError):
    """An actor id that is malformed or could be mistaken for another."""


def normalize_actor_id(actor_id: str) -> str:
    """The canonical ``kind:name`` of ``actor_id``, or ``ActorIdError`` saying why not."""
    kind, name = split_actor_id(actor_id)
    return f"{kind}:{name}"


def split_actor_id(actor_id: str) -> tuple[str, str]:
    if not isinstance(actor_id, str):
        raise ActorIdError("An actor id is a string kind:name.")
    kind, sep, name = actor_id.partition(":")
    if not sep or kind not in ACTOR_KINDS or not name:
        raise ActorIdError(
            f"Use kind:name with a kind among {', '.join(ACTOR_KINDS)} (for example user:ada)."
        )
    name = unicodedata.normalize("NFC", name)
    if len(name) > NAME_MAX:
        raise ActorIdError(f"Keep the name to {NAME_MAX} characters.")
    for char in name:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Co", "Cn"):
            raise ActorIdError(
                f"The name holds a control or unassigned character (U+{ord(char):04X})."
            )
        if category == "Cf":
            raise ActorIdError(
                f"The name holds an invisible or text-direction character (U+{ord(char):04X})."
            )
        if category.startswith("Z") or char.isspace():
            raise ActorIdError("The name holds a space; actor names have none.")
        if unicodedata.normalize("NFKC", char) != char:
            raise ActorIdError(
                f"The name holds a compatibility form of a character (U+{ord(char):04X}, e.g. a "
                "full-width letter or a ligature); write it plainly."
            )
    scripts = _scripts(name)
    if len(scripts) > 1 and not any(scripts <= allowed for allowed in _ALLOWED_SCRIPT_SETS):
        raise ActorIdError(
            "The name mixes scripts (" + ", ".join(sorted(s.title() for s in scripts)) + "), "
            "so it could be mistaken for another name."
        )
    return kind, name


def _scripts(name: str) -> set[str]:
    found = set()
    for char in name:
        if not unicodedata.category(char).startswith(("L", "M")):
            continue  # digits, punctuation, symbols: no script of their own
        if unicodedata.category(char).startswith("M"):
            continue  # combining marks take their base letter's script
        first = unicodedata.name(char, "UNKNOWN").split()[0]
        found.add(_SCRIPT_ALIASES.get(first, first))
    return found
