"""API tokens as the API's calls meet them: the lookup by hash, which also scopes the
connection to the token's workspace, and the tokens this process remembers for the recall
endpoint, whose read checks them instead of a lookup of their own (``TokenCheck``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from portal.db.cursors import prepared_statement
from portal.db.scope import SETTING, scope_hint, scope_noted
from portal.models import ApiToken, Workspace

_TABLES = f"{ApiToken._meta.db_table} t JOIN {Workspace._meta.db_table} w ON w.id = t.workspace_id"
# Everything the lookup returns as one value: the same in the lookup and in the recall's read,
# so that the read can tell whether the token and its workspace are still as remembered.
_KEY = (
    "ROW(t.id, t.name, t.role, t.prefix, t.created_at, w.id, w.slug, w.name, w.created_at,"
    " w.store_queries, w.recall_rate_per_minute)::text"
)

# The same statement scopes the connection to the token's workspace (portal/db/scope.py):
# row-level security then hides every other workspace's rows from the rest of the call.
_TOKEN_SQL = prepared_statement(
    "portal.token",
    f"""
SELECT t.id, t.name, t.role, t.prefix, t.created_at, w.id, w.slug, w.name, w.created_at,
    w.store_queries, w.recall_rate_per_minute, {_KEY}, set_config('{SETTING}', w.id::text, false)
FROM {_TABLES}
WHERE t.key_hash = %s AND t.revoked_at IS NULL
""",
)

# For a statement of the recall's (named parameters ``token_hash`` and ``token_key``, both
# NULL when there is nothing to check): true while the token is live and exactly as
# remembered (its key), and the connection is scoped to its workspace alone; false otherwise.
# The API token table has no row-level security of its own.
TOKEN_CHECK_SQL = f"""coalesce((
    SELECT {_KEY} = %(token_key)s::text FROM {_TABLES}
    WHERE t.key_hash = %(token_hash)s::text AND t.revoked_at IS NULL
      AND current_setting('{SETTING}', true) = w.id::text
), false)"""


@dataclass(frozen=True)
class _Looked:
    row: tuple[Any, ...]  # the lookup's columns, up to the key
    key: str

    @property
    def scope(self) -> str:
        """The scope the lookup set: the token's workspace."""
        return str(self.row[5])


# The tokens this process looked up, by hash (no raw token is kept): what the recall endpoint
# takes instead of looking one up again, each use checked by its read (``TokenCheck``).
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


def _looked_up(key_hash: str) -> _Looked | None:
    """The lookup, remembered (or forgotten, if the token is gone)."""
    row = _TOKEN_SQL.fetchone([key_hash])
    if row is None:
        _remembered.pop(key_hash, None)
        return None
    if len(_remembered) >= _REMEMBERED_KEPT:
        _remembered.clear()
    looked = _remembered[key_hash] = _Looked(row[:11], row[11])
    scope_noted(looked.scope)
    return looked


def _token(row: tuple[Any, ...], key_hash: str) -> ApiToken:
    token_id, name, role, prefix, created, ws_id, slug, ws_name, ws_created, store, rate = row[:11]
    workspace = Workspace(
        id=ws_id, slug=slug, name=ws_name, created_at=ws_created, store_queries=store,
        recall_rate_per_minute=rate,
    )  # fmt: skip
    token = ApiToken(
        id=token_id, workspace=workspace, name=name, role=role, key_hash=key_hash,
        prefix=prefix, created_at=created,
    )  # fmt: skip
    # Mark both as loaded from the database, as the ORM would.
    for obj in (workspace, token):
        obj._state.adding, obj._state.db = False, connection.alias
    return token


class TokenChanged(Exception):
    """A remembered token is no longer as remembered: revoked (``token`` None), or it or its
    workspace changed (``token``: as looked up now, the connection scoped to it). The call is
    to run again as the token is now."""

    def __init__(self, token: ApiToken | None):
        super().__init__("the remembered API token changed")
        self.token = token


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
            raise TokenChanged(None)
        if looked.key != self.key:
            raise TokenChanged(_token(looked.row, self.key_hash))

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
