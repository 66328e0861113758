"""Streaming exports of an audit event queryset: CSV and JSON Lines.

Rows have the API's field names and shapes (``AuditEventSerializer``), so an export and
``GET /v1/audit/events/`` describe an event the same way. Events are read in chunks with a
server-side cursor, so a long trail is never held in memory.

CSV adds, after the API's columns, the payload fields of the common event types as columns of
their own (``PAYLOAD_COLUMNS``), so a spreadsheet can sort and sum them without parsing the
``payload`` cell; a field an event does not have is an empty cell.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from django.db.models import QuerySet

from audit.api.serializers import AuditEventSerializer
from audit.models import AuditEvent
from audit.presenters import changed_names

CHUNK = 500
API_COLUMNS = tuple(AuditEventSerializer.Meta.fields)


def _ids(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def count(payload: Mapping[str, Any]) -> Any:
        ids = payload.get(key)
        return len(ids) if isinstance(ids, list) else None

    return count


def _changed(payload: Mapping[str, Any]) -> Any:
    return " ".join(changed_names(payload)) or None


def _memory_count(payload: Mapping[str, Any]) -> Any:
    """How many memories an event names: a context's entries, or the memories changed or
    erased (their ``count``, else their ids)."""
    if isinstance(payload.get("memoryIds"), list):
        return len(payload["memoryIds"])
    if isinstance(payload.get("count"), int):
        return payload["count"]
    return _ids("ids")(payload)


# Columns computed from the payload rather than read at one path.
DERIVED: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "changed": _changed,
    "memoryCount": _memory_count,
    "truncatedCount": _ids("truncatedIds"),
}

# The payload fields given their own column: a dotted name is a nested field
# (``counts.afterPolicy`` is ``payload["counts"]["afterPolicy"]``).
PAYLOAD_COLUMNS = (
    # versioned documents: policies, lifecycle settings, layout configurations
    "version", "comment", "floorVersion", "changed",
    # context.assembled (its counts in the funnel's order, recall.envelope.FUNNEL: audit
    # imports nothing above it, so tests/recall/test_funnel_order.py holds them to it)
    "envelopeId", "topK", "accessPath", "reused", "origin",
    "counts.candidates", "counts.afterPolicy", "counts.afterRanking",
    "counts.afterBudgetAllocation",
    "tokenCounts.used", "tokenCounts.budget", "tokenCounts.entries",
    "tokenCounts.truncatedRefs", "tokenCounts.query",
    "memoryCount", "truncatedCount",
    "policyVersions.floor", "policyVersions.workload", "policyVersions.workloadEnvironment",
    "policyVersions.override",
    # tokens, workloads, memories
    "name", "role", "prefix", "action",
    # maintenance runs and restores
    "runId", "sweep", "mode", "status", "trigger", "settingsVersion", "preview",
    "counts.listed", "counts.applied", "counts.skipped", "restored", "alreadyPresent",
)  # fmt: skip
CSV_COLUMNS = API_COLUMNS + PAYLOAD_COLUMNS
assert len(set(CSV_COLUMNS)) == len(CSV_COLUMNS), "no payload column shadows an API one"


def payload_cells(payload: Any) -> list[Any]:
    """The ``PAYLOAD_COLUMNS`` of one event's payload, in order (None where it has none)."""
    if not isinstance(payload, Mapping):
        return [None] * len(PAYLOAD_COLUMNS)
    cells = []
    for column in PAYLOAD_COLUMNS:
        if column in DERIVED:
            cells.append(DERIVED[column](payload))
            continue
        value: Any = payload
        for key in column.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        cells.append(value)
    return cells


def _rows(events: QuerySet[AuditEvent]) -> Iterator[dict[str, Any]]:
    for event in events.iterator(chunk_size=CHUNK):
        yield AuditEventSerializer(event).data


class _Echo:
    """A file-like object whose ``write`` hands the line back, for csv.writer streaming."""

    def write(self, value: str) -> str:
        return value


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"  # as in the payload's JSON
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def csv_lines(events: QuerySet[AuditEvent]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for row in _rows(events):
        cells = [row[column] for column in API_COLUMNS] + payload_cells(row["payload"])
        yield writer.writerow([_cell(value) for value in cells])


def jsonl_lines(events: QuerySet[AuditEvent]) -> Iterator[str]:
    for row in _rows(events):
        yield json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n"
