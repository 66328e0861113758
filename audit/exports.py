"""Streaming exports of an audit event queryset: CSV and JSON Lines.

Rows have the API's field names and shapes (``AuditEventSerializer``), so an export and
``GET /v1/audit/events/`` describe an event the same way. Events are read in chunks with a
server-side cursor, so a long trail is never held in memory.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet

from audit.api.serializers import AuditEventSerializer
from audit.models import AuditEvent

CHUNK = 500
CSV_COLUMNS = tuple(AuditEventSerializer.Meta.fields)


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
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def csv_lines(events: QuerySet[AuditEvent]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for row in _rows(events):
        yield writer.writerow([_cell(row[column]) for column in CSV_COLUMNS])


def jsonl_lines(events: QuerySet[AuditEvent]) -> Iterator[str]:
    for row in _rows(events):
        yield json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n"
