"""Assertions and clients shared by the API tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils.crypto import get_random_string
from psycopg import sql

from portal.db.roles import owner_settings


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


@contextmanager
def database_owner() -> Iterator[None]:
    """Run the block's statements on the test's own connection as the database owner.

    The application's role may not change or delete audit rows (portal/db/roles.py); tests
    that play someone with the owner's access switch to it here. Inside a savepoint, so a
    failing statement leaves the test's transaction usable; the role is reset on the way out.
    The test cluster alone lets the application role switch (tests/conftest.py).
    """
    owner = owner_settings(settings.DATABASES["default"])
    with transaction.atomic(), connection.cursor() as cursor:
        if owner is None:  # one role does both (DATABASE_URL without DATABASE_OWNER_URL)
            yield
            return
        cursor.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner["USER"])))
        yield
        cursor.execute("RESET ROLE")
