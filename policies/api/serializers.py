from __future__ import annotations

from typing import Any

from rest_framework import serializers

from policies import conflicts
from policies.algebra import SEGMENT_KINDS
from policies.axes import AXES
from policies.models import Workload, WorkloadPolicyVersion, WorkspacePolicyVersion
from portal.api.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictRegexField,
)
from portal.api.strict import StrictSerializer
from portal.models import Workspace


class WorkspaceSerializer(serializers.ModelSerializer):
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    environments = serializers.SerializerMethodField()
    storeQueries = serializers.BooleanField(source="store_queries", read_only=True)
    recallRatePerMinute = serializers.IntegerField(
        source="recall_rate_per_minute", read_only=True, allow_null=True
    )

    class Meta:
        model = Workspace
        fields = [
            "slug", "name", "environments", "storeQueries", "recallRatePerMinute", "createdAt",
        ]  # fmt: skip

    def get_environments(self, workspace: Workspace) -> list[str]:
        return [env.slug for env in workspace.environments.all()]


class WorkspaceCreateSerializer(StrictSerializer):
    slug = StrictRegexField(
        r"^[a-z0-9][a-z0-9-]{0,49}$",
        error_messages={"invalid": "Use 1-50 lowercase letters, digits or dashes."},
    )
    name = StrictCharField(max_length=200)


class WorkspaceUpdateSerializer(StrictSerializer):
    min_fields = 1  # a PATCH changing nothing is refused (the schema's minProperties)

    name = StrictCharField(max_length=200, required=False)
    storeQueries = StrictBooleanField(
        required=False,
        help_text="Keep each recall's query text in its context.assembled event, so a replay "
        "needs no pasted query. Off by default (a query may be personal data).",
    )
    recallRatePerMinute = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=1_000_000,
        help_text="Recalls a minute per API token of this workspace (429 THROTTLED beyond); "
        "null: the server's default (RECALL_RATE_PER_MINUTE).",
    )


class WorkspacePolicySerializer(serializers.ModelSerializer):
    policy = serializers.JSONField(source="document")
    relaxableAxes = serializers.JSONField(source="relaxable_axes")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = WorkspacePolicyVersion
        fields = ["version", "policy", "relaxableAxes", "author", "comment", "createdAt"]


class WorkloadSerializer(serializers.ModelSerializer):
    workspace: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    archivedAt = serializers.DateTimeField(source="archived_at", read_only=True, allow_null=True)

    class Meta:
        model = Workload
        fields = ["id", "workspace", "name", "description", "createdAt", "archivedAt"]


class WorkloadWriteSerializer(StrictSerializer):
    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True, default="")


class WorkloadPolicySerializer(serializers.ModelSerializer):
    workloadId = serializers.UUIDField(source="workload_id")
    environment = serializers.SerializerMethodField()
    policy = serializers.JSONField(source="document")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = WorkloadPolicyVersion
        fields = [
            "workloadId",
            "environment",
            "version",
            "policy",
            "author",
            "comment",
            "createdAt",
        ]

    def get_environment(self, version: WorkloadPolicyVersion) -> str | None:
        return version.environment or None


class PolicyConflictSerializer(serializers.Serializer):
    """One place where a later floor overrules a workload policy (policies.conflicts)."""

    code = StrictChoiceField(choices=conflicts.CODES)
    axis = StrictChoiceField(choices=list(AXES))
    # Not a ChoiceField: its enum would duplicate SegmentKindEnum under another name.
    kind = serializers.CharField(
        allow_null=True,
        help_text=f"The segment kind ({', '.join(SEGMENT_KINDS)}) for a per-kind axis, else null.",
    )
    workloadValue = serializers.JSONField(
        allow_null=True, help_text="What narrowing alone gave: the workload's (or inherited) value."
    )
    floorValue = serializers.JSONField(allow_null=True, help_text="The floor's entry that wins.")
    effectiveValue = serializers.JSONField(
        allow_null=True, help_text="What the effective policy uses instead."
    )
    message = serializers.CharField()


class EffectivePolicySerializer(serializers.Serializer):
    workloadId = serializers.UUIDField()
    environment = serializers.CharField(allow_null=True)
    policy = serializers.JSONField()
    relaxableAxes = serializers.ListField(child=serializers.CharField())
    effectivePolicyHash = serializers.CharField()
    effectiveBudgetHash = serializers.CharField()
    compliant = serializers.BooleanField(
        help_text="True when the workload policy applies as written (nothing clamped)."
    )
    relaxingAxes = serializers.ListField(child=serializers.CharField())
    conflicts = PolicyConflictSerializer(many=True)
    floorVersion = serializers.IntegerField()
    workloadPolicyVersion = serializers.IntegerField(allow_null=True)
