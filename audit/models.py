from __future__ import annotations

from django.db import models


class EventType(models.TextChoices):
    WORKSPACE_POLICY_SET = "context.workspace_policy_set"
    WORKLOAD_POLICY_SET = "context.workload_policy_set"
    ASSEMBLED = "context.assembled"
    WORKSPACE_RENAMED = "workspace.renamed"
    WORKSPACE_SETTINGS_SET = "workspace.settings_set"
    WORKLOAD_CREATED = "workload.created"
    WORKLOAD_UPDATED = "workload.updated"
    WORKLOAD_DELETED = "workload.deleted"  # before workloads were archived instead
    WORKLOAD_ARCHIVED = "workload.archived"
    MEMORY_CHANGED = "memory.changed"
    MEMORY_ERASED = "memory.erased"
    MAINTENANCE_EXECUTED = "maintenance.executed"
    MAINTENANCE_PREVIEWED = "maintenance.previewed"
    LIFECYCLE_SETTINGS_SET = "maintenance.settings_set"
    ARCHIVE_RESTORED = "maintenance.archive_restored"
    MAINTENANCE_REVERTED = "maintenance.reverted"
    LAYOUT_CONFIG_SET = "context.layout_config_set"
    COMPACTED = "context.compacted"
    SESSION_STARTED = "session.started"
    SESSION_ENDED = "session.ended"
    TOKEN_ISSUED = "token.issued"
    TOKEN_REVOKED = "token.revoked"
    TOKEN_ROTATED = "token.rotated"
    MEMBER_ADDED = "member.added"
    MEMBER_ROLE_CHANGED = "member.role_changed"
    MEMBER_REMOVED = "member.removed"


class AuditEvent(models.Model):
    """An append-only, hash-chained record. The application never updates or deletes rows."""

    # Indexed by the composite indexes below, which all lead with the workspace: every
    # index here is one more insert on each recall.
    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.PROTECT, related_name="audit_events", db_index=False
    )
    type = models.CharField(max_length=50, choices=EventType.choices)
    occurred_at = models.DateTimeField()
    author = models.CharField(max_length=200)
    # Plain values, not foreign keys: the trail must outlive the workloads and actors it names.
    workload_id = models.UUIDField(null=True, blank=True)
    environment = models.CharField(max_length=50, blank=True, default="")
    actor_id = models.CharField(max_length=250, blank=True, default="")
    payload = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # The id of the key the hash is an HMAC under (audit/keys.py); "" for the plain SHA-256 of
    # events recorded before the chain was keyed.
    key_id = models.CharField(max_length=32, blank=True, default="", db_default="")
    # The workspace's chain the event is appended to (audit/chain.py): 0 for the main chain,
    # which every event recorded in a transaction joins; recalls append to lanes 1..N.
    lane = models.PositiveSmallIntegerField(default=0, db_default=0)
    # An event recorded while query texts were still hashed with it, whose text has since
    # moved out to ``StoredQuery`` (migration ``audit.0017``): its ``hash`` stands as it was,
    # so later events and anchors still hold, and this HMAC, under the same key, covers that
    # hash and the fields as they are now (``audit.chain``). "" for every other event.
    seal = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        ordering = ["-id"]
        # A constraint rather than unique=True: no second, LIKE-only index on the hash.
        constraints = [models.UniqueConstraint(fields=["hash"], name="audit_event_hash_unique")]
        indexes = [
            models.Index(fields=["workspace", "-id"], name="audit_ws_id_idx"),
            models.Index(fields=["workspace", "type", "-id"], name="audit_ws_type_idx"),
            models.Index(fields=["workspace", "-occurred_at"], name="audit_ws_time_idx"),
            models.Index(
                fields=["workspace", "actor_id", "workload_id", "environment", "type", "-id"],
                name="audit_reuse_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.pk}"


class AuditChainHead(models.Model):
    """The tip of one lane of a workspace's chain; its row orders that lane's appends."""

    # Indexed by the unique constraint below, which leads with the workspace.
    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.PROTECT, related_name="audit_heads", db_index=False
    )
    lane = models.PositiveSmallIntegerField(default=0, db_default=0)
    last_hash = models.CharField(max_length=64)
    length = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "lane"], name="audit_head_lane_unique")
        ]

    def __str__(self) -> str:
        return (
            f"audit head of workspace {self.workspace_id}, lane {self.lane} ({self.length} events)"
        )


class AuditCheckpoint(models.Model):
    """How far a workspace's chain is known to hold, so a routine check reads only newer events.

    Written by every check that holds. ``full_at`` is when a walk of the whole chain last held:
    a routine (incremental) check trusts the events up to ``event_id`` from then on, so an
    edit made to them afterwards is found only by the next full check.
    """

    workspace = models.OneToOneField(
        "portal.Workspace", on_delete=models.CASCADE, related_name="audit_checkpoint"
    )
    event_id = models.BigIntegerField()  # the last event walked, in any lane
    # Lane 0's last event walked and its position (the main chain's, as before lanes).
    event_hash = models.CharField(max_length=64)
    length = models.PositiveBigIntegerField()  # lane 0's events up to and including it
    # The other lanes': {"lane": [length, hash, event id]}.
    lanes = models.JSONField(default=dict, db_default={})
    full_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"audit checkpoint of workspace {self.workspace_id} at event {self.event_id}"


class Injection(models.Model):
    """One memory carried by one ``context.assembled`` event: the trail read from the memory's
    side ("which envelopes carried this memory?").

    Written by the same statement that appends the event, so an event and its rows exist
    together or not at all. Ids only, never content: an erased memory's rows stay, and the
    pages show its id as erased. ``truncated`` marks a memory sent as a truncated reference
    rather than an entry. The primary key (workspace, memory, event) is the only index: the
    lookup is always "this memory's envelopes in this workspace, newest first", counted from
    the index alone. (Nothing indexes the event: events are never deleted.)
    """

    pk = models.CompositePrimaryKey("workspace_id", "memory_id", "event_id")
    memory_id = models.BigIntegerField()
    # No foreign-key constraints: each would fire a check per row on the recall hot path, and
    # the rows are only ever written by the statement that appends their event (to the same
    # workspace), which the application never deletes.
    event = models.ForeignKey(
        AuditEvent, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False
    )
    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False
    )
    truncated = models.BooleanField(default=False)
    # Carried by a dry run (the sandbox's recall): shown as provenance, never counted as a hit.
    dry_run = models.BooleanField(default=False, db_default=False)

    def __str__(self) -> str:
        return f"memory {self.memory_id} in event {self.event_id}"


class StoredQuery(models.Model):
    """The query text of one ``context.assembled`` event, kept when its workspace stores
    queries.

    It lives beside the event, not in it: the event's hash covers only the query's salted
    hash (``queryHash``), so erasing the actor deletes this row and the chain still
    verifies. Written by the statement that appends the event (``audit.services``), like the
    injections, and without a foreign-key constraint for the same reason.
    """

    event = models.OneToOneField(
        AuditEvent,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="stored_query",
    )
    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.DO_NOTHING, db_index=False, db_constraint=False
    )
    actor_id = models.CharField(max_length=250)
    text = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["workspace", "actor_id"], name="audit_query_actor_idx")]

    def __str__(self) -> str:
        return f"query of event {self.event_id}"
