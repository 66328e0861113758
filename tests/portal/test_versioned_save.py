"""``portal.versioning.versioned_save``: the one save of a versioned document, step by step.

The policy and layout saves' own tests show the outcomes (versions, events, conflicts); these
pin the order of the steps every one of them relies on, with stand-ins for the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction

from portal.errors import VersionConflict
from portal.versioning import versioned_save

pytestmark = pytest.mark.django_db


@dataclass
class Row:
    version: int
    document: str


class Store:
    """A document's versions in memory, logging each step the save takes."""

    def __init__(self, *rows: Row) -> None:
        self.rows = list(rows)
        self.steps: list[str] = []

    def save(self, document: str, base_version: int | None = None) -> Row:
        def locked_document() -> str:
            self.steps.append("lock")
            return document.strip()

        def latest() -> Row | None:
            self.steps.append("latest")
            return self.rows[-1] if self.rows else None

        def insert(doc: str, number: int) -> Row:
            self.steps.append(f"insert {number}")
            self.rows.append(Row(number, doc))
            return self.rows[-1]

        def record(doc: str, previous: Row | None, version: Row) -> None:
            before = previous.document if previous else None
            self.steps.append(f"record {before!r} -> {doc!r} as {version.version}")

        return versioned_save(
            what="The test document",
            base_version=base_version,
            locked_document=locked_document,
            latest=latest,
            unchanged=lambda previous, doc: previous.document == doc,
            insert=insert,
            record=record,
        )


def atomic_save(store: Store, document: str, **kwargs: Any) -> Row:
    with transaction.atomic():
        return store.save(document, **kwargs)


class VersionedSaveTests:
    def test_it_locks_then_reads_then_inserts_the_next_version_and_records_it(self):
        store = Store(Row(1, "a"))

        row = atomic_save(store, " b ", base_version=1)

        assert row == Row(2, "b")
        assert store.steps == ["lock", "latest", "insert 2", "record 'a' -> 'b' as 2"]

    def test_the_first_version_is_1_and_base_0_means_nothing_saved_yet(self):
        store = Store()

        assert atomic_save(store, "a", base_version=0) == Row(1, "a")
        assert store.steps[-1] == "record None -> 'a' as 1"

    def test_an_unchanged_document_records_nothing_and_returns_the_current_version(self):
        store = Store(Row(3, "a"))

        assert atomic_save(store, "a") == Row(3, "a")
        assert store.steps == ["lock", "latest"]

    def test_a_stale_base_is_refused_before_anything_is_written(self):
        store = Store(Row(1, "a"), Row(2, "b"))

        with pytest.raises(VersionConflict):
            atomic_save(store, "c", base_version=1)
        assert store.steps == ["lock", "latest"]
        assert len(store.rows) == 2

    # Not inside the test's own transaction, which would hide the missing one.
    @pytest.mark.django_db(transaction=True)
    def test_it_refuses_to_run_outside_a_transaction(self):
        store = Store()

        with pytest.raises(RuntimeError, match="inside transaction.atomic"):
            store.save("a")
        assert store.steps == []
