"""Chat sessions, their turns, and the context assembled for each user turn.

Turn content is personal data: it is stored here and in the assembled prompt, never logged,
erased with its actor (``chat.erasure``) and deleted by the ``sessions`` maintenance sweep once
its session has ended longer ago than the workspace's session retention.

Every table keys its rows on the workspace (row-level security, migration 0001).
"""

from __future__ import annotations

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
