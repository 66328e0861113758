"""Domain errors raised by services and mapped once to HTTP (API) or form errors (pages)."""

from __future__ import annotations

from typing import Any

from portal.registry import registry_put


class DomainError(Exception):
    """A user-caused error with a stable code, a readable message and structured details."""

    status = 400

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


class NotFoundError(DomainError):
    status = 404

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__("NOT_FOUND", message, details)


class ForbiddenError(DomainError):
    status = 403

    def __init__(
        self,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        code: str = "PERMISSION_DENIED",
    ):
        super().__init__(code, message, details)


class ConflictError(DomainError):
    status = 409

    def __init__(
        self, message: str, details: dict[str, Any] | None = None, *, code: str = "CONFLICT"
    ):
        super().__init__(code, message, details)


class UnprocessableError(DomainError):
    """A well-formed request the data or a rule across its values refuses (a budget the
    planner cannot honour, weights that do not add up, a query the workspace never kept):
    422, as opposed to a malformed request (400)."""

    status = 422


class VersionConflict(DomainError):
    """A save based on a version that is no longer the current one (someone saved since)."""

    status = 409

    def __init__(self, *, what: str, current: int, base: int):
        super().__init__(
            "VERSION_CONFLICT",
            f"{what} is at version {current}, but this save was based on version {base}: "
            f"someone saved since. Nothing was saved; reload version {current}, reapply the "
            "change and save again.",
            {"currentVersion": current, "baseVersion": base},
        )
        self.current = current
        self.base = base


class ValidationFailed(DomainError):
    def __init__(self, fields: dict[str, str], message: str = "The request is not valid."):
        super().__init__("INVALID_REQUEST", message, {"fields": fields})


# Errors raised by pure modules (no Django import, so not DomainError subclasses) that carry
# a stable ``code``, a ``message`` and ``details``: each app registers its own class with the
# HTTP status of each code (the pure module itself knows nothing of HTTP), so this ground
# floor maps them without importing the apps above it.
_CODED_ERRORS: dict[type[Exception], tuple[dict[str, int], int]] = {}


def coded_error_register(
    error: type[Exception], statuses: dict[str, int], *, default: int = 400
) -> None:
    registry_put(_CODED_ERRORS, error, (statuses, default), what="coded error")


def as_domain_error(exc: Exception) -> DomainError | None:
    """``exc`` as a DomainError with its status, if it is one or a registered coded error."""
    if isinstance(exc, DomainError):
        return exc
    for error, (statuses, default) in _CODED_ERRORS.items():
        if isinstance(exc, error):
            coded: Any = exc  # registered because it has a code, a message and details
            domain = DomainError(coded.code, coded.message, coded.details)
            domain.status = statuses.get(coded.code, default)
            return domain
    return None
