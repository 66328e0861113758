from __future__ import annotations

from typing import Any

from rest_framework import serializers

from audit.models import AuditEvent, EventType
from audit.presenters import stored_query


class AuditEventSerializer(serializers.ModelSerializer):
    occurredAt = serializers.DateTimeField(source="occurred_at")
    workspace: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    workloadId = serializers.UUIDField(source="workload_id", allow_null=True)
    environment = serializers.SerializerMethodField()
    actorId = serializers.SerializerMethodField()
    prevHash = serializers.CharField(source="prev_hash")
    query = serializers.SerializerMethodField(
        help_text="A context.assembled event's query text, kept beside the event when the "
        "workspace stores queries (outside its hash: the payload's queryHash is hashed). "
        "null when it was not stored or its actor was erased."
    )

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
            "query",
            "prevHash",
            "hash",
            "lane",
        ]

    def get_environment(self, event: AuditEvent) -> str | None:
        return event.environment or None

    def get_actorId(self, event: AuditEvent) -> str | None:
        return event.actor_id or None

    def get_query(self, event: AuditEvent) -> str | None:
        return stored_query(event) if event.type == EventType.ASSEMBLED else None


class ChainVerdictSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    checked = serializers.IntegerField()
    firstBrokenId = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
