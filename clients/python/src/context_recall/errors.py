"""The API's errors as exceptions: one class per family of error codes.

Every error the API answers is ``{"error": {"code", "message", "details"}}`` with an HTTP
status; ``error_from`` turns it into the class of its family, each a subclass of
``ApiError`` carrying ``code``, ``message``, ``details`` and ``status``. Catch the family
(``PermissionDeniedError``) or, where the code matters, its narrower class
(``OutsideBindingError``, ``VersionConflictError``, ``TokenExpiredError``).
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from time import time
from typing import Any

import httpx


class ApiError(Exception):
    """An error the API answered: its ``code`` (``"NOT_FOUND"``), ``message`` (a sentence
    for a person), ``details`` (what the code documents) and HTTP ``status``."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        status: int,
        retry_after: float | None = None,
    ):
        super().__init__(f"{status} {code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.status = status
        # Seconds the server asked to wait before trying again (429 and 503), if it said.
        self.retry_after = retry_after


class AuthError(ApiError):
    """401: no token, a malformed one, or one revoked or unknown. Send a live token."""


class TokenExpiredError(AuthError):
    """401 ``TOKEN_EXPIRED``: the token expired, or this is a rotated token's previous
    secret after its grace (``details["expiredAt"]``, ``details.get("rotated")``)."""


class PermissionDeniedError(ApiError):
    """403: the token's role or scopes may not do this (``details["requiredRole"]``,
    ``details["requiredPermission"]`` or ``details["requiredScope"]``)."""


class OutsideBindingError(PermissionDeniedError):
    """403 ``OUTSIDE_TOKEN_BINDING``: the token is bound to other workloads or environments
    (``details["boundWorkloads"]``, ``details["boundEnvironments"]``, ``details["outside"]``)."""


class NotFoundError(ApiError):
    """404: no such resource in a workspace the token can see (or a page past the last)."""


class ConflictError(ApiError):
    """409: the resource's state refuses the change (``SESSION_ENDED``, ``ACTOR_ERASED``,
    ...); nothing was changed."""


class VersionConflictError(ConflictError):
    """409 ``VERSION_CONFLICT``: someone saved since the version the change was based on.
    Read again (``current_version``), merge, and save based on it."""

    @property
    def current_version(self) -> int | None:
        value = self.details.get("currentVersion")
        return int(value) if value is not None else None


class ValidationError(ApiError):
    """400, 413 or 422: the request is not valid (``details["fields"]`` names each field, for
    ``INVALID_REQUEST``) or asks what the rules refuse; nothing was done."""


class RateLimitedError(ApiError):
    """429 ``THROTTLED``: over the token's rate limit; ``retry_after`` says when to try
    again. Raised once the client's retries are spent (or when asked to wait too long)."""


class ServerError(ApiError):
    """5xx: ``DATABASE_UNAVAILABLE`` (503, nothing read or saved: try again after
    ``retry_after``) or a failure of the server."""


_BY_CODE: dict[str, type[ApiError]] = {
    "TOKEN_EXPIRED": TokenExpiredError,
    "OUTSIDE_TOKEN_BINDING": OutsideBindingError,
    "VERSION_CONFLICT": VersionConflictError,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    400: ValidationError,
    401: AuthError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: ValidationError,
    422: ValidationError,
    429: RateLimitedError,
}


def retry_after(response: httpx.Response) -> float | None:
    """The response's ``Retry-After`` in seconds (a number or an HTTP date); None without
    one, or with one that cannot be read."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, float(parsedate_to_datetime(value).timestamp()) - time())
    except (TypeError, ValueError):
        return None


def error_class(status: int, code: str) -> type[ApiError]:
    """The exception class of an error: by its code where one has its own class, else by
    its status."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError


def error_from(response: httpx.Response) -> ApiError:
    """The exception for an error response. A body that is not the API's error shape (a
    proxy's page) is reported by its status, as code ``HTTP_<status>``."""
    code, message = f"HTTP_{response.status_code}", response.reason_phrase
    details: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        code = error["code"]
        message = str(error.get("message", message))
        given = error.get("details")
        details = given if isinstance(given, dict) else {}
    cls = error_class(response.status_code, code)
    return cls(
        code, message, details, status=response.status_code, retry_after=retry_after(response)
    )
