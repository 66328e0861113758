from __future__ import annotations

from typing import Any

from rest_framework import serializers

from policies.models import Workload, WorkloadPolicyVersion, Workspace, WorkspacePolicyVersion
from portal.api.fields import StrictCharField, StrictRegexField


class WorkspaceSerializer(serializers.ModelSerializer):
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    environments = serializers.SerializerMethodField()

    class Meta:
        model = Workspace
        fields = ["slug", "name", "environments", "createdAt"]

    def get_environments(self, workspace: Workspace) -> list[str]:
        return [env.slug for env in workspace.environments.all()]


class WorkspaceCreateSerializer(serializers.Serializer):
    slug = StrictRegexField(
        r"^[a-z0-9][a-z0-9-]{0,49}$",
        error_messages={"invalid": "Use 1-50 lowercase letters, digits or dashes."},
    )
    name = StrictCharField(max_length=200)


class WorkspaceUpdateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200)


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

    class Meta:
        model = Workload
        fields = ["id", "workspace", "name", "description", "createdAt"]


class WorkloadWriteSerializer(serializers.Serializer):
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


class EffectivePolicySerializer(serializers.Serializer):
    workloadId = serializers.UUIDField()
    environment = serializers.CharField(allow_null=True)
    policy = serializers.JSONField()
    relaxableAxes = serializers.ListField(child=serializers.CharField())
    effectivePolicyHash = serializers.CharField()
    effectiveBudgetHash = serializers.CharField()
    compliant = serializers.BooleanField()
    relaxingAxes = serializers.ListField(child=serializers.CharField())
    floorVersion = serializers.IntegerField()
    workloadPolicyVersion = serializers.IntegerField(allow_null=True)
