"""API tokens as the API's calls meet them: the lookup by hash, which also scopes the
connection to the token's workspace, and the tokens this process remembers for the recall
endpoint, whose read checks them instead of a lookup of their own (``TokenCheck``).

A secret is live while its token is neither revoked nor expired and it is the token's
current secret, or its previous one within the grace of a rotation: the lookup and the
recall's check ask the same (``_live``), so a remembered token is refused at its next call.
A refused secret's reason (``token_refusal``: expired, or rotated out) costs a statement of
its own, on the refused call only. When each token was last used is noted in memory and
written in batches (below).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from portal.db.cursors import prepared_statement
from portal.db.scope import SETTING, scope_hint, scope_noted
from portal.models import ApiToken, Workspace

logger = logging.getLogger(__name__)

_TABLES = f"{ApiToken._meta.db_table} t JOIN {Workspace._meta.db_table} w ON w.id = t.workspace_id"
# Everything the lookup returns as one value: the same in the lookup and in the recall's read,
# so that the read can tell whether the token and its workspace are still as remembered.
_COLUMNS = (
    "t.id, t.name, t.role, t.prefix, t.created_at, t.scopes, t.bound_workloads,"
    " t.bound_environments, t.api_rate_per_minute, t.recall_rate_per_minute,"
    " w.id, w.slug, w.name, w.created_at, w.store_queries, w.recall_rate_per_minute"
)
_COUNT = _COLUMNS.count(",") + 1
_KEY = f"ROW({_COLUMNS})::text"


def _live(hash: str) -> str:
    """The condition on token row ``t`` that the secret hashed as ``hash`` (an SQL value) is
    live: the token's secret, or its previous one within the grace its rotation left it; the
    token neither revoked nor expired. Timed by the statement's start, not its transaction's
    (``now()``), which may have begun long before."""
    return (
        f"(t.key_hash = {hash} OR (t.previous_key_hash = {hash}"
        " AND t.previous_valid_until > statement_timestamp()))"
        " AND t.revoked_at IS NULL"
        " AND (t.expires_at IS NULL OR t.expires_at > statement_timestamp())"
    )


# The same statement scopes the connection to the token's workspace (portal/db/scope.py):
# row-level security then hides every other workspace's rows from the rest of the call.
_TOKEN_SQL = prepared_statement(
    "portal.token",
    f"""
SELECT {_COLUMNS}, {_KEY}, set_config('{SETTING}', w.id::text, false)
FROM {_TABLES}
WHERE {_live("%(hash)s")}
""",
)

# For a statement of the recall's (named parameters ``token_hash`` and ``token_key``, both
# NULL when there is nothing to check): true while the token is live (not revoked, not
# expired, its secret current or within its rotation's grace) and exactly as remembered (its
# key), and the connection is scoped to its workspace alone; false otherwise. The API token
# table has no row-level security of its own.
TOKEN_CHECK_SQL = f"""coalesce((
    SELECT {_KEY} = %(token_key)s::text FROM {_TABLES}
    WHERE {_live("%(token_hash)s::text")}
      AND current_setting('{SETTING}', true) = w.id::text
), false)"""

# Why a secret the lookup did not find is refused, when it is for a reason its holder can act
# on: its token expired, or it is a token's previous secret, past its rotation's grace. Run
# only for a refused call.
_REFUSAL_SQL = f"""
SELECT t.key_hash = %(hash)s, t.name, t.expires_at, t.previous_valid_until
FROM {ApiToken._meta.db_table} t
WHERE (t.key_hash = %(hash)s OR t.previous_key_hash = %(hash)s) AND t.revoked_at IS NULL
"""


@dataclass(frozen=True)
class _Looked:
    row: tuple[Any, ...]  # the lookup's columns, up to the key
    key: str

    @property
    def scope(self) -> str:
        """The scope the lookup set: the token's workspace."""
        return str(self.row[10])


# The tokens this process looked up, by hash (no raw token is kept): what the recall and the
# turns endpoints take instead of looking one up again, each use checked by their first
# statement (``TokenCheck``).
_remembered: dict[str, _Looked] = {}
_REMEMBERED_KEPT = 10_000


def token_lookup(key_hash: str) -> ApiToken | None:
    """The live token with this hash, its workspace attached; the connection is then scoped to
    that workspace.

    Raw SQL on purpose: every API call pays for this lookup, and the ORM's per-query overhead
    is several times the round trip here.
    """
    looked = _looked_up(key_hash)
    return None if looked is None else _token(looked.row, key_hash)


def token_lookups_forget() -> None:
    """Forget the lookups remembered (tests start each case afresh)."""
    _remembered.clear()


def _looked_up(key_hash: str) -> _Looked | None:
    """The lookup, remembered (or forgotten, if the token is gone)."""
    row = _TOKEN_SQL.fetchone({"hash": key_hash})
    if row is None:
        _remembered.pop(key_hash, None)
        return None
    if len(_remembered) >= _REMEMBERED_KEPT:
        _remembered.clear()
    looked = _remembered[key_hash] = _Looked(row[:_COUNT], row[_COUNT])
    scope_noted(looked.scope)
    return looked


def _token(row: tuple[Any, ...], key_hash: str) -> ApiToken:
    """The token of a lookup's row, ``key_hash`` the hash of the secret it was found by (its
    previous one, during a rotation's grace)."""
    (
        token_id, name, role, prefix, created, scopes, workloads, environments, api_rate,
        token_recall_rate, ws_id, slug, ws_name, ws_created, store, rate,
    ) = row[:_COUNT]  # fmt: skip
    workspace = Workspace(
        id=ws_id, slug=slug, name=ws_name, created_at=ws_created, store_queries=store,
        recall_rate_per_minute=rate,
    )  # fmt: skip
    token = ApiToken(
        id=token_id, workspace=workspace, name=name, role=role, key_hash=key_hash,
        prefix=prefix, created_at=created, scopes=scopes, bound_workloads=workloads,
        bound_environments=environments, api_rate_per_minute=api_rate,
        recall_rate_per_minute=token_recall_rate,
    )  # fmt: skip
    # Mark both as loaded from the database, as the ORM would.
    for obj in (workspace, token):
        obj._state.adding, obj._state.db = False, connection.alias
    return token


@dataclass(frozen=True)
class Refusal:
    """Why a secret is refused, when its holder can act on it: its token expired, or it is
    the token's previous secret, whose grace after the rotation ended (``rotated``)."""

    name: str
    ended_at: datetime
    rotated: bool


def token_refusal(key_hash: str) -> Refusal | None:
    """Why the secret hashed as ``key_hash``, which the lookup did not find, is refused; None
    when it is revoked or unknown. One statement, for refused calls only."""
    with connection.cursor() as cursor:
        cursor.execute(_REFUSAL_SQL, {"hash": key_hash})
        row = cursor.fetchone()
    if row is None:
        return None
    current, name, expires_at, previous_until = row
    if current:
        return None if expires_at is None else Refusal(name, expires_at, rotated=False)
    if expires_at is not None and (previous_until is None or expires_at < previous_until):
        return Refusal(name, expires_at, rotated=False)
    return None if previous_until is None else Refusal(name, previous_until, rotated=True)


class TokenChanged(Exception):
    """A remembered token is no longer as remembered: refused now (``token`` None: revoked,
    expired, or a secret rotated out), or it or its workspace changed (``token``: as looked up
    now, the connection scoped to it). The call is to run again as the token is now."""

    def __init__(self, token: ApiToken | None, key_hash: str):
        super().__init__("the remembered API token changed")
        self.token = token
        self.key_hash = key_hash


class TokenCheck:
    """A remembered token this call did not look up. Before the call reads anything, either
    its first statement checks the token in its own snapshot (``TOKEN_CHECK_SQL``: the
    recall's read, given ``params``) and the caller passes the answer to ``checked``, or
    ``confirm`` looks the token up. Until then ``pending``; a statement that cannot check it,
    and an error about to be answered, must ``confirm`` first.
    """

    __slots__ = ("key", "key_hash", "pending")

    def __init__(self, key_hash: str, key: str):
        self.key_hash, self.key, self.pending = key_hash, key, True

    def checked(self, ok: bool | None) -> bool:
        """Whether the statement's answer (``TOKEN_CHECK_SQL``) confirms the token; if not,
        the statement's results are to be thrown away and ``confirm`` called."""
        if self.pending and ok:
            self.pending = False
        return not self.pending

    def confirm(self) -> None:
        """Look the token up (which scopes the connection to its workspace); TokenChanged
        unless it is exactly as remembered."""
        if not self.pending:
            return
        self.pending = False
        looked = _looked_up(self.key_hash)
        if looked is None:
            raise TokenChanged(None, self.key_hash)
        if looked.key != self.key:
            raise TokenChanged(_token(looked.row, self.key_hash), self.key_hash)

    def changed(self) -> TokenChanged | None:
        """``confirm``, its answer returned rather than raised: None while the token is as
        remembered (or nothing was pending)."""
        try:
            self.confirm()
        except TokenChanged as changed:
            return changed
        return None


def token_params(check: TokenCheck | None) -> dict[str, str | None]:
    """The ``token_hash`` and ``token_key`` parameters of ``TOKEN_CHECK_SQL``: NULL, nothing to
    check, without a check pending."""
    if check is not None and check.pending:
        return {"token_hash": check.key_hash, "token_key": check.key}
    return {"token_hash": None, "token_key": None}


def token_check_of(key_hash: str) -> TokenCheck | None:
    """The check the recall's read would make of this token as it is now (looked up: the
    connection is scoped to its workspace); None if there is no such live token. For the
    benchmark, which runs the read as the endpoint does."""
    looked = _looked_up(key_hash)
    return None if looked is None else TokenCheck(key_hash, looked.key)


def token_remembered(key_hash: str) -> tuple[ApiToken, TokenCheck] | None:
    """The token with this hash as this process last looked it up, and the check its first
    statement must make, while the connection was last scoped, as far as this process saw,
    to the token's workspace (``scope_hint``); otherwise None: look it up."""
    looked = _remembered.get(key_hash)
    if looked is None or scope_hint() != looked.scope:
        return None
    return _token(looked.row, key_hash), TokenCheck(key_hash, looked.key)


# --- when each token was last used ----------------------------------------------------------
#
# A write per call would double the recall's statements, so uses are noted in this process's
# memory (``token_used``, no statement) and written in one statement for every token noted
# (``token_uses_write``) by the first call ``TOKEN_LAST_USED_SECONDS`` or more after the first
# use noted since the last write. ``lastUsedAt`` is therefore behind by up to that much, for
# a process that keeps serving calls; what a process noted and never wrote (it stopped, or
# got no further call) is lost, and the column keeps the use before.

_used: dict[int, datetime] = {}
_used_since: float | None = None  # monotonic seconds: the first use noted since the last write
_used_lock = threading.Lock()

_USED_SQL = f"""
UPDATE {ApiToken._meta.db_table} t SET last_used_at = u.at
FROM unnest(%(ids)s::bigint[], %(ats)s::timestamptz[]) AS u(id, at)
WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.at)
"""


def token_used(token_id: int) -> None:
    """Note that token ``token_id`` was used now; write the uses noted when it is time."""
    global _used_since
    now = time.monotonic()
    with _used_lock:
        _used[token_id] = datetime.now(UTC)
        if _used_since is None:
            _used_since = now
        due = now - _used_since >= settings.TOKEN_LAST_USED_SECONDS
    if due:
        token_uses_write()


def token_uses_write() -> int:
    """Write the uses noted (each token's latest, never moving one back): how many tokens.
    A write that fails is logged, its uses kept for the next."""
    global _used, _used_since
    with _used_lock:
        pending, _used, _used_since = _used, {}, None
    if not pending:
        return 0
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_USED_SQL, {"ids": list(pending), "ats": list(pending.values())})
    except DatabaseError as exc:
        logger.warning(
            "When %s API tokens were last used was not written (%s); the next write will.",
            len(pending),
            type(exc).__name__,
        )
        with _used_lock:
            for token_id, at in pending.items():
                _used[token_id] = max(at, _used.get(token_id, at))
            _used_since = _used_since or time.monotonic()
        return 0
    return len(pending)


def token_uses_forget() -> None:
    """Forget the uses noted and not written (tests start each case afresh)."""
    global _used, _used_since
    with _used_lock:
        _used, _used_since = {}, None


def token_last_used(token: ApiToken) -> datetime | None:
    """When ``token`` was last used, as far as this process knows: its column, or a later use
    this process noted and has not written yet."""
    noted = _used.get(token.pk)
    if noted is None or (token.last_used_at is not None and token.last_used_at >= noted):
        return token.last_used_at
    return noted
