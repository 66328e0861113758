"""The maintenance API's shapes (camelCase on the wire)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from maintenance.lifecycle import SWEEP_SUMMARY
from maintenance.models import LifecycleSettingsVersion, MaintenanceItem, MaintenanceRun


class LifecycleSettingsSerializer(serializers.Serializer):
    version = serializers.IntegerField(help_text="0: the defaults, never saved.")
    settings = serializers.JSONField(source="document")
    comment = serializers.CharField()
    author = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at", allow_null=True)

    class Meta:
        model = LifecycleSettingsVersion


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workspace = serializers.CharField(source="workspace.slug")
    sweep = serializers.CharField()
    sweepSummary = serializers.SerializerMethodField()
    mode = serializers.CharField()
    status = serializers.CharField(
        help_text="queued, running, succeeded, failed, refused or cancelled"
    )
    trigger = serializers.CharField(help_text="manual or schedule")
    preview = serializers.IntegerField(source="preview_id", allow_null=True)
    settingsVersion = serializers.IntegerField(source="settings_version")
    embedder = serializers.CharField()
    progress = serializers.SerializerMethodField()
    counts = serializers.SerializerMethodField()
    confirm = serializers.IntegerField(allow_null=True)
    error = serializers.SerializerMethodField()
    author = serializers.CharField()
    asOf = serializers.DateTimeField(source="as_of", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    auditEventId = serializers.IntegerField(source="event_id", allow_null=True)
    links = serializers.SerializerMethodField()

    def get_sweepSummary(self, run: MaintenanceRun) -> str:
        return SWEEP_SUMMARY[run.sweep]

    def get_progress(self, run: MaintenanceRun) -> dict[str, int]:
        return {"done": run.done, "total": run.total, "percent": run.percent}

    def get_counts(self, run: MaintenanceRun) -> dict[str, int]:
        return {"listed": run.total, "applied": run.applied, "skipped": run.skipped}

    def get_error(self, run: MaintenanceRun) -> dict[str, str] | None:
        if not run.error and not run.error_code:
            return None
        return {"code": run.error_code, "message": run.error}

    def get_links(self, run: MaintenanceRun) -> dict[str, Any]:
        links = {
            "self": reverse("api-maintenance-run", args=[run.pk]),
            "items": reverse("api-maintenance-run-items", args=[run.pk]),
            "page": reverse("maintenance:run", args=[run.workspace.slug, run.pk]),
        }
        if run.event_id:
            links["auditEvent"] = reverse("api-audit-event", args=[run.event_id])
        if run.sweep == "retention" and run.mode == "execute":
            links["archive"] = reverse("api-maintenance-run-archive", args=[run.pk])
            links["manifest"] = reverse("api-maintenance-run-manifest", args=[run.pk])
        return links


class ItemSerializer(serializers.Serializer):
    memoryId = serializers.CharField(source="memory_id")
    actorId = serializers.CharField(source="actor_id")
    reason = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    details = serializers.JSONField()
    outcome = serializers.CharField(help_text="listed, applied or skipped")
    note = serializers.CharField(help_text="Why it was skipped")

    class Meta:
        model = MaintenanceItem


class RestoreSerializer(serializers.Serializer):
    restored = serializers.IntegerField()
    alreadyPresent = serializers.IntegerField(source="already_present")


class MemoryLifecycleSerializer(serializers.Serializer):
    memoryId = serializers.CharField()
    tier = serializers.CharField()
    decayScore = serializers.FloatField()
    decays = serializers.BooleanField(help_text="False: the decay sweep leaves it alone.")
    staleAt = serializers.DateTimeField(
        allow_null=True, help_text="When the decay sweep would first make it stale."
    )
    promotion = serializers.JSONField()
    settingsVersion = serializers.IntegerField()
    embedded = serializers.BooleanField()
