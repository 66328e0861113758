from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from policies.algebra import VOCABULARIES
from policies.api.schemas import policy_axes_schema
from portal.api.fields import (
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictFloatField,
    StrictIntegerField,
    StrictRegexField,
    StrictUUIDField,
)
from portal.api.strict import StrictSerializer
from recall.assembly import TOP_K_MAX
from recall.models import LifecycleStatus, MemoryRecord, Tier
from recall.runtime import recallable_models
from recall.services import ACTOR_KEY

MEMORY_BATCH_MAX = 1000

# camelCase wire name -> model field
MEMORY_FIELDS = {
    "content": "content",
    "memoryType": "memory_type",
    "sourceKind": "source_kind",
    "confirmationStatus": "confirmation_status",
    "confidence": "confidence",
    "sensitivity": "sensitivity",
    "consentPolicy": "consent_policy",
    "segmentKind": "segment_kind",
    "lifecycleStatus": "lifecycle_status",
    "isCurrent": "is_current",
    "expiresAt": "expires_at",
    "createdAt": "created_at",
    "lastAccessedAt": "last_accessed_at",
    "hitCount": "hit_count",
    "tier": "tier",
    "staleSince": "stale_since",
    "id": "id",
}


def _choice(vocabulary: str, **kwargs: Any) -> StrictChoiceField:
    return StrictChoiceField(choices=list(VOCABULARIES[vocabulary]), **kwargs)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "pattern": "^[1-9][0-9]{0,17}$"},
            {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        ]
    }
)
class MemoryIdField(serializers.Field):
    """A memory id as the API writes it (a string of ASCII digits) or as a JSON integer."""

    default_error_messages = {"invalid": 'A memory id is a positive integer, such as "123".'}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, str) and data.isascii() and data.isdigit() and len(data) < 19:
            data = int(data)
        if not isinstance(data, int) or not 0 < data < 2**63:
            self.fail("invalid")
        return int(data)

    def to_representation(self, value: Any) -> str:
        return str(value)


class MemoryInputSerializer(StrictSerializer):
    """One memory to write. ``id`` and ``actorId`` let an archive written by the retention
    sweep be imported back as it was (``recall.services.memory_import`` checks both)."""

    content = StrictCharField(max_length=20_000, trim_whitespace=True)
    memoryType = _choice("memoryType")
    sourceKind = _choice("sourceKind")
    confirmationStatus = _choice("confirmationStatus", default="unknown")
    confidence = StrictFloatField(min_value=0.0, max_value=1.0, default=1.0)
    sensitivity = _choice("sensitivity", default="internal")
    consentPolicy = _choice("consentPolicy", default="unknown")
    segmentKind = _choice("segmentKind", default="memory")
    lifecycleStatus = StrictChoiceField(
        choices=LifecycleStatus.values, default=LifecycleStatus.ACTIVE
    )
    isCurrent = StrictBooleanField(default=True)
    expiresAt = serializers.DateTimeField(required=False, allow_null=True)
    createdAt = serializers.DateTimeField(required=False)
    lastAccessedAt = serializers.DateTimeField(required=False, allow_null=True)
    hitCount = StrictIntegerField(min_value=0, max_value=2_000_000_000, default=0)
    tier = StrictChoiceField(choices=Tier.choices, default=Tier.SHORT_TERM)
    staleSince = serializers.DateTimeField(required=False, allow_null=True)
    id = MemoryIdField(required=False)
    actorId = StrictCharField(required=False, max_length=250)

    def to_model_fields(self) -> dict[str, Any]:
        """Model field names; an ``actorId`` stays as ``ACTOR_KEY`` for the import to check."""
        return _model_fields(self.validated_data)

    @classmethod
    def check_each(
        cls, items: Iterable[Mapping[str, Any]]
    ) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any]]]:
        """Each item's model fields, or its errors by field, checked by ONE instance: a
        serializer copies its declared fields on first use, and a batch of 1,000 memories
        spent most of its validation copying them once per item."""
        checker = cls()
        for item in items:
            try:
                validated = checker.run_validation(item)
            except serializers.ValidationError as exc:
                detail = exc.detail
                yield None, dict(detail) if isinstance(detail, Mapping) else {"item": detail}
            else:
                yield _model_fields(validated), {}


def _model_fields(validated: Mapping[str, Any]) -> dict[str, Any]:
    return {
        (ACTOR_KEY if key == "actorId" else MEMORY_FIELDS[key]): value
        for key, value in validated.items()
    }


class MemoryPatchSerializer(MemoryInputSerializer):
    """PATCH: any subset; import-only fields (createdAt, hitCount, ids) cannot be edited."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name in ("createdAt", "lastAccessedAt", "hitCount", "staleSince", "id", "actorId"):
            fields.pop(name)
        return fields


class MemorySerializer(serializers.ModelSerializer):
    actorId = serializers.CharField(source="actor.external_id")
    memoryType = serializers.CharField(source="memory_type")
    sourceKind = serializers.CharField(source="source_kind")
    confirmationStatus = serializers.CharField(source="confirmation_status")
    consentPolicy = serializers.CharField(source="consent_policy")
    segmentKind = serializers.CharField(source="segment_kind")
    lifecycleStatus = serializers.CharField(source="lifecycle_status")
    isCurrent = serializers.BooleanField(source="is_current")
    supersededBy = serializers.CharField(source="superseded_by_id", allow_null=True)
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    # With the recalls not counted into the columns yet (recall/hits.py).
    lastAccessedAt = serializers.DateTimeField(source="last_accessed", allow_null=True)
    hitCount = serializers.IntegerField(source="hits")
    tokenCount = serializers.IntegerField(source="token_count")
    embeddingModel = serializers.CharField(source="embedding_model")
    embeddingPending = serializers.SerializerMethodField(
        help_text="True until the configured embedder has embedded the memory (or an earlier "
        "version of it whose vectors it still compares): until then it is not recalled "
        "(counted as embedding_pending)."
    )
    staleSince = serializers.DateTimeField(source="stale_since", allow_null=True)
    id = serializers.CharField()

    def get_embeddingPending(self, memory: MemoryRecord) -> bool:
        return memory.embedding_model not in recallable_models()

    class Meta:
        model = MemoryRecord
        fields = [
            "id", "actorId", "content", "memoryType", "sourceKind", "confirmationStatus",
            "confidence", "sensitivity", "consentPolicy", "segmentKind", "lifecycleStatus",
            "tier", "isCurrent", "supersededBy", "expiresAt", "staleSince", "createdAt",
            "updatedAt", "lastAccessedAt", "hitCount", "tokenCount", "embeddingModel",
            "embeddingPending",
        ]  # fmt: skip


class MemoryBatchInputSerializer(StrictSerializer):
    """For the schema: the view's ``_validate_batch`` checks a batch item by item."""

    memories: serializers.ListSerializer = serializers.ListSerializer(
        child=MemoryInputSerializer(), min_length=1, max_length=MEMORY_BATCH_MAX
    )


class MemoryBatchSerializer(serializers.Serializer):
    memories = MemorySerializer(many=True)
    count = serializers.IntegerField()


# The memory import takes one memory or a batch, and answers in the same form.
MEMORY_IMPORT_REQUEST = PolymorphicProxySerializer(
    component_name="MemoryImport",
    serializers=[MemoryInputSerializer, MemoryBatchInputSerializer],
    resource_type_field_name=None,
)
MEMORY_IMPORT_RESPONSE = PolymorphicProxySerializer(
    component_name="MemoryImported",
    serializers=[MemorySerializer, MemoryBatchSerializer],
    resource_type_field_name=None,
)


# An empty query embeds to nothing in particular: every similarity would be 0 and the ranking
# meaningless, so a recall without one is refused rather than answered.
QUERY_REQUIRED = (
    "Enter a query: recall ranks the actor's memories by how similar they are to it, and an "
    "empty query would score every memory 0."
)


@extend_schema_field({**policy_axes_schema(every_axis=False), "nullable": True})
class PolicyOverrideField(serializers.DictField):
    """Axes this recall narrows (or, where the floor lets it, relaxes); the algebra checks."""


class RecallRequestSerializer(StrictSerializer):
    workloadId = StrictUUIDField()
    environment = StrictRegexField(
        r"^[a-z0-9][a-z0-9-]{0,49}$", error_messages={"invalid": "Not an environment slug."}
    )
    query = StrictCharField(
        max_length=10_000, error_messages={"blank": QUERY_REQUIRED, "required": QUERY_REQUIRED}
    )
    topK = StrictIntegerField(min_value=1, max_value=TOP_K_MAX, default=10)
    policyOverride = PolicyOverrideField(required=False, allow_null=True)


_RECALL_KEYS = frozenset(RecallRequestSerializer._declared_fields)
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ENVIRONMENT = re.compile(r"[a-z0-9][a-z0-9-]{0,49}")


def recall_request_plain(data: Any) -> dict[str, Any] | None:
    """``RecallRequestSerializer``'s validated data for a request that is plainly valid, in a
    hundredth of its time (it builds its fields anew for each request); None for anything
    else, which the serializer then checks and, if it must, refuses with its own messages.

    "Plainly valid": only known keys, a lowercase canonical workload UUID, an environment slug
    and a query without surrounding whitespace, NUL or lone surrogates, up to 10,000
    characters, an integer ``topK`` in range or none, no ``policyOverride`` (or null). Whatever
    this accepts, the serializer accepts with the same result (tests/recall/
    test_recall_request.py checks it on generated requests)."""
    if type(data) is not dict or not data.keys() <= _RECALL_KEYS:
        return None
    workload, environment = data.get("workloadId"), data.get("environment")
    query, top_k = data.get("query"), data.get("topK", 10)
    if (
        type(workload) is not str
        or not _CANONICAL_UUID.fullmatch(workload)
        or type(environment) is not str
        or not _ENVIRONMENT.fullmatch(environment)
        or type(query) is not str
        or not 0 < len(query) <= 10_000
        or query != query.strip()
        or "\x00" in query
        or type(top_k) is not int
        or not 1 <= top_k <= TOP_K_MAX
        or data.get("policyOverride") is not None
    ):
        return None
    try:
        query.encode("utf-8")  # lone surrogates cannot be encoded (the serializer refuses them)
    except UnicodeEncodeError:
        return None
    plain = {
        "workloadId": uuid.UUID(workload),
        "environment": environment,
        "query": query,
        "topK": top_k,
    }
    if "policyOverride" in data:
        plain["policyOverride"] = None
    return plain


class InjectionSerializer(serializers.Serializer):
    """One envelope that carried a memory (read from the audit trail's injection index)."""

    eventId = serializers.IntegerField(source="event_id")
    envelopeId = serializers.CharField(source="envelope_id", allow_null=True)
    occurredAt = serializers.DateTimeField(source="event.occurred_at")
    workloadId = serializers.UUIDField(source="event.workload_id", allow_null=True)
    environment = serializers.CharField(source="event.environment")
    caller = serializers.CharField(source="event.author")
    truncated = serializers.BooleanField(help_text="Carried as a truncated ref, not an entry.")


class ActorEraseSerializer(StrictSerializer):
    expectedCount = StrictIntegerField(
        required=False,
        min_value=0,
        help_text="The number of memories you expect to erase; if the actor has another "
        "number now, nothing is erased (409 COUNT_CHANGED).",
    )


class MemorySuppressSerializer(StrictSerializer):
    reason = StrictCharField(
        required=False,
        allow_blank=True,
        help_text="Why the memory must not be recalled, kept in the `memory.changed` event "
        "(at most 500 characters). Optional here; the portal's form asks for it.",
    )


class MemoryReactivateSerializer(StrictSerializer):
    expiresAt = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="A new expiry, in the future; null clears it. Without it, an expiry already "
        "past is cleared and one still ahead is kept.",
    )


class ErasureSerializer(serializers.Serializer):
    actorId = serializers.CharField(source="actor_id")
    erasedAt = serializers.DateTimeField(source="erased_at")
    erasedBy = serializers.CharField(source="erased_by")
    count = serializers.IntegerField(help_text="Memories erased by this call (0 if erased before).")
    archiveLinesRemoved = serializers.IntegerField(source="archive_lines")
    queriesRemoved = serializers.IntegerField(
        source="queries", help_text="Stored query texts of the actor's recalls deleted."
    )
    sessionsRemoved = serializers.SerializerMethodField(
        help_text="The actor's chat sessions deleted, with their turns and prompts."
    )
    turnsRemoved = serializers.SerializerMethodField(
        help_text="The turns (messages) of those sessions deleted."
    )
    eventId = serializers.IntegerField(source="event_id", allow_null=True)
    alreadyErased = serializers.SerializerMethodField()

    def get_sessionsRemoved(self, done: Any) -> int:
        return int(done.removed.get("sessionsRemoved", 0))

    def get_turnsRemoved(self, done: Any) -> int:
        return int(done.removed.get("turnsRemoved", 0))

    def get_alreadyErased(self, done: Any) -> bool:
        return done.event_id is None


class ReplayRequestSerializer(StrictSerializer):
    query = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=20_000,
        help_text="The recall's query, when the workspace does not store queries; checked "
        "against the event's query hash.",
    )


class ReplayedMemorySerializer(serializers.Serializer):
    id = serializers.CharField()
    change = StrictChoiceField(choices=["entered", "left", "stayed"])
    then = serializers.CharField(allow_null=True, help_text='"entry", "truncated" or null')
    now = serializers.CharField(allow_null=True, help_text='"entry", "truncated" or null')
    reason = serializers.CharField()
    words = serializers.CharField()
    present = serializers.BooleanField(help_text="False once the memory was deleted or erased.")


class ReplaySerializer(serializers.Serializer):
    eventId = serializers.IntegerField(source="event.pk")
    envelopeId = serializers.SerializerMethodField()
    query = serializers.SerializerMethodField()
    then = serializers.SerializerMethodField()
    now = serializers.SerializerMethodField()
    changedVersions = serializers.ListField(
        source="changed_versions", child=serializers.CharField()
    )
    counts = serializers.SerializerMethodField()
    memories = ReplayedMemorySerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())

    def get_envelopeId(self, replay: Any) -> str | None:
        return replay.event.payload.get("envelopeId")

    def get_query(self, replay: Any) -> dict[str, Any]:
        return {"source": replay.query_source, "checked": replay.query_checked}

    @extend_schema_field(
        {
            "type": "object",
            "additionalProperties": {},
            "description": "The recorded recall: occurredAt, policyVersions, "
            "effectivePolicyHash and digest (its envelope's).",
        }
    )
    def get_then(self, replay: Any) -> dict[str, Any]:
        return {
            "occurredAt": replay.event.occurred_at.isoformat(),
            "policyVersions": replay.then_versions,
            "effectivePolicyHash": replay.then_policy_hash,
            "digest": replay.event.payload.get("digest"),
        }

    @extend_schema_field(
        {
            "type": "object",
            "additionalProperties": {},
            "description": "This run: policyVersions, policyOverride (the override applied), "
            "effectivePolicyHash, counts, digest (its envelope's) and tokenBudgetCap (the cap "
            "a session turn's recall recorded and this run applied; null without one).",
        }
    )
    def get_now(self, replay: Any) -> dict[str, Any]:
        return {
            "policyVersions": replay.now_versions,
            "policyOverride": replay.override,
            "effectivePolicyHash": replay.now_policy_hash,
            "counts": replay.now_counts,
            "digest": replay.now_digest,
            "tokenBudgetCap": replay.token_budget_cap,
        }

    def get_counts(self, replay: Any) -> dict[str, int]:
        return dict(replay.counts())
