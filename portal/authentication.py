"""Bearer-token authentication for the API. Tokens are looked up by their SHA-256; each use
is noted (``portal.tokens.token_used``) for the token's ``lastUsedAt``."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from portal.models import TOKEN_PREFIX, ApiToken, hash_token
from portal.tokens import TokenCheck, token_lookup, token_refusal, token_remembered, token_used

REVOKED_MESSAGE = "Invalid or revoked API token."


class TokenExpired(exceptions.AuthenticationFailed):
    """401 ``TOKEN_EXPIRED``: the token expired, or its secret was rotated out (the grace
    after the rotation ended). Its holder needs a new token, or the new secret."""

    error_code = "TOKEN_EXPIRED"

    def __init__(self, message: str, details: dict[str, Any]):
        super().__init__(message)
        self.error_details = details


def token_refused(key_hash: str) -> exceptions.AuthenticationFailed:
    """The 401 for a secret the lookup did not find: ``TokenExpired`` with the reason its
    holder can act on, or the same answer for revoked and unknown secrets."""
    refusal = token_refusal(key_hash)
    if refusal is None:
        return exceptions.AuthenticationFailed(REVOKED_MESSAGE)
    ended = refusal.ended_at.isoformat().replace("+00:00", "Z")
    if refusal.rotated:
        return TokenExpired(
            f"API token {refusal.name!r} was rotated: this is its previous secret, which "
            f"stopped working at {ended}. Use the secret the rotation issued.",
            {"expiredAt": ended, "rotated": True},
        )
    return TokenExpired(
        f"API token {refusal.name!r} expired at {ended}. Ask an operator for a new token.",
        {"expiredAt": ended},
    )


def bearer_key_hash(header: str) -> str | None:
    """The hash of the API token an ``Authorization`` header carries; None if it is not a
    bearer token (or there is none); AuthenticationFailed if it is one, malformed."""
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    raw = raw.strip()
    if not raw.startswith(TOKEN_PREFIX):
        raise exceptions.AuthenticationFailed("Malformed API token.")
    return hash_token(raw)


class TokenUser:
    """The request.user of a token call: authenticated, but not a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_superuser = False
    is_staff = False
    pk = None

    def __init__(self, token: ApiToken, token_check: TokenCheck | None = None):
        self.token = token
        # A remembered token not looked up for this call (BearerTokenAuthentication).
        self.token_check = token_check

    def __str__(self) -> str:
        return self.token.label


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """A bearer token, looked up by its hash; the lookup also scopes the connection to the
    token's workspace.

    A view that sets ``token_remembered`` (``portal.api.views.RememberedTokenView``: the
    recall endpoint, a session's turns) takes a token this process looked up before, on a
    connection it then scoped to the token's workspace, as remembered, without a statement of
    its own: its ``TokenCheck`` (``request.user.token_check``) goes to the call, whose first
    statement (the recall's read, the turn's locked read of its session) checks the token,
    and the connection's scope, in the same snapshot as everything it reads; a revoked token
    is refused before anything is recorded or returned; an error answered before that
    statement confirms the token first. Whatever does not
    fit (a method other than POST, a token not seen yet, another scope noted, a ``workspace``
    parameter, which would be looked up first) is looked up as usual.
    """

    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[TokenUser, ApiToken] | None:
        key_hash = self.key_hash(request)
        if key_hash is None:
            return None
        view = (getattr(request, "parser_context", None) or {}).get("view")
        if (
            getattr(view, "token_remembered", False)
            and request.method == "POST"
            and "workspace" not in request.query_params
        ):
            remembered = token_remembered(key_hash)
            if remembered is not None:
                token, check = remembered
                token_used(token.pk)
                return TokenUser(token, check), token
        return self.looked_up(key_hash)

    def key_hash(self, request: Any) -> str | None:
        """The hash of the request's bearer token; None without one."""
        return bearer_key_hash(authentication.get_authorization_header(request).decode("latin-1"))

    @staticmethod
    def looked_up(key_hash: str) -> tuple[TokenUser, ApiToken]:
        token = token_lookup(key_hash)
        if token is None:
            raise token_refused(key_hash)
        token_used(token.pk)
        return TokenUser(token), token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
