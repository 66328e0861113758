from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers

from chat.compaction.records import run_outcome
from chat.compaction.summarizers import service_config
from chat.models import (
    CompactionRun,
    CompactionStatus,
    CompactionTrigger,
    Role,
    Session,
    SessionStatus,
    Turn,
    TurnContext,
)
from chat.services import (
    EXTERNAL_ID_MAX_CHARS,
    MESSAGE_MAX_CHARS,
    MESSAGES_MAX,
    SYSTEM_PROMPT_MAX_CHARS,
    Posted,
)
from portal.api.fields import (
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    StrictRegexField,
    StrictUUIDField,
)
from portal.api.strict import StrictSerializer
from recall.layout.vocabulary import MAX_COUNT

PRIVATE_NOTE = (
    "Private content: the actor's memories and messages as the model receives them. Do not "
    "log, cache or share it."
)


class SessionCreateSerializer(StrictSerializer):
    actorId = StrictCharField(max_length=250, help_text="The actor (kind:name).")
    workloadId = StrictUUIDField()
    environment = StrictRegexField(
        r"^[a-z0-9][a-z0-9-]{0,49}$", error_messages={"invalid": "Not an environment slug."}
    )
    externalId = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=EXTERNAL_ID_MAX_CHARS,
        help_text="Your own id for the conversation, unique in the workspace: a second "
        "session with it is a 409 SESSION_EXISTS naming the first.",
    )
    systemPrompt = StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=SYSTEM_PROMPT_MAX_CHARS,
        help_text="The agent's system prompt: the first text of every prompt's system message.",
    )
    systemPromptTokens = StrictIntegerField(
        required=False,
        min_value=0,
        max_value=MAX_COUNT,
        help_text="Its tokens in the fixed costs; default: the estimate of systemPrompt.",
    )
    toolSchemaTokens = StrictIntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_COUNT,
        help_text="The tokens of the tool schemas the agent sends with each prompt.",
    )


def session_links(session: Session) -> dict[str, str]:
    return {
        "self": reverse("api-session", args=[session.pk]),
        "turns": reverse("api-session-turns", args=[session.pk]),
        "compact": reverse("api-session-compact", args=[session.pk]),
        "end": reverse("api-session-end", args=[session.pk]),
        "page": reverse("chat:session", args=[session.workspace.slug, session.pk]),
    }


class SessionSerializer(serializers.Serializer):
    id = serializers.CharField()
    externalId = serializers.SerializerMethodField()
    actorId = serializers.CharField(source="actor.external_id")
    workloadId = serializers.UUIDField(source="workload_id")
    environment = serializers.CharField()
    status = StrictChoiceField(choices=SessionStatus.choices)
    turnCount = serializers.IntegerField(source="turn_count")
    systemPromptTokens = serializers.IntegerField(source="system_prompt_tokens")
    toolSchemaTokens = serializers.IntegerField(source="tool_schema_tokens")
    lastBudgetStatus = serializers.JSONField(
        source="last_budget",
        allow_null=True,
        help_text="The budget status of the latest assembled turn: turn, totalTokens, "
        "availableBudget, utilizationPct (null: a zero budget holding anything), severity.",
    )
    compactionRunId = serializers.CharField(
        source="compaction_run_id",
        allow_null=True,
        help_text="The session's compaction run in flight, if any.",
    )
    author = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    endedAt = serializers.DateTimeField(source="ended_at", allow_null=True)
    links = serializers.SerializerMethodField()

    def get_externalId(self, session: Session) -> str | None:
        return session.external_id or None

    def get_links(self, session: Session) -> dict[str, str]:
        return session_links(session)


class MessageSerializer(StrictSerializer):
    """For the schema: ``chat.services.messages_check`` checks the messages."""

    role = StrictChoiceField(choices=Role.values)
    content = StrictCharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text=f"At most {MESSAGE_MAX_CHARS:,} characters (413 MESSAGE_TOO_LARGE beyond).",
    )


class TurnsRequestSerializer(StrictSerializer):
    messages = serializers.ListField(
        child=MessageSerializer(), min_length=1, max_length=MESSAGES_MAX
    )


BUDGET_STATUS_HELP = (
    "totalTokens (the layout's estimate), availableBudget (the dynamic budget), "
    "utilizationPct (null: a zero budget holding anything) and severity (normal, elevated > "
    "70, warning > 85, critical > 95, overage > 100)."
)
LAYOUT_HELP = (
    "The accounting (contextWindow, fixedCosts, dynamicBudget, supportingContextBudget, "
    "formattingOverhead, estimateBeforePruning, estimatedTokens, freeTokens, fits, "
    "emergencyOverage, configVersion), per part what was given and kept (history, "
    "priorSessionHistory, supporting sections, query), the cascade stages that ran with what "
    "each removed, the items filtered and why, warnings, and promptTokens (the returned "
    "prompt's own estimate, at most estimatedTokens)."
)
RECALL_HELP = (
    "The recall behind the supporting context: envelopeId, eventId (its context.assembled "
    "event), digest, counts, memoryIds, similarities (memory id -> its similarity to the "
    "query), truncatedIds, topK, usedTokens, warnings, and "
    "tokenBudget: the policy's, the supporting-context budget's and priming's, the one applied "
    "(the smallest) and limitedBy."
)
COMPACTION_HELP = (
    "The session's compaction monitor after this turn (its state is kept with the session): "
    "enabled, compact, code (disabled, no_history, in_progress, cooldown, severity, "
    "rising_trend, not_needed), reason, severity, timeBudgetMs, runId (the run it asked for, "
    "GET /v1/compaction/runs/{id}) and waitedFor (the run in flight this turn waited for "
    "before its assembly: runId, waitedMs, finished; null when there was none)."
)


class ContextSerializer(serializers.Serializer):
    """The diagnostics of an assembled turn (no content)."""

    primed = serializers.BooleanField(
        help_text="The session's first assembled turn, primed (priming.enabled)."
    )
    layout = serializers.JSONField(help_text=LAYOUT_HELP)
    recall = serializers.JSONField(help_text=RECALL_HELP)
    budgetStatus = serializers.JSONField(source="budget_status", help_text=BUDGET_STATUS_HELP)
    compaction = serializers.JSONField(help_text=COMPACTION_HELP)
    parts = serializers.JSONField(
        help_text="Where each line of the prompt came from, in order: kind (system_prompt, "
        "supporting, prior, history, query), message (its index), section, memoryId, "
        "sessionId, turn."
    )


class PromptSerializer(serializers.Serializer):
    messages = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="[{role, content}], the chat-completions shape: the system message (system "
        "prompt, supporting context by section, earlier sessions' turns), this session's kept "
        "turns, the user's message. " + PRIVATE_NOTE,
    )
    parts = serializers.JSONField(help_text="Where each line came from (see the turn's parts).")


def context_links(context: TurnContext) -> dict[str, str]:
    session, turn = context.session_id, context.turn
    links = {
        "self": reverse("api-session-turn", args=[session, turn]),
        "prompt": reverse("api-session-turn-prompt", args=[session, turn]),
        "auditEvent": reverse("api-audit-event", args=[context.event_id]),
    }
    run_id = (context.compaction or {}).get("runId")
    if run_id:
        links["compactionRun"] = reverse("api-compaction-run", args=[run_id])
    return links


def context_data(context: TurnContext) -> dict[str, Any]:
    data = dict(ContextSerializer(context).data)
    data["links"] = context_links(context)
    return data


class TurnAnswerSerializer(serializers.Serializer):
    """For the schema: what ``turns_answer`` builds."""

    sessionId = serializers.CharField()
    appended = serializers.ListField(
        child=serializers.IntegerField(), help_text="The indexes of the turns appended."
    )
    turn = serializers.IntegerField(
        allow_null=True,
        help_text="The user turn the context was assembled for; null when the last message "
        "appended was not the user's (nothing assembled).",
    )
    prompt = PromptSerializer(allow_null=True)
    primed = serializers.BooleanField(allow_null=True)
    layout = serializers.JSONField(allow_null=True, help_text=LAYOUT_HELP)
    recall = serializers.JSONField(allow_null=True, help_text=RECALL_HELP)
    budgetStatus = serializers.JSONField(allow_null=True, help_text=BUDGET_STATUS_HELP)
    compaction = serializers.JSONField(allow_null=True, help_text=COMPACTION_HELP)
    parts = serializers.JSONField(allow_null=True)
    links = serializers.DictField(child=serializers.CharField(), allow_null=True)


def turns_answer(posted: Posted) -> dict[str, Any]:
    """The answer of a turns request: the appended turns and, when assembled, the prompt
    and its diagnostics (as ``GET .../turns/{n}`` gives them later)."""
    context = posted.context
    answer: dict[str, Any] = {
        "sessionId": str(posted.session.pk),
        "appended": [turn.index for turn in posted.turns],
        "turn": context.turn if context else None,
        "prompt": {"messages": context.prompt, "parts": context.parts} if context else None,
    }
    if context is None:
        empty = ("primed", "layout", "recall", "budgetStatus", "compaction", "parts", "links")
        return {**answer, **dict.fromkeys(empty)}
    return {**answer, **context_data(context)}


class TurnDetailSerializer(serializers.Serializer):
    """For the schema: what ``turn_detail`` builds."""

    sessionId = serializers.CharField()
    turn = serializers.IntegerField()
    role = StrictChoiceField(choices=Role.values)
    tokens = serializers.IntegerField(help_text="The message's estimated tokens.")
    summarisedBy = serializers.CharField(
        allow_null=True,
        help_text="The compaction run that summarised the turn: it has left the history.",
    )
    createdAt = serializers.DateTimeField()
    assembled = serializers.BooleanField(
        help_text="Whether a context was assembled for this turn (the user's last message of "
        "its call); the diagnostics below are null otherwise."
    )
    primed = serializers.BooleanField(allow_null=True)
    layout = serializers.JSONField(allow_null=True, help_text=LAYOUT_HELP)
    recall = serializers.JSONField(allow_null=True, help_text=RECALL_HELP)
    budgetStatus = serializers.JSONField(allow_null=True, help_text=BUDGET_STATUS_HELP)
    compaction = serializers.JSONField(allow_null=True, help_text=COMPACTION_HELP)
    parts = serializers.JSONField(allow_null=True)
    links = serializers.DictField(child=serializers.CharField(), allow_null=True)


def turn_detail(turn: Turn, context: TurnContext | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "sessionId": str(turn.session_id),
        "turn": turn.index,
        "role": turn.role,
        "tokens": turn.tokens,
        "summarisedBy": str(turn.compacted_by_id) if turn.compacted_by_id else None,
        "createdAt": serializers.DateTimeField().to_representation(turn.created_at),
        "assembled": context is not None,
    }
    if context is None:
        empty = ("primed", "layout", "recall", "budgetStatus", "compaction", "parts", "links")
        return {**data, **dict.fromkeys(empty)}
    return {**data, **context_data(context)}


class TurnPromptSerializer(PromptSerializer):
    sessionId = serializers.CharField()
    turn = serializers.IntegerField()
    private = serializers.BooleanField(help_text="Always true: " + PRIVATE_NOTE)


def turn_prompt(context: TurnContext) -> dict[str, Any]:
    return {
        "sessionId": str(context.session_id),
        "turn": context.turn,
        "private": True,
        "messages": context.prompt,
        "parts": context.parts,
    }


# --- compaction runs ----------------------------------------------------------------------------

OUTCOME_HELP = (
    "pending (queued or running), failed, target_met, time_budget_exhausted (stopped by the "
    "time budget before the target) or target_missed (no more turns it could summarise)."
)


class CompactionRunSerializer(serializers.Serializer):
    """A compaction run, as ``compaction_run_data`` builds it (no content)."""

    id = serializers.CharField()
    sessionId = serializers.CharField()
    trigger = StrictChoiceField(choices=CompactionTrigger.values)
    reason = serializers.CharField(
        help_text="The monitor's decision code (severity, rising_trend), or manual."
    )
    severity = serializers.CharField(help_text="The latest turn's severity when it was asked.")
    status = StrictChoiceField(choices=CompactionStatus.values)
    outcome = serializers.CharField(help_text=OUTCOME_HELP)
    service = serializers.CharField(help_text="The llm_service it names (COMPACTION_SERVICES).")
    serviceKind = serializers.CharField(help_text="extractive or openai.")
    serviceLabel = serializers.CharField(allow_null=True)
    timeBudgetMs = serializers.IntegerField()
    timeBudgetExhausted = serializers.BooleanField()
    durationMs = serializers.IntegerField(allow_null=True)
    targetUtilization = serializers.FloatField()
    targetMet = serializers.BooleanField(allow_null=True)
    availableBudget = serializers.IntegerField(allow_null=True)
    tokensBefore = serializers.IntegerField(
        allow_null=True,
        help_text="The latest assembled turn's estimate before pruning (an upper bound).",
    )
    tokensAfter = serializers.IntegerField(
        allow_null=True,
        help_text="The same estimate with the summaries in place of their turns.",
    )
    utilizationBefore = serializers.FloatField(allow_null=True)
    utilizationAfter = serializers.FloatField(allow_null=True)
    turnsSummarised = serializers.ListField(child=serializers.IntegerField())
    summaryMemoryIds = serializers.ListField(child=serializers.CharField())
    insightsSuperseded = serializers.ListField(child=serializers.CharField())
    memoriesPromoted = serializers.ListField(child=serializers.CharField())
    notes = serializers.ListField(child=serializers.CharField())
    error = serializers.JSONField(allow_null=True, help_text="{code, message} when it failed.")
    author = serializers.CharField()
    createdAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    links = serializers.DictField(child=serializers.CharField())


def compaction_run_data(run: CompactionRun) -> dict[str, Any]:
    when = serializers.DateTimeField().to_representation
    config = service_config(run.service)
    links = {
        "self": reverse("api-compaction-run", args=[run.pk]),
        "session": reverse("api-session", args=[run.session_id]),
    }
    if run.event_id is not None:
        links["auditEvent"] = reverse("api-audit-event", args=[run.event_id])
    return {
        "id": str(run.pk),
        **run_outcome(run),
        "serviceKind": run.service_kind or (config.kind if config else ""),
        "serviceLabel": config.label if config else None,
        "summaryMemoryIds": [str(pk) for pk in run.summary_ids],
        "error": {"code": run.error_code, "message": run.error} if run.error_code else None,
        "author": run.author,
        "createdAt": when(run.created_at),
        "startedAt": when(run.started_at) if run.started_at else None,
        "finishedAt": when(run.finished_at) if run.finished_at else None,
        "links": links,
    }
