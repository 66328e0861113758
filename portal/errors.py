"""Domain errors raised by services and mapped once to HTTP (API) or form errors (pages)."""

from __future__ import annotations

from typing import Any


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

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__("PERMISSION_DENIED", message, details)


class ConflictError(DomainError):
    status = 409

    def __init__(self, message: str, details: dict[str, Any] | None = None):
        super().__init__("CONFLICT", message, details)


class ValidationFailed(DomainError):
    def __init__(self, fields: dict[str, str], message: str = "The request is not valid."):
        super().__init__("INVALID_REQUEST", message, {"fields": fields})


# HTTP status per policy-algebra error code (the algebra itself knows nothing of HTTP).
POLICY_ERROR_STATUS = {
    "INVALID_POLICY": 400,
    "BUDGET_NOT_HONOURABLE": 400,
    "WORKLOAD_RELAXES_OPERATOR_FLOOR": 422,
    "USER_OVERRIDE_NOT_PERMITTED": 403,
}
