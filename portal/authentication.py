"""Bearer-token authentication for the API. Tokens are looked up by their SHA-256."""

from __future__ import annotations

from typing import Any

from django.db import connection
from rest_framework import authentication, exceptions

from portal.db.cursors import prepared_statement
from portal.db.scope import SETTING
from portal.models import TOKEN_PREFIX, ApiToken, Workspace, hash_token


class TokenUser:
    """The request.user of a token call: authenticated, but not a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_superuser = False
    is_staff = False
    pk = None

    def __init__(self, token: ApiToken):
        self.token = token

    def __str__(self) -> str:
        return self.token.label


# The same statement scopes the connection to the token's workspace (portal/db/scope.py):
# row-level security then hides every other workspace's rows from the rest of the call.
_TOKEN_SQL = prepared_statement(
    "portal.token",
    f"""
SELECT t.id, t.name, t.role, t.prefix, t.created_at, w.id, w.slug, w.name, w.created_at,
    w.store_queries, w.recall_rate_per_minute, set_config('{SETTING}', w.id::text, false)
FROM {ApiToken._meta.db_table} t JOIN {Workspace._meta.db_table} w ON w.id = t.workspace_id
WHERE t.key_hash = %s AND t.revoked_at IS NULL
""",
)


def token_lookup(key_hash: str) -> ApiToken | None:
    """The live token with this hash, its workspace attached.

    Raw SQL on purpose: every API call pays for this lookup, and the ORM's per-query overhead
    is several times the round trip here.
    """
    row = _TOKEN_SQL.fetchone([key_hash])
    if row is None:
        return None
    token_id, name, role, prefix, created, ws_id, slug, ws_name, ws_created, store, rate, _ = row
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


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[TokenUser, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        raw = raw.strip()
        if not raw.startswith(TOKEN_PREFIX):
            raise exceptions.AuthenticationFailed("Malformed API token.")
        token = token_lookup(hash_token(raw))
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        return TokenUser(token), token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
