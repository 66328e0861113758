"""Memories as JSON Lines: the import page and the restore of a retention archive read them
the same way, each line checked by the API's memory serializer, errors numbered by line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from recall.api.serializers import MEMORY_BATCH_MAX, MemoryInputSerializer


@dataclass(frozen=True)
class LineError:
    line: int
    field: str
    message: str


def parse_jsonl(raw: bytes) -> tuple[list[dict[str, Any]], list[LineError]]:
    """Validate every line (blank lines are skipped); model-field items, or per-line errors."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], [LineError(0, "file", "The file is not UTF-8 text.")]
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return [], [LineError(0, "file", "The file has no memories in it.")]
    if len(lines) > MEMORY_BATCH_MAX:
        return [], [
            LineError(
                0,
                "file",
                f"At most {MEMORY_BATCH_MAX:,} memories per import; the file has {len(lines):,}.",
            )
        ]
    return parse_jsonl_lines(text, MemoryInputSerializer)


def parse_jsonl_lines(
    text: str, serializer_class: type[MemoryInputSerializer]
) -> tuple[list[dict[str, Any]], list[LineError]]:
    """Each non-blank line checked by ``serializer_class``: model-field items, or errors
    numbered by line (the import, and the restore of a retention archive)."""
    items: list[dict[str, Any]] = []
    errors: list[LineError] = []
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    objects: list[tuple[int, dict[str, Any]]] = []
    for number, line in numbered:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(
                LineError(number, "line", f"Not valid JSON: {exc.msg} (column {exc.colno}).")
            )
            continue
        if not isinstance(obj, dict):
            errors.append(LineError(number, "line", "Each line must be one JSON object."))
            continue
        objects.append((number, obj))
    checked = serializer_class.check_each(obj for _, obj in objects)
    for (number, _), (fields, problems) in zip(objects, checked, strict=True):
        if fields is not None:
            items.append(fields)
        for name, messages in problems.items():
            text_messages = messages if isinstance(messages, list) else [messages]
            errors.append(LineError(number, name, " ".join(str(m) for m in text_messages)))
    errors.sort(key=lambda error: error.line)
    return items, errors
