"""Lifecycle settings versions, maintenance runs, their items and retention archives."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from maintenance.lifecycle import SWEEPS
from policies.models import PolicyVersionBase


class LifecycleSettingsVersion(PolicyVersionBase):
    """A workspace's lifecycle settings (``maintenance.lifecycle.SETTINGS``), versioned like
    the policies: a save always adds a row; rows are never edited."""

    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.CASCADE, related_name="lifecycle_versions"
    )

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "version"], name="lifecycle_settings_unique_version"
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="lifecycle_settings_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"lifecycle settings v{self.version} of workspace {self.workspace_id}"


class Mode(models.TextChoices):
    PREVIEW = "preview"
    EXECUTE = "execute"


class Status(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REFUSED = "refused"  # a preflight check said no before anything changed
    CANCELLED = "cancelled"


ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)
FINISHED_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.REFUSED, Status.CANCELLED)


class Trigger(models.TextChoices):
    MANUAL = "manual"
    SCHEDULE = "schedule"


class MaintenanceRun(models.Model):
    """One preview or execute of one sweep over one workspace.

    A preview lists, as items, what the sweep would change and writes no memory. An execute
    changes exactly the items it lists (copied from the preview it executes, or listed by
    itself first), in batches, each batch in its own transaction; rows that changed since
    they were listed are skipped. Progress is ``done`` of ``total`` items.
    """

    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.CASCADE, related_name="maintenance_runs"
    )
    sweep = models.CharField(max_length=20, choices=[(s, s) for s in SWEEPS])
    mode = models.CharField(max_length=10, choices=Mode.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    preview = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="executions"
    )
    settings_version = models.PositiveIntegerField()
    settings = models.JSONField()
    embedder = models.CharField(max_length=100)  # the embedder the run compared vectors with
    # The moment the listing judged the memories at (time-based rules: decay, expiry, ...).
    as_of = models.DateTimeField(null=True, blank=True)
    listed_at = models.DateTimeField(null=True, blank=True)  # the listing is complete
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    applied = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    confirm = models.PositiveIntegerField(null=True, blank=True)  # the count the caller confirmed
    error_code = models.CharField(max_length=50, blank=True, default="")
    error = models.TextField(blank=True, default="")
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    event_id = models.BigIntegerField(null=True, blank=True)  # its audit event
    # A retention run's archive is deleted after the workspace's archiveRetentionDays.
    archive_purged_at = models.DateTimeField(null=True, blank=True)
    # An execute is reverted at most once (maintenance.reverts); its items say what came back.
    reverted_at = models.DateTimeField(null=True, blank=True)
    reverted_by = models.CharField(max_length=200, blank=True, default="", db_default="")
    revert_event_id = models.BigIntegerField(null=True, blank=True)  # its audit event

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["workspace", "sweep", "-id"], name="maintenance_run_sweep_idx"),
            models.Index(fields=["workspace", "-id"], name="maintenance_run_ws_idx"),
        ]
        constraints = [
            # The database refuses a second execute of a workspace while one is in progress.
            models.UniqueConstraint(
                fields=["workspace"],
                condition=Q(mode="execute", status__in=["queued", "running"]),
                name="maintenance_one_execute_at_a_time",
            ),
            # A preview is executed once; an execute that was refused, cancelled or failed
            # leaves it usable (rows it did change are skipped by the next one).
            models.UniqueConstraint(
                fields=["preview"],
                condition=Q(status__in=["queued", "running", "succeeded"]),
                name="maintenance_preview_executed_once",
            ),
            models.CheckConstraint(
                condition=Q(mode="preview", preview__isnull=True) | Q(mode="execute"),
                name="maintenance_preview_has_no_preview",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sweep} {self.mode} #{self.pk} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def percent(self) -> int:
        if self.finished and self.status == Status.SUCCEEDED:
            return 100
        return int(100 * self.done / self.total) if self.total else 0


class Outcome(models.TextChoices):
    LISTED = "listed"  # in a preview; in an execute, not processed yet
    APPLIED = "applied"
    SKIPPED = "skipped"


class RevertOutcome(models.TextChoices):
    REVERTED = "reverted"
    SKIPPED = "skipped"


class MaintenanceItem(models.Model):
    """One memory a run lists, with why and, once executed, what happened to it.

    ``fingerprint`` is a hash of the memory's state when it was listed: an execute applies
    the change only if the memory still has it. ``memory_id`` is a plain value: a retention
    run deletes the memory it names.

    ``before`` and ``after`` hold the columns the execute wrote (its sweep's
    ``state_columns``) as they were and as it left them, recorded in the transaction that
    changed the row: a revert puts ``before`` back where the row still holds ``after``.
    Null for an item not applied, or applied before executes recorded them (such a change
    cannot be reverted).
    """

    run = models.ForeignKey(MaintenanceRun, on_delete=models.CASCADE, related_name="items")
    memory_id = models.BigIntegerField()
    actor_id = models.CharField(max_length=250)
    reason = models.CharField(max_length=40)
    score = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict)
    fingerprint = models.CharField(max_length=32)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.LISTED)
    note = models.CharField(max_length=200, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # What a revert of the run did with it; a skip's reason is a code of
    # ``maintenance.reverts.SKIP_REASONS``.
    revert_outcome = models.CharField(
        max_length=10, choices=RevertOutcome.choices, blank=True, default="", db_default=""
    )
    revert_reason = models.CharField(max_length=20, blank=True, default="", db_default="")

    class Meta:
        ordering = ["memory_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "memory_id"], name="maintenance_item_unique")
        ]
        indexes = [
            models.Index(fields=["run", "outcome", "memory_id"], name="maintenance_item_todo_idx")
        ]

    def __str__(self) -> str:
        return f"memory {self.memory_id} in run {self.run_id} ({self.outcome})"


class ArchiveChunk(models.Model):
    """Part of a retention run's archive: the memories one batch deleted, as JSON Lines in
    the import's shape, written in the transaction that deleted them."""

    run = models.ForeignKey(MaintenanceRun, on_delete=models.CASCADE, related_name="archive")
    seq = models.PositiveIntegerField()
    lines = models.TextField()
    count = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="maintenance_archive_unique")
        ]

    def __str__(self) -> str:
        return f"archive part {self.seq} of run {self.run_id} ({self.count} memories)"
