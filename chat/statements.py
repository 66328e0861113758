"""The statements of the sessions API's hot path that the ORM would build on every call: a
token caller's read of a session, the session locked with what its turn reads beside it (a
token caller's turn reads the session through it alone), and everything a turns request
writes.

Each is one prepared statement (``portal.db.cursors``), the last two where the ORM ran four
and three: building and compiling the locked read with its subqueries alone cost more
(2 ms) than running it. The columns are the models' own (``_meta``), so a field added to a
model is read and written here too, and the rows come back as the model instances the ORM
would have made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import orjson
from django.db import connection
from django.db.models import JSONField, Model

from chat.compaction.coordinator import MONITOR_FIELDS
from chat.models import Session, Turn, TurnContext
from policies.models import Workload
from portal.db.cursors import prepared_statement
from portal.errors import NotFoundError
from portal.models import Workspace
from portal.tokens import TOKEN_CHECK_SQL, TokenCheck, token_params
from recall.layout.services import (
    CurrentLayoutConfig,
    layout_config_current_of,
    layout_config_latest_sql,
)
from recall.models import Actor

M = TypeVar("M", bound=Model)

# The session and the rows the ORM's ``select_related("workspace", "actor", "workload")``
# joins, in this order. Only the session's row is locked (``chat.models.SESSION_LOCK``).
_JOINED: tuple[tuple[type[Model], str], ...] = (
    (Session, "s"),
    (Actor, "a"),
    (Workload, "w"),
    (Workspace, "ws"),
)


def _columns(model: type[Model], alias: str) -> str:
    return ", ".join(f"{alias}.{field.column}" for field in model._meta.concrete_fields)


def _instance(model: type[M], values: Sequence[Any]) -> M:
    """A model instance of its concrete fields' values, as the ORM makes one from a row."""
    fields = model._meta.concrete_fields
    converted = []
    for field, value in zip(fields, values, strict=True):
        # As the ORM reads them (a JSON field's text decoded; django-stubs lacks the method).
        for convert in field.get_db_converters(connection):  # type: ignore[attr-defined]
            value = convert(value, field, connection)
        converted.append(value)
    return model.from_db(connection.alias, [field.attname for field in fields], converted)


_WIDTHS = tuple(len(model._meta.concrete_fields) for model, _ in _JOINED)

_FROM = f"""
FROM {Session._meta.db_table} s
JOIN {Actor._meta.db_table} a ON a.id = s.actor_id
JOIN {Workload._meta.db_table} w ON w.id = s.workload_id
JOIN {Workspace._meta.db_table} ws ON ws.id = s.workspace_id
WHERE s.id = %(session)s AND s.workspace_id = %(workspace)s"""
_JOINED_COLUMNS = ", ".join(_columns(model, alias) for model, alias in _JOINED)

_SESSION = prepared_statement("chat.session", f"SELECT {_JOINED_COLUMNS}{_FROM}")
# A turn that waited for another turn's lock gets the session's row as that turn left it,
# but reads anything else in the snapshot its statement began with: what the session's turns
# changed is read from its row (``TurnStart.assembled_before``), or by a later statement (the
# histories); the layout configuration read here is the one saved when the request came (one
# saved while it waits for the lock applies from the next turn). Its first column checks a
# remembered token (``portal.tokens.TOKEN_CHECK_SQL``; false when there is none to check):
# the statement answers one row even when the session is not found.
_LOCKED = prepared_statement(
    "chat.session_locked_for_turns",
    f"""
WITH locked AS (
    SELECT {_JOINED_COLUMNS}, {layout_config_latest_sql("s.workload_id")}
    {_FROM}
    FOR NO KEY UPDATE OF s
)
SELECT {TOKEN_CHECK_SQL}, locked.*
FROM (SELECT 1) one LEFT JOIN locked ON true
""",
)


def _session_of(row: Sequence[Any]) -> Session:
    """The session of a row of ``_JOINED``'s columns, its workspace, actor and workload
    attached."""
    instances: list[Model] = []
    start = 0
    for (model, _), width in zip(_JOINED, _WIDTHS, strict=True):
        instances.append(_instance(model, row[start : start + width]))
        start += width
    session, actor, workload, workspace = instances
    assert isinstance(session, Session)
    session.actor, session.workload, session.workspace = actor, workload, workspace  # type: ignore[assignment]
    return session


def session_in_workspace(*, pk: int, workspace_id: int) -> Session | None:
    """Session ``pk`` of workspace ``workspace_id``, its workspace, actor and workload attached
    (``chat.access.session_for``'s read for a token caller); None if it has no such session."""
    row = _SESSION.fetchone({"session": pk, "workspace": workspace_id})
    return None if row is None else _session_of(row)


@dataclass(frozen=True)
class TurnStart:
    """What a turns request reads with the session it locks, in the same statement."""

    session: Session  # locked, its workspace, actor and workload attached
    layout: CurrentLayoutConfig  # the workload's layout configuration, as saved now

    @property
    def assembled_before(self) -> bool:
        """Whether a context was assembled for an earlier turn (then none is primed now): the
        session's last budget status is that of its latest assembled turn, written with it."""
        return self.session.last_budget is not None


def session_locked_for_turns(
    *, pk: int, workspace_id: int, token: TokenCheck | None = None
) -> TurnStart:
    """Session ``pk`` of workspace ``workspace_id`` locked for a turns request (as
    ``chat.services.session_locked`` locks it), with the workload's current layout
    configuration; a 404 if it has no such session. With ``token`` (a remembered token the
    call did not look up, still pending) the statement checks it first: refused, the token
    is looked up (``TokenCheck.confirm``: ``TokenChanged`` unless it is as remembered, the
    connection then scoped to its workspace) and the session read again."""
    params = {"session": pk, "workspace": workspace_id}
    row = _LOCKED.fetchone({**params, **token_params(token)})
    if token is not None and row is not None and not token.checked(row[0]):
        token.confirm()
        row = _LOCKED.fetchone({**params, **token_params(token)})
    if row is None or row[1] is None:
        raise NotFoundError(f"No session {pk}.")
    width = sum(_WIDTHS)
    layout = layout_config_current_of(_json(row[1 + width]))
    return TurnStart(_session_of(row[1 : 1 + width]), layout)


def _json(value: Any) -> Any:
    """A json(b) value as read: text (Django reads jsonb as text, for its fields), or None."""
    return orjson.loads(value) if isinstance(value, str | bytes) else value


_TURN_COLUMNS = ("workspace_id", "session_id", "index", "role", "content", "tokens", "created_at")
# Every column of a context but its id, and the session's fields a turn changes (with
# ``updated_at``, which is the statement's time), each with its parameter.
_CONTEXT_FIELDS = [f for f in TurnContext._meta.concrete_fields if not f.primary_key]
SESSION_TURN_FIELDS = ("turn_count", "last_budget", *MONITOR_FIELDS)
_SESSION_FIELDS: list[Any] = [Session._meta.get_field(name) for name in SESSION_TURN_FIELDS]


def _placeholder(field: Any, prefix: str) -> str:
    """The field's parameter, cast to its column's type (``created_at``: the statement's time)."""
    if field.name == "created_at":
        return "%(now)s"
    return f"%({prefix}{field.column})s::{field.cast_db_type(connection)}"


def _params(instance: Model | None, fields: Sequence[Any], prefix: str) -> dict[str, Any]:
    params = {}
    for field in fields:
        value = None if instance is None else getattr(instance, field.attname)
        if isinstance(field, JSONField) and value is not None:
            value = orjson.dumps(value).decode()
        params[f"{prefix}{field.column}"] = value
    return params


# The turns appended, the context assembled for the last (when it was the user's: the
# context's ``turn`` is not null) and the session's counters and monitor state: one
# statement, all or nothing. JSON goes as text, cast by PostgreSQL.
_RECORDED = prepared_statement(
    "chat.turn_recorded",
    f"""
WITH turns AS (
    INSERT INTO {Turn._meta.db_table} ({", ".join(_TURN_COLUMNS)})
    SELECT %(workspace)s, %(session)s, m.index, m.role, m.content, m.tokens, %(now)s
    FROM unnest(%(indexes)s::integer[], %(roles)s::text[], %(contents)s::text[],
                %(tokens)s::integer[]) AS m(index, role, content, tokens)
    RETURNING id, index
),
context AS (
    INSERT INTO {TurnContext._meta.db_table} ({", ".join(f.column for f in _CONTEXT_FIELDS)})
    SELECT {", ".join(_placeholder(f, "context_") for f in _CONTEXT_FIELDS)}
    WHERE %(context_turn)s::integer IS NOT NULL
    RETURNING id
)
UPDATE {Session._meta.db_table} SET
    {", ".join(f"{f.column} = {_placeholder(f, 'session_')}" for f in _SESSION_FIELDS)},
    updated_at = %(now)s
WHERE id = %(session)s
RETURNING (SELECT array_agg(id ORDER BY index) FROM turns), (SELECT id FROM context)
""",
)


def turn_recorded(
    *, session: Session, turns: Sequence[Turn], context: TurnContext | None, now: datetime
) -> None:
    """Write the request's turns (numbered, not saved yet), the context assembled for the last
    one (not saved yet; None: the last was not the user's) and the locked session's
    ``SESSION_TURN_FIELDS`` as they are on ``session``: one statement. The instances get
    their ids and times, as ``save`` would give them."""
    row = _RECORDED.fetchone(
        {
            "workspace": session.workspace_id,
            "session": session.pk,
            "now": now,
            "indexes": [turn.index for turn in turns],
            "roles": [turn.role for turn in turns],
            "contents": [turn.content for turn in turns],
            "tokens": [turn.tokens for turn in turns],
            **_params(context, _CONTEXT_FIELDS, "context_"),
            **_params(session, _SESSION_FIELDS, "session_"),
        }
    )
    if row is None:  # impossible: the session is locked
        raise NotFoundError(f"No session {session.pk}.")
    turn_ids, context_id = row
    for turn, pk in zip(turns, turn_ids, strict=True):
        turn.pk, turn.created_at = pk, now
        turn._state.adding, turn._state.db = False, connection.alias
    if context is not None:
        context.pk, context.created_at = context_id, now
        context._state.adding, context._state.db = False, connection.alias
    session.updated_at = now
