"""Reads for the recall pages: the sandbox and the memory browser.

The memory browser's "recallable?" column is one CASE expression built from the recall
filter's own SQL (``FAIL_CLOSED_SQL`` and ``POLICY_CHECKS``), so the page can never disagree
with what recall would do. The sandbox's compare mode uses :func:`recall_preview`, the recall
pipeline without its writes (no audit event, no hit counts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Concat
from django.utils import timezone

from audit.models import AuditEvent, EventType
from policies.models import Workload, Workspace
from recall.models import Actor, MemoryRecord
from recall.selectors import (
    EMBEDDED_SQL,
    FAIL_CLOSED_SQL,
    POLICY_CHECKS,
    RankedRow,
    memory_list,
    policy_params,
)
from recall.services import DECISIONS_MAX, RecallRequest, recall_plan

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
    "confidence_below_min": "Filtered: confidence below the minimum",
    "sensitivity_above_ceiling": "Filtered: more sensitive than the ceiling",
    "consent_not_allowed": "Filtered: consent basis not allowed",
    "older_than_max_age": "Filtered: older than the maximum age",
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


# --- actors and audit --------------------------------------------------------------------------


def actor_suggestions(*, workspace: Workspace, q: str, limit: int = 15) -> list[str]:
    """``kind:name`` ids of the workspace's actors containing ``q``, for the actor datalist."""
    return list(
        Actor.objects.filter(workspace=workspace)
        .annotate(external=Concat("kind", Value(":"), "name"))
        .filter(external__icontains=q.strip())
        .order_by("kind", "name")
        .values_list("external", flat=True)[:limit]
    )


def assembled_event_id(*, workspace: Workspace, envelope_id: str) -> int | None:
    """The ``context.assembled`` event a recall wrote, found by its envelope id."""
    return (
        AuditEvent.objects.filter(
            workspace=workspace, type=EventType.ASSEMBLED, payload__envelopeId=envelope_id
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


# --- the memory browser: "recallable?" in the list query ----------------------------------------

_NAMED_PARAM = re.compile(r"%\((\w+)\)s")
_ALIAS = re.compile(r"\bm\.")

# Which fail-closed rule a row breaks, checked only once FAIL_CLOSED_SQL itself said "no".
_FAIL_CLOSED_WHY = (
    "CASE WHEN m.lifecycle_status <> 'active' THEN 'status_not_active'"
    " WHEN NOT m.is_current THEN 'not_current'"
    " WHEN m.consent_policy = 'withdrawn' THEN 'consent_withdrawn'"
    " WHEN m.expires_at <= %(now)s THEN 'expired'"
    " ELSE 'lifecycle_excluded' END"
)


def recall_code_sql() -> str:
    """The recall filter as one CASE: the first rule a row breaks, else ``passes_policy``."""
    whens = " ".join(
        f"WHEN NOT COALESCE({check}, false) THEN '{code}'" for code, check in POLICY_CHECKS
    )
    return (
        f"CASE WHEN NOT ({FAIL_CLOSED_SQL}) THEN {_FAIL_CLOSED_WHY}"
        f" WHEN NOT COALESCE({EMBEDDED_SQL}, false) THEN 'embedding_pending' {whens}"
        " ELSE 'passes_policy' END"
    )


def _for_orm(sql: str, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """Named ``%(x)s`` placeholders → positional ones, and the ``m`` alias → the real table.

    The ORM composes positional parameters only, and names the base table by its own name.
    """
    table = f'"{MemoryRecord._meta.db_table}".'
    names = _NAMED_PARAM.findall(sql)
    return _ALIAS.sub(table, _NAMED_PARAM.sub("%s", sql)), [params[name] for name in names]


def memory_rows(
    *,
    actor: Actor,
    filters: Any,
    policy: dict[str, Any] | None,
    now: datetime | None = None,
) -> QuerySet[MemoryRecord]:
    """The filtered memory list; with a policy, each row also carries ``recall_code``."""
    rows = memory_list(actor=actor, filters=filters)
    if policy is None:
        return rows
    sql, params = _for_orm(recall_code_sql(), policy_params(policy, now or timezone.now()))
    return rows.annotate(recall_code=RawSQL(sql, params))


def recall_reason(memory: MemoryRecord) -> str:
    """Why a row is or is not recallable, with the row's own value where it helps."""
    code = getattr(memory, "recall_code", None)
    if code is None:
        return ""
    if code == "passes_policy":
        return "Passes the fail-closed rules and every policy axis"
    detail = {
        "status_not_active": memory.lifecycle_status,
        "memory_type_not_allowed": memory.memory_type,
        "source_kind_not_allowed": memory.source_kind,
        "confirmation_status_not_allowed": memory.confirmation_status,
        "confidence_below_min": f"{memory.confidence:g}",
        "sensitivity_above_ceiling": memory.sensitivity,
        "consent_not_allowed": memory.consent_policy,
    }.get(code)
    words = decision_words(code)
    return f"{words} ({detail})" if detail else words


# --- the sandbox's read-only recall (compare mode) ----------------------------------------------


@dataclass(frozen=True)
class RecallPreview:
    """What a recall would return, computed without writing anything."""

    policy: dict[str, Any]
    policy_hash: str
    budget_hash: str
    counts: dict[str, int]
    included: list[str]
    truncated: list[str]
    codes: dict[str, str]  # memory id -> decision code, for the rows the pipeline looked at
    rows: dict[str, RankedRow]  # the ranked rows (passed policy), by id
    budget: dict[str, Any]  # the envelope's ``budget`` shape


def recall_preview(
    *,
    workspace: Workspace,
    workload: Workload,
    environment: str,
    actor_id: str,
    query: str,
    top_k: int,
    override: dict[str, Any] | None,
) -> RecallPreview:
    """What ``recall_assemble`` would return (``recall_plan``), with every decision code and
    without recording anything: a "what if" never shows up as a recall in the trail.

    Raises ``PolicyError`` for an override the floor does not permit.
    """
    assembly = recall_plan(
        request=RecallRequest(
            workspace=workspace, workload=workload, environment=environment, actor_id=actor_id,
            query=query, top_k=top_k, override=override, author="",
        ),
        rejected_limit=DECISIONS_MAX,
    )  # fmt: skip
    plan, ranked = assembly.plan, assembly.scored[:top_k]
    codes = {str(row.id): "below_top_k" for row, _ in assembly.scored[top_k:]}
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
    *, workspace: Workspace, ids: list[int], policy: dict[str, Any], now: datetime
) -> dict[int, tuple[MemoryRecord, str]]:
    """These memories (those that still exist) with the first recall rule each breaks under
    ``policy`` now (``passes_policy`` if none): the memory browser's judgement, for a set."""
    if not ids:
        return {}
    sql, params = _for_orm(recall_code_sql(), policy_params(policy, now))
    rows = (
        MemoryRecord.objects.filter(workspace=workspace, pk__in=ids)
        .select_related("actor")
        .defer("embedding", "content")
        .annotate(recall_code=RawSQL(sql, params))
    )
    return {row.pk: (row, row.recall_code) for row in rows}
