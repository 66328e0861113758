"""Tenancy: workspaces and their environments, members, roles and API tokens.

The ground floor: every app above keys its rows on a workspace; nothing here imports them.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models

from portal import permissions

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
    """Who may do what: the table is ``portal.permissions``. ``agent`` is a token's only."""

    OPERATOR = permissions.OPERATOR, "Operator"
    EDITOR = permissions.EDITOR, "Editor"
    VIEWER = permissions.VIEWER, "Viewer"
    AGENT = permissions.AGENT, "Agent"


# The roles a person may hold in a workspace (a membership): every role but the agent's.
MEMBER_ROLES = [(value, label) for value, label in Role.choices if value != Role.AGENT]

role_at_least = permissions.role_at_least


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=MEMBER_ROLES)

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
    """A per-workspace API token. Only its SHA-256 is stored; the raw value is shown once.

    An agent token (role ``agent``) holds its ``scopes`` (``portal.permissions``) and may be
    bound to workloads and environments (empty: any). Any token may expire, and have its own
    rate limits (None: the workspace's, then the settings'). Rotated, a token gets a new
    secret (``key_hash``) while its previous one (``previous_key_hash``) still works until
    ``previous_valid_until``.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=20, choices=Role.choices)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = ArrayField(models.CharField(max_length=30), default=list, blank=True)
    bound_workloads = ArrayField(models.UUIDField(), default=list, blank=True)
    bound_environments = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    api_rate_per_minute = models.PositiveIntegerField(null=True, blank=True)
    recall_rate_per_minute = models.PositiveIntegerField(null=True, blank=True)
    # Kept without a write per call: noted in memory and written in batches (portal.tokens).
    last_used_at = models.DateTimeField(null=True, blank=True)
    previous_key_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    previous_valid_until = models.DateTimeField(null=True, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def label(self) -> str:
        return f"token:{self.name}"

    @property
    def is_agent(self) -> bool:
        return self.role == Role.AGENT

    @staticmethod
    def generate() -> str:
        return TOKEN_PREFIX + secrets.token_urlsafe(32)
