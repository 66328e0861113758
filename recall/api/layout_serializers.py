"""Wire shapes of the chat layout planner (SPEC section 6): strict in, camelCase out.

``LayoutRequestSerializer`` is the one validator of a layout request, for the API and for the
sandbox page (whose form turns its lines into this same data), and it hands the planner a
typed ``LayoutRequest``. ``LayoutResultSerializer`` is the one camelCase shape of a result.

Inputs are strict on purpose: DRF's defaults turn ``"12"`` into 12, ``"yes"`` into True and
ignore unknown keys, and a sandbox that quietly reads a typo as "not given" teaches the wrong
numbers. Every rejection names the field as the caller wrote it (``history[2].role``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from portal.api import strict
from portal.api.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictFloatField,
    StrictIntegerField,
    StrictUUIDField,
)
from portal.api.strict import json_type
from recall.api.layout_schemas import layout_config_field_schema
from recall.layout.config import LayoutConfig, LayoutConfigError, parse_memory_config
from recall.layout.request import LayoutRequest, SupportingItem, Turn
from recall.layout.vocabulary import KNOWN_SECTIONS, MAX_COUNT, PASSAGE_TERMS, suggested_name

CHAT_ROLES = ("system", "user", "assistant", "tool")


def unknown_name_message(name: Any, known: Iterable[str], what: str = "field") -> str:
    """``portal.api.strict``'s message, knowing the layout vocabulary's earlier names."""
    return strict.unknown_name_message(name, known, what, suggest=suggested_name)


def token_count(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(min_value=0, max_value=MAX_COUNT, **kwargs)


def ratio(**kwargs: Any) -> StrictFloatField:
    return StrictFloatField(min_value=0.0, max_value=1.0, **kwargs)


class VocabularySerializer(strict.StrictSerializer):
    """``portal.api.strict``'s strict object, suggesting the layout vocabulary's names (an
    earlier guide's name included) for unknown keys."""

    suggest = staticmethod(suggested_name)


# --- request ----------------------------------------------------------------------------------


class ChatMessageSerializer(VocabularySerializer):
    """One chat message; one turn for the cascade's "last N turns" stages."""

    object_name = "a chat message {role, content}"

    role = StrictChoiceField(choices=CHAT_ROLES)
    content = StrictCharField(allow_blank=True, trim_whitespace=False)


class SupportingItemSerializer(VocabularySerializer):
    """One supporting-context item; decayed/superseded items and redundant summaries are
    filtered out before the sections are filled."""

    object_name = "a supporting item {content, relevancy?, term?, ...}"

    content = StrictCharField(allow_blank=True, trim_whitespace=False)
    relevancy = ratio(
        required=False, allow_null=True, help_text="Query relevance 0..1; null = unscored."
    )
    term = StrictChoiceField(
        choices=PASSAGE_TERMS, required=False, allow_null=True, help_text="Passages: short/long."
    )
    decayed = StrictBooleanField(required=False)
    superseded = StrictBooleanField(required=False)
    redundant = StrictBooleanField(required=False, help_text="Summaries only.")
    id = StrictCharField(required=False, allow_null=True, max_length=200)


class PassageSerializer(SupportingItemSerializer):
    """Passages are pruned by term (stages 3, 4, 6 and 9), so the term is required."""

    term = StrictChoiceField(choices=PASSAGE_TERMS)


# For the schema: the known sections, each a list of items (passages with their term).
SupportingSectionsSerializer = type(
    "SupportingSectionsSerializer",
    (serializers.Serializer,),
    {
        name: (PassageSerializer if name == "passages" else SupportingItemSerializer)(
            many=True, required=False
        )
        for name in KNOWN_SECTIONS
    },
)


@extend_schema_field(SupportingSectionsSerializer)
class SupportingField(serializers.Field):
    """Section name -> items, in the caller's ranking order."""

    def to_internal_value(self, data: Any) -> dict[str, list[dict[str, Any]]]:
        if not isinstance(data, Mapping):
            raise ValidationError(
                [f"Expected an object of section name -> items, got {json_type(data)}."]
            )
        sections: dict[str, list[dict[str, Any]]] = {}
        errors: dict[str, Any] = {}
        for name, items in data.items():
            if name not in KNOWN_SECTIONS:
                errors[str(name)] = [unknown_name_message(name, KNOWN_SECTIONS, "section")]
                continue
            child = PassageSerializer if name == "passages" else SupportingItemSerializer
            try:
                sections[name] = child(many=True).run_validation(items)
            except ValidationError as exc:
                errors[name] = exc.detail
        if errors:
            raise ValidationError(errors)
        return sections

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(
    {
        **layout_config_field_schema(),
        "description": "The seed's `memory:` fragment as an object or YAML text, with or "
        "without the top-level `memory` key. Unknown keys are rejected by dotted path.",
    }
)
class LayoutConfigField(serializers.Field):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping | str):
            raise ValidationError([f"Expected an object or YAML text, got {json_type(data)}."])
        try:
            return parse_memory_config(data)
        except LayoutConfigError as exc:
            raise ValidationError(exc.errors) from exc

    def to_representation(self, value: Any) -> Any:
        return value


class LayoutRequestSerializer(VocabularySerializer):
    """A chat prompt to lay out. Unknown keys and ill-typed values are rejected by name."""

    contextWindow = token_count(required=False, help_text="Default: the config's.")
    systemPromptTokens = token_count(default=0)
    toolSchemaTokens = token_count(default=0)
    outputBuffer = token_count(required=False, help_text="Default: the config's.")
    budgetRatio = ratio(
        required=False, help_text="Default: the config's supporting_context.budget_ratio."
    )
    history = ChatMessageSerializer(
        many=True, required=False, help_text="Current session, oldest first."
    )
    priorSessionHistory = ChatMessageSerializer(many=True, required=False)
    supporting = SupportingField(required=False)
    query = StrictCharField(required=False, default="", allow_blank=True, trim_whitespace=False)
    config = LayoutConfigField(required=False)
    workloadId = StrictUUIDField(
        required=False, help_text="Use this workload's stored config (a `config` here wins)."
    )

    def layout_request(self, config: LayoutConfig) -> LayoutRequest:
        """The validated data as the planner's typed request, planned with ``config``."""
        data = self.validated_data
        return LayoutRequest(
            history=tuple(Turn(**turn) for turn in data.get("history", [])),
            prior_session_history=tuple(
                Turn(**turn) for turn in data.get("priorSessionHistory", [])
            ),
            supporting={
                name: tuple(SupportingItem(**item) for item in items)
                for name, items in data.get("supporting", {}).items()
            },
            query=data["query"],
            system_prompt_tokens=data["systemPromptTokens"],
            tool_schema_tokens=data["toolSchemaTokens"],
            context_window=data.get("contextWindow"),
            output_buffer=data.get("outputBuffer"),
            budget_ratio=data.get("budgetRatio"),
            config=config,
        )


# --- response ---------------------------------------------------------------------------------
# Read off a ``LayoutPreview`` (the planned ``LayoutResult`` and the monitor's decision): each
# field names the attribute it shows, so this is the one place snake_case becomes camelCase.


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


class CamelKeysDictField(serializers.DictField):
    """A dict whose snake_case keys are shown in camelCase."""

    def to_representation(self, value: Any) -> dict[str, Any]:
        return {camel(key): item for key, item in super().to_representation(value).items()}


class FiniteFloatField(serializers.FloatField):
    """A float, or null where it is infinite (JSON has no infinity)."""

    def to_representation(self, value: Any) -> Any:
        number = float(value)
        return number if math.isfinite(number) else None


class LayoutStageSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    removed = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="What the stage removed, by part (turns, short_passages, a section, ...).",
    )
    estimateAfter = serializers.IntegerField(source="estimate_after")
    fits = serializers.BooleanField()


class LayoutTokensSerializer(serializers.Serializer):
    """The window split into parts; they add up to ``contextWindow`` when the layout fits."""

    fixed = serializers.IntegerField(source="fixed_costs")
    history = serializers.IntegerField(source="history_tokens")
    priorSessionHistory = serializers.IntegerField(source="prior_history_tokens")
    supporting = serializers.IntegerField(source="supporting_tokens")
    query = serializers.IntegerField(source="query_tokens")
    formatting = serializers.IntegerField(source="formatting_overhead")
    free = serializers.IntegerField(source="free_tokens")


class CompactionDecisionSerializer(serializers.Serializer):
    enabled = serializers.BooleanField(source="compaction_enabled")
    compact = serializers.BooleanField(source="compaction.compact")
    code = serializers.CharField(
        source="compaction.code",
        help_text="disabled, no_history, in_progress, cooldown, severity, rising_trend, not_needed",
    )
    reason = serializers.CharField(source="compaction.reason")
    severity = serializers.CharField(source="compaction.severity", allow_null=True)
    timeBudgetMs = serializers.IntegerField(source="compaction.time_budget_ms", allow_null=True)


# Where the configuration came from: only the view knows, so it is given in the serializer's
# context as ``config_source``, not read off the preview. (A comment, not a docstring: that
# would become the schema's description.)
class LayoutConfigSourceSerializer(serializers.Serializer):
    # A declared field (the metaclass takes it out of the class), not Field.source.
    source = StrictChoiceField(  # type: ignore[assignment]
        choices=["request", "workload", "default"]
    )
    workloadId = serializers.UUIDField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)

    def to_representation(self, instance: Any) -> Any:
        return super().to_representation(self.context["config_source"])


class LayoutResultSerializer(serializers.Serializer):
    contextWindow = serializers.IntegerField(source="result.context_window")
    fixedCosts = serializers.IntegerField(source="result.fixed_costs")
    dynamicBudget = serializers.IntegerField(source="result.dynamic_budget")
    supportingContextBudget = serializers.IntegerField(source="result.supporting_context_budget")
    formattingOverhead = serializers.IntegerField(source="result.formatting_overhead")
    estimateBeforePruning = serializers.IntegerField(source="result.estimate_before_pruning")
    estimatedTokens = serializers.IntegerField(source="result.estimated_tokens")
    availableBudget = serializers.IntegerField(source="result.available_budget")
    freeTokens = serializers.IntegerField(source="result.free_tokens")
    utilizationPct = FiniteFloatField(
        source="result.utilization_pct",
        allow_null=True,
        help_text="Of the dynamic budget; null when it is 0 and overfull.",
    )
    severity = serializers.CharField(source="result.severity")
    fits = serializers.BooleanField(source="result.fits")
    emergencyOverage = serializers.BooleanField(source="result.emergency_overage")
    stages = LayoutStageSerializer(source="result.stages", many=True)
    stagesRun = serializers.ListField(source="result.stages_run", child=serializers.IntegerField())
    tokens = LayoutTokensSerializer(source="result")
    history = ChatMessageSerializer(source="result.history", many=True)
    priorSessionHistory = ChatMessageSerializer(source="result.prior_session_history", many=True)
    supporting = serializers.DictField(
        source="result.supporting", child=SupportingItemSerializer(many=True)
    )
    filtered = CamelKeysDictField(
        source="result.filtered",
        child=serializers.IntegerField(),
        help_text="Items left out before pruning, by reason.",
    )
    warnings = serializers.ListField(source="result.warnings", child=serializers.CharField())
    compaction = CompactionDecisionSerializer(source="*")
    config = LayoutConfigSourceSerializer(source="*")


class LayoutConfigVersionSerializer(serializers.Serializer):
    workloadId = serializers.UUIDField()
    version = serializers.IntegerField(allow_null=True, help_text="null = the defaults apply.")
    isDefault = serializers.BooleanField()
    config = serializers.JSONField(help_text='The normalised document, `{"memory": {...}}`.')
    author = serializers.CharField(allow_null=True)
    comment = serializers.CharField(allow_blank=True)
    createdAt = serializers.DateTimeField(allow_null=True)
