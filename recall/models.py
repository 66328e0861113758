from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex, VectorField

from policies.algebra import VOCABULARIES
from recall.engine.policy_filter import FILTER_COLUMNS


def _choices(vocabulary: str) -> list[tuple[str, str]]:
    return [(value, value.replace("_", " ")) for value in VOCABULARIES[vocabulary]]


class Actor(models.Model):
    """Someone memories are about, addressed as ``kind:name`` (``user:ada``)."""

    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.CASCADE, related_name="actors"
    )
    kind = models.CharField(max_length=20)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Maintained by database triggers (recall.engine.funnel_cache), whoever writes the
    # memories: ``memory_inserts`` counts the memories ever added, ``memory_changes`` the
    # deletes and changes of a column recall filters on (each logged in MemoryChange while the
    # actor has a cached funnel); ``memory_version`` moves with them, for a process still
    # running the code before migration 0015 (which keys its funnels on it).
    # They key the cached recall funnel (FunnelCache), so a stale funnel can never be used.
    memory_version = models.BigIntegerField(default=0, editable=False)
    memory_inserts = models.BigIntegerField(default=0, editable=False)
    # With a database default: a process still running the code before migration 0015 inserts
    # actors without it.
    memory_changes = models.BigIntegerField(default=0, db_default=0, editable=False)
    # A tombstone: the actor's memories were erased (a data-subject request, recall.erasure).
    # The row stays so that the erasure is remembered and no memory is added back for it.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "kind", "name"], name="actor_unique"),
            # The target of memory_actor_in_workspace (migration 0010): a memory's workspace
            # is its actor's, enforced by the database.
            models.UniqueConstraint(fields=["id", "workspace"], name="actor_id_workspace"),
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def external_id(self) -> str:
        return f"{self.kind}:{self.name}"


class LifecycleStatus(models.TextChoices):
    ACTIVE = "active"
    INACTIVE = "inactive"
    STALE = "stale"
    SUPPRESSED = "suppressed"
    DISABLED = "disabled"
    EXPIRED = "expired"


class Tier(models.TextChoices):
    """Where a memory sits in its lifecycle (seed 000): new memories start short-term; the
    promotion sweep moves the ones that earned it to long-term, which decay leaves alone."""

    SHORT_TERM = "short_term", "short-term"
    LONG_TERM = "long_term", "long-term"


class MemoryRecord(models.Model):
    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.CASCADE, related_name="memories"
    )
    # Indexed by memory_recall_cover_idx, which leads with actor.
    actor = models.ForeignKey(
        Actor, on_delete=models.CASCADE, related_name="memories", db_index=False
    )
    content = models.TextField()
    memory_type = models.CharField(max_length=20, choices=_choices("memoryType"))
    source_kind = models.CharField(max_length=20, choices=_choices("sourceKind"))
    confirmation_status = models.CharField(
        max_length=20, choices=_choices("confirmationStatus"), default="unknown"
    )
    confidence = models.FloatField(
        default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    sensitivity = models.CharField(
        max_length=20, choices=_choices("sensitivity"), default="internal"
    )
    consent_policy = models.CharField(
        max_length=20, choices=_choices("consentPolicy"), default="unknown"
    )
    segment_kind = models.CharField(
        max_length=20, choices=_choices("segmentKind"), default="memory"
    )
    lifecycle_status = models.CharField(
        max_length=20, choices=LifecycleStatus.choices, default=LifecycleStatus.ACTIVE
    )
    tier = models.CharField(
        max_length=20, choices=Tier.choices, default=Tier.SHORT_TERM, db_default=Tier.SHORT_TERM
    )
    is_current = models.BooleanField(default=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    # When the decay sweep (or an edit) made the memory stale; the retention sweep counts from
    # here. Cleared whenever the memory leaves the stale status for another than suppressed.
    stale_since = models.DateTimeField(null=True, blank=True)
    # While suppressed: the status it had when it was suppressed, if not active (stale,
    # expired, disabled), which restoring it gives back (recall.services.memory_set_status).
    suppressed_from = models.CharField(max_length=20, blank=True, default="", db_default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    # When an operator last reactivated the memory: its decay clock starts again from here
    # (the decay sweep counts from the later of this and its last recall).
    reactivated_at = models.DateTimeField(null=True, blank=True)
    hit_count = models.PositiveIntegerField(default=0)
    token_count = models.PositiveIntegerField(default=0)
    # Written by the embedding job (recall.services.memory_embed) once the row is committed,
    # or, without a broker, with the row itself (memory_create_many): a memory enters recall
    # only once ``embedding_model`` names the configured embedder (blank = not embedded yet;
    # another name = embedded by a previous embedder).
    embedding = VectorField(dimensions=settings.RECALL_EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # Covers every column the recall filter reads (recall.engine.policy_filter), so
            # the per-actor funnel and the exact search's filter are index-only scans that
            # never touch the wide heap rows.
            # Keyed by id within the actor, so the memories added since a cached funnel are
            # one range scan.
            models.Index(
                fields=["actor", "id"],
                include=[
                    *FILTER_COLUMNS,
                    # Row-level security reads it (portal/db/scope.py): the scan stays
                    # index-only.
                    "workspace",
                ],
                name="memory_recall_cover_idx",
            ),
            models.Index(fields=["actor", "-created_at"], name="memory_actor_created_idx"),
            models.Index(fields=["workspace", "-created_at"], name="memory_ws_created_idx"),
            # Maintenance sweeps walk a workspace's memories in id order.
            models.Index(fields=["workspace", "id"], name="memory_ws_id_idx"),
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0.0) & Q(confidence__lte=1.0),
                name="memory_confidence_range",
            ),
        ]

    def __str__(self) -> str:
        return f"memory {self.pk} of {self.actor_id}"

    # A recall does not rewrite the memories it carries: its hits are counted into hit_count
    # and last_accessed_at later (recall/hits.py). A row read ``with_hits`` also carries the
    # recalls not counted yet, and these say what the columns will.
    @property
    def hits(self) -> int:
        """How many recalls carried the memory (as an entry)."""
        return self.hit_count + (getattr(self, "hits_pending", None) or 0)

    @property
    def last_accessed(self) -> datetime | None:
        """When a recall last carried the memory (None: never)."""
        pending = getattr(self, "accessed_pending", None)
        if pending is None or (self.last_accessed_at and self.last_accessed_at > pending):
            return self.last_accessed_at
        return pending


class WorkloadLayoutConfigVersion(models.Model):
    """A workload's saved ``memory:`` layout configuration (SPEC section 6).

    Immutable like the policy versions: a save always adds a row. ``document`` is the
    normalised form (``layout_config_to_dict``) with every key present, so a later change of
    the planner's defaults cannot silently change what was saved.
    """

    workload = models.ForeignKey(
        "policies.Workload", on_delete=models.CASCADE, related_name="layout_config_versions"
    )
    version = models.PositiveIntegerField()
    document = models.JSONField()
    comment = models.CharField(max_length=500, blank=True, default="")
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "version"], name="workload_layout_config_unique_version"
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="workload_layout_config_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"layout config v{self.version} of workload {self.workload_id}"


class FunnelCache(models.Model):
    """A large actor's policy funnel, computed once per recall filter and kept current.

    Recall evaluates every one of an actor's memories against the policy to report the
    funnel (SPEC section 5). For actors with many memories that scan dominates the request,
    so its result is kept here: the counts by decision code, the eligible ids (when the exact
    path will rank them) and the first rejected ids, over the memories with ids up to
    ``max_id``, as of the actor's ``memory_inserts`` and ``memory_changes``. A read uses it
    before ``valid_until`` (the earliest moment a memory expires or ages past
    ``maxAgeSeconds``, the only ways time alone changes the funnel) and merges in what
    happened since: the memories added (provided they are exactly the rows inserted since; a
    row committed late with a smaller id fails that check and the funnel is scanned again),
    the rows that were waiting for their embedding (``pending``), and the rows changed or
    deleted, from the change log (``MemoryChange``). ``memory_version`` is kept for processes
    running the code before migration 0015. Nothing here is authoritative; deleting rows only
    costs a rescan.
    """

    actor = models.ForeignKey(Actor, on_delete=models.CASCADE, related_name="+")
    filter_key = models.CharField(max_length=64)
    memory_version = models.BigIntegerField()
    memory_inserts = models.BigIntegerField(default=0)
    memory_changes = models.BigIntegerField(default=0, db_default=0)
    max_id = models.BigIntegerField(default=0)
    valid_until = models.DateTimeField(null=True)
    counts = models.JSONField()
    eligible = ArrayField(models.BigIntegerField(), null=True)
    rejected = models.JSONField()
    # The rows coded ``embedding_pending`` (waiting for the embedding job): that job leaves
    # ``memory_version`` alone, so each use codes these rows again (recall.engine.read).
    pending = ArrayField(models.BigIntegerField(), default=list)
    computed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["actor", "filter_key"], name="funnel_cache_unique")
        ]

    def __str__(self) -> str:
        return f"funnel of actor {self.actor_id} at version {self.memory_version}"


class MemoryChange(models.Model):
    """A change to one of a cached actor's memories, as the funnel cache last saw it.

    Written by the triggers on the memory table (``recall.engine.funnel_cache``) while the
    actor has a cached funnel near enough to use it: a delete, or an update of a column recall
    filters on, logs the row's previous filtered columns and whether the row was the actor's
    before (``present``; for a row moved in from another actor there is no old decision to
    take out). Recall takes the earliest entry of each memory since a cached funnel, takes its
    old decision out of the funnel and puts the row's current one in, instead of scanning
    every memory again. ``seq`` is the actor's ``memory_changes`` after the statement;
    entries no funnel needs any more are pruned when one is stored.
    """

    # The database deletes these with their actor (ON DELETE CASCADE, migration 0015): a
    # memory deleted with its actor logs its change after Django would have collected them.
    actor = models.ForeignKey(
        Actor, on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    memory_id = models.BigIntegerField()
    seq = models.BigIntegerField()
    present = models.BooleanField()
    # The memory's filtered columns (recall.engine.policy_filter.FILTER_COLUMNS) as they were.
    lifecycle_status = models.CharField(max_length=20)
    is_current = models.BooleanField()
    expires_at = models.DateTimeField(null=True)
    consent_policy = models.CharField(max_length=20)
    memory_type = models.CharField(max_length=20)
    source_kind = models.CharField(max_length=20)
    confirmation_status = models.CharField(max_length=20)
    confidence = models.FloatField()
    sensitivity = models.CharField(max_length=20)
    created_at = models.DateTimeField()
    segment_kind = models.CharField(max_length=20)
    embedding_model = models.CharField(max_length=100)

    class Meta:
        indexes = [models.Index(fields=["actor", "seq"], name="memory_change_actor_seq_idx")]

    def __str__(self) -> str:
        return f"change {self.seq} of memory {self.memory_id}"


class HitFold(models.Model):
    """How far a workspace's recalls have been counted into its memories' ``hit_count`` and
    ``last_accessed_at`` (recall/hits.py): every ``context.assembled`` event up to and
    including ``event_id``. A recall does not rewrite the memories it carried: the event's
    injections are its hits, counted here later (by a task, or by the next reader that needs
    the counts) and, until then, added by the recall read to the rows it ranks."""

    workspace = models.OneToOneField(
        "portal.Workspace", on_delete=models.CASCADE, primary_key=True, related_name="hit_fold"
    )
    event_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"hits of workspace {self.workspace_id} counted up to event {self.event_id}"
