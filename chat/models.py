"""Chat sessions, their turns, and the context assembled for each user turn.

Turn content is personal data: it is stored here and in the assembled prompt, never logged,
erased with its actor (``chat.erasure``) and deleted by the ``sessions`` maintenance sweep once
its session has ended longer ago than the workspace's session retention.

Every table keys its rows on the workspace (row-level security, migration 0001).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q


class SessionStatus(models.TextChoices):
    ACTIVE = "active"
    ENDED = "ended"


class Role(models.TextChoices):
    """Who wrote a turn (chat-completions' roles; the system prompt is the session's own)."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# A session's lock (``select_for_update(**SESSION_LOCK)``): its own row only, and not against
# the rows that refer to it (turns, contexts, runs). Locking the joined workspace, actor and
# workload too, as a plain ``select_for_update`` with ``select_related`` does, would hold back
# every write of the workspace that refers to its row (an audit event, a memory) until the
# turn commits: the workspace's turns and recalls would go one at a time.
SESSION_LOCK: dict[str, Any] = {"of": ("self",), "no_key": True}


class Session(models.Model):
    """One conversation of an actor with a workload in an environment."""

    workspace = models.ForeignKey(
        "portal.Workspace", on_delete=models.CASCADE, related_name="chat_sessions"
    )
    actor = models.ForeignKey(
        "recall.Actor", on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    workload = models.ForeignKey(
        "policies.Workload", on_delete=models.CASCADE, related_name="sessions", db_index=False
    )
    environment = models.CharField(max_length=50)
    # The caller's own id for the conversation; unique per workspace when given.
    external_id = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(
        max_length=10, choices=SessionStatus.choices, default=SessionStatus.ACTIVE
    )
    # The agent's system prompt (rendered first in every prompt) and the tokens its fixed
    # costs count for it and for the tool schemas it sends (seed 000's budget accounting).
    system_prompt = models.TextField(blank=True, default="")
    system_prompt_tokens = models.PositiveIntegerField(default=0)
    tool_schema_tokens = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    # The budget status of the latest assembled turn (``TurnContext.budget_status``).
    last_budget = models.JSONField(null=True, blank=True)
    # The compaction monitor's state between turns (``recall.layout.monitor.MonitorState``):
    # the budget statuses of its trend window (oldest first), the turns it recorded, the
    # recorded turn the last compaction started at, and the run in flight (none: null).
    monitor_recent = models.JSONField(default=list, blank=True)
    monitor_turns = models.PositiveIntegerField(default=0)
    compaction_started_turn = models.PositiveIntegerField(null=True, blank=True)
    compaction_run = models.ForeignKey(
        "CompactionRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["workspace", "-id"], name="chat_session_ws_idx"),
            # Prior-session history: the actor's earlier sessions of a workload, newest first.
            models.Index(fields=["actor", "workload", "-id"], name="chat_session_actor_idx"),
            # The sessions sweep: ended sessions by when they ended.
            models.Index(
                fields=["workspace", "ended_at"],
                condition=Q(status="ended"),
                name="chat_session_ended_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "external_id"],
                condition=~Q(external_id=""),
                name="chat_session_unique_external_id",
            ),
            models.CheckConstraint(
                condition=Q(status="active", ended_at__isnull=True)
                | Q(status="ended", ended_at__isnull=False),
                name="chat_session_ended_at_with_status",
            ),
        ]

    def __str__(self) -> str:
        return f"session {self.pk} ({self.status})"


class Turn(models.Model):
    """One message of a session, in order (``index`` from 1), with its estimated tokens."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="+")
    # Indexed by chat_turn_unique_index, which leads with the session.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="turns", db_index=False
    )
    index = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()
    tokens = models.PositiveIntegerField()
    # The compaction run that summarised the turn: it has left the current history (kept for
    # the record until the session's retention).
    compacted_by = models.ForeignKey(
        "CompactionRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="turns"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "index"]
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="chat_turn_unique_index"),
            models.CheckConstraint(condition=Q(index__gte=1), name="chat_turn_index_positive"),
        ]

    def __str__(self) -> str:
        return f"turn {self.index} of session {self.session_id} ({self.role})"


class TurnContext(models.Model):
    """The context assembled for one user turn: the prompt returned (private content), and
    its diagnostics (no content: ids, counts and tokens), as the turn's answer gave them."""

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="contexts", db_index=False
    )
    turn = models.PositiveIntegerField()  # the index of the user turn it answered
    primed = models.BooleanField(default=False)
    # [{role, content}]: what the agent sends to its model. Personal data.
    prompt = models.JSONField()
    # Where each prompt message (and each line of the system message) came from: ids only.
    parts = models.JSONField(default=list)
    # [[session id, turn index]]: the earlier sessions' turns its layout was given, oldest
    # first, ids only (the Layout tab reads them again); null on a context recorded before.
    prior_given = models.JSONField(null=True, blank=True)
    layout = models.JSONField()
    recall = models.JSONField()
    budget_status = models.JSONField()
    compaction = models.JSONField()
    event_id = models.BigIntegerField(null=True, blank=True)  # its context.assembled event
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "turn"]
        constraints = [
            models.UniqueConstraint(fields=["session", "turn"], name="chat_context_unique_turn")
        ]

    def __str__(self) -> str:
        return f"context of turn {self.turn} of session {self.session_id}"


class CompactionTrigger(models.TextChoices):
    AUTOMATIC = "automatic"  # the monitor decided after a turn
    MANUAL = "manual"  # POST /v1/sessions/{id}/compact, the session page's "Compact now"


class CompactionStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


ACTIVE_COMPACTION = (CompactionStatus.QUEUED, CompactionStatus.RUNNING)


class CompactionRun(models.Model):
    """One compaction of a session (seed 000): its oldest turns summarised into ``summary``
    memories of the actor until the estimate reaches ``target_utilization`` or the time
    budget runs out, the actor's duplicate insights superseded, memories promoted.

    No content: the summaries are memories (``summary_ids``), the turns are named by index.
    """

    workspace = models.ForeignKey("portal.Workspace", on_delete=models.CASCADE, related_name="+")
    # Indexed by chat_compaction_session_idx, which leads with the session.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="compaction_runs", db_index=False
    )
    trigger = models.CharField(max_length=10, choices=CompactionTrigger.choices)
    # The monitor's decision code (severity, rising_trend) or "manual", and the latest
    # turn's severity when the run was asked for.
    reason = models.CharField(max_length=20)
    severity = models.CharField(max_length=10)
    status = models.CharField(
        max_length=10, choices=CompactionStatus.choices, default=CompactionStatus.QUEUED
    )
    # The compaction configuration the run reads (``memory.compaction`` as saved), the
    # summarizer it names (``llm_service``) and that summarizer's kind.
    config = models.JSONField()
    service = models.CharField(max_length=100)
    service_kind = models.CharField(max_length=20, blank=True, default="")
    time_budget_ms = models.PositiveIntegerField()
    time_budget_exhausted = models.BooleanField(default=False)
    target_utilization = models.FloatField()
    target_met = models.BooleanField(null=True, blank=True)
    # The estimate of the latest assembled turn before, and after the summaries replace
    # their turns (``chat.compaction.rules.estimate_after``), over the same dynamic budget.
    available_budget = models.PositiveIntegerField(null=True, blank=True)
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    utilization_before = models.FloatField(null=True, blank=True)
    utilization_after = models.FloatField(null=True, blank=True)
    turns_summarised = models.JSONField(default=list, blank=True)  # turn indexes
    summary_ids = models.JSONField(default=list, blank=True)  # the summary memories' ids
    insights_superseded = models.JSONField(default=list, blank=True)  # memory ids
    memories_promoted = models.JSONField(default=list, blank=True)  # memory ids
    notes = models.JSONField(default=list, blank=True)  # what the run decided not to do, why
    error_code = models.CharField(max_length=40, blank=True, default="")
    error = models.TextField(blank=True, default="")
    # The monitor's recorded turns when the run was asked for (its cooldown counts from it).
    monitor_turn = models.PositiveIntegerField(default=0)
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    event_id = models.BigIntegerField(null=True, blank=True)  # its context.compacted event

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["session", "-id"], name="chat_compaction_session_idx"),
            # The dashboard's panel: a workspace's runs by day.
            models.Index(fields=["workspace", "created_at"], name="chat_compaction_ws_idx"),
        ]
        constraints = [
            # One run per session at a time.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["queued", "running"]),
                name="chat_compaction_one_active",
            ),
        ]

    def __str__(self) -> str:
        return f"compaction run {self.pk} of session {self.session_id} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status not in ACTIVE_COMPACTION

    @property
    def outcome(self) -> str:
        """In one word, for the pages and the dashboard: ``pending``, ``failed``,
        ``target_met``, ``time_budget_exhausted`` or ``target_missed``."""
        if not self.finished:
            return "pending"
        if self.status == CompactionStatus.FAILED:
            return "failed"
        if self.target_met:
            return "target_met"
        if self.time_budget_exhausted:
            return "time_budget_exhausted"
        return "target_missed"
