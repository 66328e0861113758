"""Python client for the Context Recall Governance Portal's API.

    from context_recall import Client

    with Client("http://127.0.0.1:8000", token="crp_...") as client:
        envelope = client.recall(
            "user:ada", workload_id=WORKLOAD, environment="prod", query="release notes"
        )

``AsyncClient`` has the same methods, awaited. Errors raise ``ApiError``'s subclasses
(``errors``); bodies are typed (``models``).
"""

from __future__ import annotations

from context_recall.client import AsyncClient, Client, Retry
from context_recall.errors import (
    ApiError,
    AuthError,
    ConflictError,
    NotFoundError,
    OutsideBindingError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TokenExpiredError,
    ValidationError,
    VersionConflictError,
)

__all__ = [
    "ApiError",
    "AsyncClient",
    "AuthError",
    "Client",
    "ConflictError",
    "NotFoundError",
    "OutsideBindingError",
    "PermissionDeniedError",
    "RateLimitedError",
    "Retry",
    "ServerError",
    "TokenExpiredError",
    "ValidationError",
    "VersionConflictError",
]
