"""The API's operations as this client calls them: the table (``OPERATIONS``, by the
schema's ``operationId``), what the client leaves out and why (``NOT_COVERED``), and the
request a call function builds (``Call``).

The call functions (``agent_calls``: recall, memories, sessions and turns;
``platform_calls``: policies, workloads, audit, maintenance, tokens and members) each
register their operation here and build its ``Call``; ``Client`` and ``AsyncClient`` send
them, so the two share every signature, default and docstring. The test suite compares the
table with the server's schema: an operation added there and in neither table, a path or
method changed, a field of a body renamed or retyped, fails a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

T = TypeVar("T")
Id = str | UUID  # a workload's id (a UUID, or its text)


@dataclass(frozen=True)
class Operation:
    """One operation of the API as this client calls it: the schema's ``operationId``, its
    method and path, the bodies it sends and reads (``models``), the query parameters and
    headers it may send."""

    id: str
    method: str
    path: str
    request: type | None = None
    response: type | None = None
    query: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Call(Generic[T]):
    """A request, ready to send: what a call function returns and a client sends."""

    operation: Operation
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


OPERATIONS: dict[str, Operation] = {}

# The schema's operations this client does not call, and why.
NOT_COVERED: dict[str, str] = {
    "context_layout_create": "The layout calculator behind the Layout page (a what-if with "
    "made-up messages); an agent's turns are laid out by POST /v1/sessions/{id}/turns.",
    "maintenance_runs_archive_retrieve": "A file download (gzipped JSON Lines) to keep, "
    "not a JSON answer; get_run_manifest says what it holds.",
}


def operation(
    id: str,
    method: str,
    path: str,
    *,
    request: type | None = None,
    response: type | None = None,
    query: tuple[str, ...] = (),
    headers: tuple[str, ...] = (),
) -> Operation:
    operation = Operation(id, method, path, request, response, query, headers)
    OPERATIONS[id] = operation
    return operation


def _segment(value: object) -> str:
    # An actor id keeps its colon ("user:ada"); anything else a path cannot hold is escaped.
    return quote(str(value), safe=":@")


def _param(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def call(
    operation: Operation,
    path: Mapping[str, object] | None = None,
    *,
    params: Mapping[str, object] | None = None,
    body: Any = None,
    if_match: int | str | None = None,
) -> Call[Any]:
    filled = operation.path.format(**{k: _segment(v) for k, v in (path or {}).items()})
    query = {k: _param(v) for k, v in (params or {}).items() if v is not None and v != ""}
    headers = {}
    if if_match is not None:
        # A version number becomes its entity tag; an ETag as read is sent as it is.
        headers["If-Match"] = f'"{if_match}"' if isinstance(if_match, int) else if_match
    return Call(operation, filled, query, body, headers)


def pages(page: int | None, page_size: int | None) -> dict[str, object]:
    return {"page": page, "pageSize": page_size}


PAGE = ("page", "pageSize")
