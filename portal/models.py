"""Tenancy: workspaces and their environments, members, roles and API tokens.

The ground floor: every app above keys its rows on a workspace; nothing here imports them.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

slug_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9-]{0,49}$",
    "Use 1-50 lowercase letters, digits or dashes, starting with a letter or digit.",
)

DEFAULT_ENVIRONMENTS = ("dev", "staging", "prod")


class Workspace(models.Model):
    """A tenant: owns workloads, actors, memories, members, tokens and the operator floor."""

    slug = models.SlugField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Whether context.assembled events keep the query text (it may be personal data), so a
    # replay needs no pasted query. Off by default; operators switch it (audited).
    store_queries = models.BooleanField(default=False)
    # Recalls a minute per API token of this workspace; None: the RECALL_RATE_PER_MINUTE
    # setting (portal.throttling).
    recall_rate_per_minute = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["slug"]
        db_table = "policies_workspace"  # its table from before tenancy moved here

    def __str__(self) -> str:
        return self.slug


class Environment(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="environments")
    slug = models.SlugField(max_length=50, validators=[slug_validator])

    class Meta:
        ordering = ["slug"]
        db_table = "policies_environment"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "slug"], name="environment_unique_slug")
        ]

    def __str__(self) -> str:
        return self.slug


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
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
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

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_tokens")
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
