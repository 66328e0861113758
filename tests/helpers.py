"""Assertions and clients shared by the API tests."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.crypto import get_random_string


def csrf_session(persona: Any) -> Any:
    """A session client that sends a valid CSRF cookie and header, as the portal's JS does."""
    client = persona.session()
    secret = get_random_string(32)
    client.cookies[settings.CSRF_COOKIE_NAME] = secret
    client.credentials(HTTP_X_CSRFTOKEN=secret)
    return client


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert list(body) == ["error"]
    assert set(body["error"]) == {"code", "message", "details"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]
