"""Bearer-token authentication for the API. Tokens are looked up by their SHA-256."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from portal.models import TOKEN_PREFIX, ApiToken, hash_token


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
        token = (
            ApiToken.objects.select_related("workspace")
            .filter(key_hash=hash_token(raw), revoked_at__isnull=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        return TokenUser(token), token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
