"""The maintenance API's shapes (camelCase on the wire)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from maintenance.lifecycle import SWEEP_SUMMARY
from maintenance.models import (
    LifecycleSettingsVersion,
    MaintenanceItem,
    MaintenanceRun,
    Mode,
    RevertOutcome,
)
from maintenance.reverts import SKIP_REASONS, RevertPlan
from maintenance.services import IDS_IN_EVENT
from maintenance.sweeps import SWEEP_CLASSES
from portal.api.fields import StrictChoiceField


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
    revertedAt = serializers.DateTimeField(
        source="reverted_at", allow_null=True, help_text="When the run was reverted (once)."
    )
    revertedBy = serializers.CharField(source="reverted_by")
    revertAuditEventId = serializers.IntegerField(
        source="revert_event_id", allow_null=True, help_text="Its maintenance.reverted event."
    )
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
        if run.mode == Mode.EXECUTE and SWEEP_CLASSES[run.sweep].revertible:
            links["revert"] = reverse("api-maintenance-run-revert", args=[run.pk])
        if run.revert_event_id:
            links["revertAuditEvent"] = reverse("api-audit-event", args=[run.revert_event_id])
        if run.sweep == "retention" and run.mode == "execute":
            links["archive"] = reverse("api-maintenance-run-archive", args=[run.pk])
            links["manifest"] = reverse("api-maintenance-run-manifest", args=[run.pk])
        return links


class ItemSerializer(serializers.Serializer):
    """An item of a run. A ``sessions`` run lists sessions: ``sessionId`` names each, and
    ``memoryId`` is null (give the serializer ``context={"sweep": run.sweep}``)."""

    memoryId = serializers.SerializerMethodField()
    sessionId = serializers.SerializerMethodField()
    actorId = serializers.CharField(source="actor_id")
    reason = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    details = serializers.JSONField()
    outcome = serializers.CharField(help_text="listed, applied or skipped")
    note = serializers.CharField(help_text="Why it was skipped")
    before = serializers.JSONField(
        allow_null=True,
        help_text="Applied: the columns the run wrote, as they were (null: not applied, or "
        "applied before runs recorded them).",
    )
    after = serializers.JSONField(allow_null=True, help_text="Applied: as the run left them.")
    revertOutcome = StrictChoiceField(
        source="revert_outcome",
        choices=["", *RevertOutcome.values],
        help_text="Once the run is reverted: reverted or skipped.",
    )
    revertReason = StrictChoiceField(
        source="revert_reason",
        choices=["", *SKIP_REASONS],
        help_text="Why a revert skipped it: "
        + "; ".join(f"{k}: {v}" for k, v in SKIP_REASONS.items()),
    )

    class Meta:
        model = MaintenanceItem

    def get_memoryId(self, item: MaintenanceItem) -> str | None:
        return None if self.context.get("sweep") == "sessions" else str(item.memory_id)

    def get_sessionId(self, item: MaintenanceItem) -> str | None:
        return str(item.memory_id) if self.context.get("sweep") == "sessions" else None


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


class RevertCountsSerializer(serializers.Serializer):
    changed = serializers.IntegerField(help_text="Memories the run changed.")
    reverted = serializers.IntegerField(
        help_text="Put back (preview: that an execute would put back now)."
    )
    skipped = serializers.IntegerField(help_text="Left as they are, each with why.")


class RevertSkipSerializer(serializers.Serializer):
    memoryId = serializers.CharField()
    reason = serializers.CharField(help_text=", ".join(SKIP_REASONS))
    message = serializers.CharField()


class RevertSerializer(serializers.Serializer):
    runId = serializers.IntegerField()
    sweep = serializers.CharField()
    mode = StrictChoiceField(
        choices=Mode.values, help_text="preview: what an execute would do; nothing was written."
    )
    counts = RevertCountsSerializer()
    # The wire name, as in the event; DRF's metaclass moves it out of the class attributes.
    fields = serializers.ListField(  # type: ignore[assignment]
        child=serializers.CharField(), help_text="The memory columns a revert puts back."
    )
    revertedIds = serializers.ListField(
        child=serializers.CharField(), help_text=f"The first {IDS_IN_EVENT:,}."
    )
    revertedIdsTruncated = serializers.BooleanField()
    skipped = RevertSkipSerializer(many=True, help_text=f"The first {IDS_IN_EVENT:,}.")
    skippedTruncated = serializers.BooleanField()
    revertedAt = serializers.DateTimeField(allow_null=True)
    revertedBy = serializers.CharField(allow_blank=True)
    auditEventId = serializers.IntegerField(allow_null=True)
    links = serializers.DictField(child=serializers.CharField())


def revert_data(plan: RevertPlan) -> dict[str, Any]:
    """A revert's preview or outcome, in ``RevertSerializer``'s shape."""
    run = plan.run
    links = {
        "run": reverse("api-maintenance-run", args=[run.pk]),
        "items": reverse("api-maintenance-run-items", args=[run.pk]),
        "page": reverse("maintenance:run", args=[run.workspace.slug, run.pk]),
    }
    if plan.event_id:
        links["auditEvent"] = reverse("api-audit-event", args=[plan.event_id])
    return {
        "runId": run.pk,
        "sweep": run.sweep,
        "mode": Mode.EXECUTE if plan.executed else Mode.PREVIEW,
        "counts": {
            "changed": plan.changed,
            "reverted": len(plan.restore),
            "skipped": len(plan.skipped),
        },
        "fields": plan.fields,
        "revertedIds": [str(pk) for pk in plan.restore[:IDS_IN_EVENT]],
        "revertedIdsTruncated": len(plan.restore) > IDS_IN_EVENT,
        "skipped": [
            {"memoryId": str(skip.memory_id), "reason": skip.reason, "message": skip.message}
            for skip in plan.skipped[:IDS_IN_EVENT]
        ],
        "skippedTruncated": len(plan.skipped) > IDS_IN_EVENT,
        "revertedAt": run.reverted_at if plan.executed else None,
        "revertedBy": run.reverted_by if plan.executed else "",
        "auditEventId": plan.event_id,
        "links": links,
    }
