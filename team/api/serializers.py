from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.api.fields import (
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictRegexField,
    StrictUUIDField,
)
from portal.api.strict import StrictSerializer
from portal.models import MEMBER_ROLES, ApiToken, Membership, Role
from portal.permissions import AGENT_SCOPES
from portal.tokens import token_last_used
from team.selectors import token_previous_live, token_status
from team.services import NAME_MAX, NAME_PATTERN, RATE_MAX, ROTATION_GRACE_MAX


class TokenSerializer(serializers.Serializer):
    """A token as listed: never its secret, only its first characters (``prefix``)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    role = StrictChoiceField(choices=Role.choices)
    scopes = serializers.ListField(
        child=serializers.CharField(),
        help_text="What an agent token may do (empty for any other role: its role decides).",
    )
    boundWorkloads = serializers.ListField(
        child=serializers.UUIDField(),
        source="bound_workloads",
        help_text="The workloads an agent token may recall for; empty: any.",
    )
    boundEnvironments = serializers.ListField(
        child=serializers.CharField(),
        source="bound_environments",
        help_text="The environments an agent token may recall in; empty: any.",
    )
    prefix = serializers.CharField(help_text="The secret's first characters.")
    status = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    lastUsedAt = serializers.SerializerMethodField(
        help_text="Written in batches: up to TOKEN_LAST_USED_SECONDS behind."
    )
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    rotatedAt = serializers.DateTimeField(source="rotated_at", allow_null=True)
    previousSecretValidUntil = serializers.SerializerMethodField(
        help_text="While a rotation's grace lasts: until when the previous secret works."
    )
    apiRatePerMinute = serializers.IntegerField(source="api_rate_per_minute", allow_null=True)
    recallRatePerMinute = serializers.IntegerField(source="recall_rate_per_minute", allow_null=True)

    @extend_schema_field({"type": "string", "enum": ["active", "expired", "revoked"]})
    def get_status(self, token: ApiToken) -> str:
        return token_status(token)

    @extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
    def get_lastUsedAt(self, token: ApiToken) -> Any:
        used = token_last_used(token)
        return None if used is None else serializers.DateTimeField().to_representation(used)

    @extend_schema_field({"type": "string", "format": "date-time", "nullable": True})
    def get_previousSecretValidUntil(self, token: ApiToken) -> Any:
        until = token.previous_valid_until
        if until is None or not token_previous_live(token):
            return None
        return serializers.DateTimeField().to_representation(until)


class TokenSecretSerializer(TokenSerializer):
    """A token just issued or rotated, with its secret: shown this once."""

    secret = serializers.SerializerMethodField(
        help_text="The token itself, for `Authorization: Bearer …`: shown this once, never "
        "again (only its hash is stored)."
    )

    def get_secret(self, token: ApiToken) -> str:
        return str(self.context["secret"])


class TokenIssueSerializer(StrictSerializer):
    name = StrictRegexField(
        NAME_PATTERN,
        max_length=NAME_MAX,
        error_messages={"invalid": "A name that is not blank, with no control character."},
    )
    role = StrictChoiceField(choices=Role.choices)
    scopes = serializers.ListField(
        child=StrictChoiceField(choices=list(AGENT_SCOPES)),
        required=False,
        min_length=1,
        help_text="An agent token's scopes; default: all of them. Other roles take none.",
    )
    boundWorkloads = serializers.ListField(
        child=StrictUUIDField(),
        required=False,
        help_text="Bind an agent token to these workloads (recall for another: 403 "
        "OUTSIDE_TOKEN_BINDING); default: none, any workload.",
    )
    boundEnvironments = serializers.ListField(
        child=StrictCharField(max_length=50),
        required=False,
        help_text="Bind an agent token to these environments; default: none, any.",
    )
    expiresAt = serializers.DateTimeField(
        required=False, allow_null=True, help_text="When the token stops working (401 "
        "TOKEN_EXPIRED from then on); null or left out: never."
    )  # fmt: skip
    apiRatePerMinute = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=RATE_MAX,
        help_text="Calls a minute for this token; null: API_RATE_PER_MINUTE.",
    )  # fmt: skip
    recallRatePerMinute = StrictIntegerField(
        required=False, allow_null=True, min_value=1, max_value=RATE_MAX,
        help_text="Recalls a minute for this token; null: the workspace's limit.",
    )  # fmt: skip

    def grant(self) -> dict[str, Any]:
        """The service's keyword arguments."""
        data = self.validated_data
        return {
            "name": data["name"],
            "role": data["role"],
            "scopes": data.get("scopes"),
            "workloads": data.get("boundWorkloads", []),
            "environments": data.get("boundEnvironments", []),
            "expires_at": data.get("expiresAt"),
            "api_rate_per_minute": data.get("apiRatePerMinute"),
            "recall_rate_per_minute": data.get("recallRatePerMinute"),
        }


class TokenRotateSerializer(StrictSerializer):
    graceSeconds = StrictIntegerField(
        required=False,
        min_value=0,
        max_value=int(ROTATION_GRACE_MAX.total_seconds()),
        help_text="How long the current secret keeps working after the rotation; default 0: "
        "it stops at once.",
    )


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = StrictChoiceField(choices=MEMBER_ROLES)

    def to_representation(self, membership: Membership) -> dict[str, Any]:
        return {"username": membership.user.get_username(), "role": membership.role}


class MemberAddSerializer(StrictSerializer):
    username = StrictCharField(max_length=150)
    role = StrictChoiceField(choices=MEMBER_ROLES)


class MemberRoleSerializer(StrictSerializer):
    min_fields = 1  # a PATCH's schema makes every field optional: its one field is needed

    role = StrictChoiceField(choices=MEMBER_ROLES)
