"""Optimistic concurrency for versioned documents (policies, layout configurations).

A read tells its version; a save may name the version it was based on (its *base*). The save
service re-reads the current version while holding a row lock and refuses a stale base, so
of two saves from the same base exactly one wins and the other is told, instead of silently
undoing the first. A save without a base is not checked (older clients keep working).

Version 0 stands for "nothing saved yet" (a workload with no policy for an environment, a
workload still on the layout defaults), so a client can also create the first version safely.
"""

from __future__ import annotations

from portal.errors import VersionConflict

NO_VERSION = 0


def base_version_check(*, what: str, current: int, base: int | None) -> None:
    """Raise ``VersionConflict`` when ``base`` is given and is not the ``current`` version.

    Call it inside the saving transaction, after locking the row that serialises saves.
    """
    if base is not None and base != current:
        raise VersionConflict(what=what, current=current, base=base)


def parse_base_version(raw: str) -> int:
    """A base version written as text (a form field, a header): a whole number >= 0.

    Raises ``ValueError`` otherwise; callers report it in their own shape (field, header).
    """
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise ValueError(raw)
    return int(text)
