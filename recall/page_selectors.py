"""Reads for the recall pages: the sandbox and the memory browser.

The memory browser's "recallable?" column is the recall filter itself, compiled by the engine
as one CASE expression (``recall.engine.policy_filter``), so the page can never disagree with
what recall would do. The sandbox's compare mode uses :func:`recall_preview`, the recall
pipeline without its writes (no audit event, no hit counts, no funnel cache fill), with every
decision on each side (:func:`decision_rows`); decisions are grouped by outcome
(:func:`decision_groups`), each filtered memory with the value
that failed, read in one bounded query (:func:`memory_policy_fields`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Concat
from django.utils import timezone

from policies import labels
from policies.axes import PolicyDocument
from policies.models import Workload
from portal.models import Workspace
from recall.assembly import DECISIONS_MAX, RecallRequest, recall_plan
from recall.engine.policy_filter import POLICY_CODES, SIMILARITY_CODE, policy_filter_expression
from recall.engine.read import RankedRow
from recall.envelope import ACTOR_UNKNOWN, Budget, Counts, Envelope
from recall.models import Actor, MemoryRecord
from recall.selectors import memory_list

# --- decision codes in words -------------------------------------------------------------------

DECISION_WORDS: dict[str, str] = {
    "included": "Included in the context",
    "truncated": "Kept as a truncated ref (id and metadata only)",
    "budget_floor_hit": "Dropped: kind held at its reserved floor",
    "budget_drop_order": "Dropped: kind cut in drop order under budget pressure",
    "budget_ceiling_hit": "Dropped: kind reached its token ceiling",
    "segment_kind_forbidden": "Dropped: segment kind is forbidden",
    "below_top_k": "Not selected: ranked below top K",
    "passes_policy": "Passed every policy axis",
    "memory_type_not_allowed": "Filtered: memory type not allowed",
    "source_kind_not_allowed": "Filtered: source kind not allowed",
    "confirmation_status_not_allowed": "Filtered: confirmation status not allowed",
    "confidence_below_min": "Filtered: inferred or observed, confidence below the minimum",
    "sensitivity_above_ceiling": "Filtered: more sensitive than the ceiling",
    "consent_not_allowed": "Filtered: consent basis not allowed",
    "older_than_max_age": "Filtered: older than the maximum age",
    "similarity_below_min": "Filtered: less similar to the query than the minimum similarity",
    "lifecycle_excluded": "Fail closed: not active, not current, expired or consent withdrawn",
    "embedding_pending": "Not recalled yet: waiting for the embedding job (not embedded by the"
    " configured embedder)",
    # The memory browser names the fail-closed rule a row breaks.
    "status_not_active": "Fail closed: lifecycle status is not active",
    "not_current": "Fail closed: superseded (not the current version)",
    "consent_withdrawn": "Fail closed: consent withdrawn",
    "expired": "Fail closed: past its expiry time",
}


def decision_words(code: str) -> str:
    return DECISION_WORDS.get(code, code.replace("_", " "))


# The envelope's warning codes in words (``diagnostics.warnings``); the planner's warnings are
# sentences already, shown as they are.
WARNING_WORDS: dict[str, str] = {
    ACTOR_UNKNOWN: "No actor of this id in the workspace yet: nothing to recall. The result is "
    "empty, and recorded as any recall; the actor exists once a memory is added for it.",
}


def warning_words(warning: str) -> str:
    return WARNING_WORDS.get(warning, warning)


# --- actors and audit --------------------------------------------------------------------------


def actor_suggestions(*, workspace: Workspace, q: str, limit: int = 15) -> list[str]:
    """``kind:name`` ids of the workspace's actors containing ``q``, for the actor datalist;
    never an erased one (an erasure leaves nothing to suggest)."""
    return list(
        Actor.objects.filter(workspace=workspace, erased_at__isnull=True)
        .annotate(external=Concat("kind", Value(":"), "name"))
        .filter(external__icontains=q.strip())
        .order_by("kind", "name")
        .values_list("external", flat=True)[:limit]
    )


# --- the memory browser: "recallable?" in the list query ----------------------------------------


def _recall_code(policy: PolicyDocument, now: datetime) -> RawSQL:
    """The first recall rule a row breaks under ``policy`` at ``now`` (the fail-closed one
    named), else ``passes_policy``."""
    return policy_filter_expression(policy, now, part="decision_explained", model=MemoryRecord)


def memory_rows(
    *,
    workspace: Workspace,
    actor: Actor | None,
    filters: Any,
    policy: PolicyDocument | None,
    now: datetime | None = None,
) -> QuerySet[MemoryRecord]:
    """The filtered memory list, of one actor or (``actor`` None) of the whole workspace;
    with a policy, each row also carries ``recall_code``."""
    rows = memory_list(actor=actor, workspace=workspace, filters=filters)
    if policy is None:
        return rows
    return rows.annotate(recall_code=_recall_code(policy, now or timezone.now()))


def _gated_confidence(status: str, confidence: float) -> str:
    """A memory the confidence minimum holds, in words: "inferred, confidence 0.38" (only
    inferred and observed memories are held to it, so the status is half the reason)."""
    return f"{labels.value_label(status)}, confidence {confidence:g}"


def recall_reason(memory: MemoryRecord, policy: Mapping[str, Any] | None = None) -> str:
    """Why a row is or is not recallable under ``policy`` (the one its ``recall_code`` was
    judged under), with the row's own value where it helps. The similarity floor needs a
    query, which the memory browser has not: a row that passes every other axis says so."""
    code = getattr(memory, "recall_code", None)
    if code is None:
        return ""
    if code == "passes_policy":
        floor = labels.query_dependent((policy or {}).get("similarityMin"))
        if floor:
            return f"Passes the fail-closed rules and every other policy axis; {floor}"
        return "Passes the fail-closed rules and every policy axis"
    detail = {
        "status_not_active": memory.lifecycle_status,
        "memory_type_not_allowed": memory.memory_type,
        "source_kind_not_allowed": memory.source_kind,
        "confirmation_status_not_allowed": memory.confirmation_status,
        "confidence_below_min": _gated_confidence(memory.confirmation_status, memory.confidence),
        "sensitivity_above_ceiling": memory.sensitivity,
        "consent_not_allowed": memory.consent_policy,
    }.get(code)
    words = decision_words(code)
    return f"{words} ({detail})" if detail else words


# --- the sandbox's read-only recall (compare mode) ----------------------------------------------


@dataclass(frozen=True)
class RecallPreview:
    """What a recall would return, computed without writing anything (not even the funnel
    cache)."""

    policy: PolicyDocument
    policy_hash: str
    budget_hash: str
    counts: Counts
    included: list[str]
    truncated: list[str]
    codes: dict[str, str]  # memory id -> decision code, for the rows the pipeline looked at
    rows: dict[str, RankedRow]  # the ranked rows (passed policy), by id
    budget: Budget
    # What the recall would return, with every decision whatever the policy's verbosity
    # (the sandbox shows each side's decisions and reasons).
    envelope: Envelope


def recall_preview(
    *,
    workspace: Workspace,
    workload: Workload,
    environment: str,
    actor_id: str,
    query: str,
    top_k: int,
    override: dict[str, Any] | None,
    token_budget_cap: int | None = None,
) -> RecallPreview:
    """What ``recall_assemble`` would return (``recall_plan``), with every decision code and
    without writing anything: a "what if" never shows up as a recall in the trail, and fills
    no funnel cache. ``token_budget_cap`` caps the policy's token budget, as a session's turn
    does (``RecallRequest.token_budget_cap``).

    Raises ``PolicyError`` for an override the floor does not permit.
    """
    assembly = recall_plan(
        request=RecallRequest(
            workspace=workspace, workload=workload, environment=environment, actor_id=actor_id,
            query=query, top_k=top_k, override=override, author="", verbosity="full",
            token_budget_cap=token_budget_cap,
        ),
        fill_cache=False, rejected_limit=DECISIONS_MAX,
    )  # fmt: skip
    plan, ranked = assembly.plan, assembly.scored[:top_k]
    codes = {str(row.id): "below_top_k" for row, _ in assembly.scored[top_k:]}
    codes.update({str(pk): SIMILARITY_CODE for pk, _ in assembly.found.below_listed})
    codes.update({str(pk): code for pk, code in assembly.found.rejections})
    codes.update({d.id: d.code.value for d in plan.decisions})
    return RecallPreview(
        policy=assembly.effective.policy,
        policy_hash=assembly.effective.policy_hash,
        budget_hash=assembly.effective.budget_hash,
        counts=assembly.envelope["diagnostics"]["counts"],
        included=list(plan.included_ids),
        truncated=list(plan.truncated_ids),
        codes=codes,
        rows={str(row.id): row for row, _ in ranked},
        budget=assembly.envelope["budget"],
        envelope=assembly.envelope,
    )


def memories_present(*, workspace: Workspace, ids: list[int]) -> set[int]:
    """Which of these memory ids still exist in the workspace (the others were deleted or
    erased)."""
    if not ids:
        return set()
    return set(
        MemoryRecord.objects.filter(workspace=workspace, pk__in=ids).values_list("pk", flat=True)
    )


def memory_codes(
    *, workspace: Workspace, ids: list[int], policy: PolicyDocument, now: datetime
) -> dict[int, tuple[MemoryRecord, str]]:
    """These memories (those that still exist) with the first recall rule each breaks under
    ``policy`` now (``passes_policy`` if none): the memory browser's judgement, for a set."""
    if not ids:
        return {}
    rows = (
        MemoryRecord.objects.filter(workspace=workspace, pk__in=ids)
        .select_related("actor")
        .defer("embedding", "content")
        .annotate(recall_code=_recall_code(policy, now))
    )
    return {row.pk: (row, row.recall_code) for row in rows}


# --- the sandbox's decisions, grouped by outcome ------------------------------------------------

# The policy filters' codes -> the axis each one enforces (the planner's forbidden kinds too).
FILTER_AXES: dict[str, str] = {
    "segment_kind_forbidden": "forbiddenSegmentKinds",
    "memory_type_not_allowed": "memoryTypeAllowed",
    "source_kind_not_allowed": "sourceKindAllowed",
    "confirmation_status_not_allowed": "confirmationStatusAllowed",
    "confidence_below_min": "confidenceMin",
    "sensitivity_above_ceiling": "sensitivityCeiling",
    "consent_not_allowed": "consentPolicyAllowed",
    "older_than_max_age": "maxAgeSeconds",
    SIMILARITY_CODE: "similarityMin",
}
assert set(POLICY_CODES) <= set(FILTER_AXES), "every filter names its axis"

# A set axis's code -> (the field in words, the model field).
_SET_FIELDS: dict[str, tuple[str, str]] = {
    "memory_type_not_allowed": ("memory type", "memory_type"),
    "source_kind_not_allowed": ("source", "source_kind"),
    "confirmation_status_not_allowed": ("confirmation", "confirmation_status"),
    "consent_not_allowed": ("consent", "consent_policy"),
}
# Why the budget dropped a ranked memory, after "Dropped by the budget".
BUDGET_WHY: dict[str, str] = {
    "budget_floor_hit": "its kind is held at its reserved floor",
    "budget_drop_order": "its kind is cut first under budget pressure (drop order)",
    "budget_ceiling_hit": "its kind reached its token ceiling",
}
# Outcomes the envelope counts but never lists, with what a page says after their number.
COUNTED_WORDS: dict[str, str] = {
    "below_top_k": "passed the policy but ranked below top K",
    "embedding_pending": "waiting for the embedding job (not embedded by the configured "
    "embedder yet)",
    "lifecycle_excluded": "excluded by the fail-closed rules (not active, not current, expired "
    "or consent withdrawn)",
}
# Rows shown per group before the rest collapse: what entered the context matters most.
SHOWN_KEPT = 10
SHOWN_DROPPED = 5
POLICY_FIELDS = (
    "memory_type",
    "source_kind",
    "confirmation_status",
    "confidence",
    "sensitivity",
    "consent_policy",
    "created_at",
    "segment_kind",
)


@dataclass(frozen=True)
class DecisionRow:
    id: str
    segment_kind: str
    why: str = ""  # the value that failed, or why the budget dropped it
    similarity: float | None = None
    score: float | None = None
    tokens: int | None = None
    content: str | None = None


@dataclass(frozen=True)
class DecisionGroup:
    """The memories that got one outcome (one filter, for the policy's)."""

    key: str  # included, truncated, budget, or a filter's code
    title: str
    codes: tuple[str, ...]  # the decision codes it gathers, as the envelope names them
    axis: str  # the policy axis a filter enforces; "" for the other outcomes
    count: int  # memories with this outcome; more than the rows when the report was capped
    rows: list[DecisionRow]
    ranked: bool  # the rows were ranked: they have a similarity, a score and tokens
    shown: int  # rows shown before the rest collapse

    @property
    def first(self) -> list[DecisionRow]:
        return self.rows[: self.shown]

    @property
    def rest(self) -> list[DecisionRow]:
        return self.rows[self.shown :]

    @property
    def unlisted(self) -> int:
        return self.count - len(self.rows)


@dataclass(frozen=True)
class CountedOutcome:
    code: str
    words: str
    n: int


@dataclass(frozen=True)
class SandboxDecisions:
    groups: list[DecisionGroup]
    counted: list[CountedOutcome]  # never listed: below top K, pending, fail-closed


def failed_value(
    code: str, row: Mapping[str, Any], policy: Mapping[str, Any], now: datetime
) -> str:
    """The row's value that failed a filter, against the policy's: "inferred, confidence 0.38 <
    0.5"."""
    axis = FILTER_AXES[code]
    limit = policy.get(axis)
    if code == "confidence_below_min":
        return f"{_gated_confidence(row['confirmation_status'], row['confidence'])} < {limit:g}"
    if code == "sensitivity_above_ceiling":
        return f"sensitivity {row['sensitivity']} > {limit}"
    if code == "older_than_max_age":
        age = (now - row["created_at"]).total_seconds()
        return f"age {labels.duration_label(age)} > {labels.duration_label(limit)}"
    if code == SIMILARITY_CODE:
        return f"similarity {row['similarity']:.2f} < {labels.axis_value(axis, limit)}"
    if code == "segment_kind_forbidden":
        return f"segment kind {labels.value_label(row['segment_kind'])} is forbidden"
    words, field = _SET_FIELDS[code]
    allowed = labels.axis_value(axis, limit)
    return f"{words} {labels.value_label(row[field])}; allowed: {allowed}"


def decision_groups(
    *,
    envelope: Envelope,
    policy: Mapping[str, Any] | None,
    fields: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> SandboxDecisions:
    """An envelope's decisions grouped by outcome, each filtered row with the value that
    failed (``fields``: the filtered memories' own values; ``policy``: the one the recall ran
    under, or None when it is not known, and then no value is shown)."""
    diagnostics = envelope["diagnostics"]
    reasons: dict[str, int] = diagnostics.get("reasons", {})
    contents = {e["id"]: e["content"] for e in envelope["entries"]}
    rows: dict[str, list[DecisionRow]] = {}
    for d in diagnostics.get("decisions", []):
        code, pk = d["code"], d["id"]
        own = fields.get(pk, {})
        kind = d.get("segmentKind") or own.get("segment_kind", "")
        why = BUDGET_WHY.get(code, "")
        judged = own or "segmentKind" in d or "similarity" in d
        if code in FILTER_AXES and policy is not None and judged:
            row = {**own, "segment_kind": kind, "similarity": d.get("similarity")}
            why = failed_value(code, row, policy, now)
        key = "budget" if code in BUDGET_WHY else code
        rows.setdefault(key, []).append(
            DecisionRow(
                id=pk,
                segment_kind=kind,
                why=why,
                similarity=d.get("similarity"),
                score=d.get("score"),
                tokens=d.get("tokens"),
                content=contents.get(pk),
            )
        )
    outlines = [
        ("included", "Included in the context", ("included",), "", SHOWN_KEPT),
        ("truncated", "Kept as truncated refs", ("truncated",), "", SHOWN_KEPT),
        ("budget", "Dropped by the budget", tuple(BUDGET_WHY), "", SHOWN_DROPPED),
        *(
            (code, labels.axis_label(axis), (code,), axis, SHOWN_DROPPED)
            for code, axis in FILTER_AXES.items()
        ),
    ]
    groups = []
    for key, title, codes, axis, shown in outlines:
        listed = rows.get(key, [])
        count = max(sum(reasons.get(code, 0) for code in codes), len(listed))
        if count:
            ranked = any(row.score is not None for row in listed)
            groups.append(DecisionGroup(key, title, codes, axis, count, listed, ranked, shown))
    counted = [
        CountedOutcome(code, words, reasons[code])
        for code, words in COUNTED_WORDS.items()
        if reasons.get(code)
    ]
    return SandboxDecisions(groups, counted)


def memory_policy_fields(*, workspace: Workspace, ids: list[str]) -> dict[str, dict[str, Any]]:
    """What the policy filters read of these memories (never their content), by id: one
    query, bounded by the decisions a recall reports (``DECISIONS_MAX``)."""
    if not ids:
        return {}
    rows = MemoryRecord.objects.filter(workspace=workspace, pk__in=[int(pk) for pk in ids])
    return {str(row.pop("pk")): row for row in rows.values("pk", *POLICY_FIELDS)}


def sandbox_decisions(
    *, workspace: Workspace, envelope: Envelope, policy: Mapping[str, Any] | None
) -> SandboxDecisions:
    """The sandbox's decisions for one envelope, each filtered row with its failing value."""
    filtered = [
        d["id"]
        for d in envelope["diagnostics"].get("decisions", [])
        if d["code"] in FILTER_AXES and "segmentKind" not in d
    ]
    fields = memory_policy_fields(workspace=workspace, ids=filtered[:DECISIONS_MAX])
    now = datetime.fromisoformat(envelope["generatedAt"])
    return decision_groups(envelope=envelope, policy=policy, fields=fields, now=now)


def decision_rows(*, workspace: Workspace, preview: RecallPreview) -> dict[str, DecisionRow]:
    """A preview's listed decisions by memory id, each with why (the value that failed, or why
    the budget dropped it): one side of the sandbox's compare view."""
    decisions = sandbox_decisions(
        workspace=workspace, envelope=preview.envelope, policy=preview.policy
    )
    return {row.id: row for group in decisions.groups for row in group.rows}
