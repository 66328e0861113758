"""Optimistic concurrency for versioned documents (policies, layout configurations).

A read tells its version; a save may name the version it was based on (its *base*). The save
service re-reads the current version while holding a row lock and refuses a stale base, so
of two saves from the same base exactly one wins and the other is told, instead of silently
undoing the first. A save without a base is not checked (older clients keep working).

Version 0 stands for "nothing saved yet" (a workload with no policy for an environment, a
workload still on the layout defaults), so a client can also create the first version safely.

``versioned_save`` is the one save of a versioned document (the operator floor, a workload's
policy, a workload's layout configuration); each caller passes the steps that differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from django.db import transaction

from portal.errors import VersionConflict

NO_VERSION = 0


class Versioned(Protocol):
    """A stored version of a document (a model row)."""

    version: int


Document = TypeVar("Document")
Version = TypeVar("Version", bound=Versioned)


def base_version_check(*, what: str, current: int, base: int | None) -> None:
    """Raise ``VersionConflict`` when ``base`` is given and is not the ``current`` version.

    Call it inside the saving transaction, after locking the row that serialises saves.
    """
    if base is not None and base != current:
        raise VersionConflict(what=what, current=current, base=base)


def versioned_save(
    *,
    what: str,
    base_version: int | None,
    locked_document: Callable[[], Document],
    latest: Callable[[], Version | None],
    unchanged: Callable[[Version, Document], bool],
    insert: Callable[[Document, int], Version],
    record: Callable[[Document, Version | None, Version], None],
) -> Version:
    """Save a document as its next version, in the caller's transaction, step by step:

    1. ``locked_document()`` takes the row lock that serialises this document's saves and
       returns the document to store, normalised (validated there, under the lock, when the
       rules read a locked row: a workload policy is checked against its floor);
    2. ``latest()`` reads the current version, now that no other save can move it;
    3. a stale ``base_version`` raises ``VersionConflict`` (``base_version_check``);
    4. a document ``unchanged`` from the current version records nothing and returns it;
    5. ``insert(document, n)`` writes version n, one past the current (1 for the first);
    6. ``record(document, previous, version)`` writes the audit event of the change.

    Refuses to run outside a transaction: the lock, the insert and the audit event must
    commit (or roll back) together.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("versioned_save must be called inside transaction.atomic()")
    document = locked_document()
    previous = latest()
    base_version_check(
        what=what,
        current=previous.version if previous is not None else NO_VERSION,
        base=base_version,
    )
    if previous is not None and unchanged(previous, document):
        return previous
    version = insert(document, (previous.version if previous is not None else NO_VERSION) + 1)
    record(document, previous, version)
    return version


def parse_base_version(raw: str) -> int:
    """A base version written as text (a form field, a header): a whole number >= 0.

    Raises ``ValueError`` otherwise; callers report it in their own shape (field, header).
    """
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise ValueError(raw)
    return int(text)
