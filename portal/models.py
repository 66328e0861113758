from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    OPERATOR = "operator", "Operator"
    EDITOR = "editor", "Editor"
    VIEWER = "viewer", "Viewer"


# Higher rank = more rights; a check asks "at least this role".
ROLE_RANK: dict[str, int] = {Role.VIEWER: 1, Role.EDITOR: 2, Role.OPERATOR: 3}


def role_at_least(role: str | None, required: str) -> bool:
    return role is not None and ROLE_RANK.get(role, 0) >= ROLE_RANK[required]


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    workspace = models.ForeignKey(
        "policies.Workspace", on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.workspace} ({self.role})"


TOKEN_PREFIX = "crp_"


def hash_token(raw: str) -> str:
    # Tokens are 256-bit random strings, so a fast hash is enough (no need for a slow KDF).
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A per-workspace API token. Only its SHA-256 is stored; the raw value is shown once."""

    workspace = models.ForeignKey(
        "policies.Workspace", on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=20, choices=Role.choices)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def label(self) -> str:
        return f"token:{self.name}"

    @staticmethod
    def generate() -> str:
        return TOKEN_PREFIX + secrets.token_urlsafe(32)
