from __future__ import annotations

from typing import Any

from rest_framework import serializers

from audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    occurredAt = serializers.DateTimeField(source="occurred_at")
    workspace: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    workloadId = serializers.UUIDField(source="workload_id", allow_null=True)
    environment = serializers.SerializerMethodField()
    actorId = serializers.SerializerMethodField()
    prevHash = serializers.CharField(source="prev_hash")

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "type",
            "occurredAt",
            "workspace",
            "author",
            "workloadId",
            "environment",
            "actorId",
            "payload",
            "prevHash",
            "hash",
            "lane",
        ]

    def get_environment(self, event: AuditEvent) -> str | None:
        return event.environment or None

    def get_actorId(self, event: AuditEvent) -> str | None:
        return event.actor_id or None


class ChainVerdictSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    checked = serializers.IntegerField()
    firstBrokenId = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
