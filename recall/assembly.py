"""A recall, assembled: the pipeline of SPEC §5 from the request to the recorded envelope.

``recall_plan`` computes everything a recall returns, recording nothing (the sandbox's
previews and replay use it as it is); ``recall_assemble`` records it: one statement writes the
``context.assembled`` event, its lane's new tip, its injections (its hits, counted later by
``recall.hits``) and, when the workspace stores queries, the query text beside the event.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.utils import timezone

from audit.models import AuditEvent, EventType
from audit.services import (
    DRY_RUN_ORIGIN,
    AppendWork,
    ChainTip,
    Injections,
    QueryKept,
    append_lane,
    audit_event_append,
)
from policies.axes import PolicyDocument
from policies.models import Workload
from policies.selectors import (
    EffectivePolicy,
    effective_policy_for,
    effective_policy_remembered,
)
from portal.models import Workspace
from portal.tokens import TokenCheck
from recall.engine.policy_filter import SIMILARITY_CODE
from recall.engine.read import (
    Funnel,
    RankedRow,
    RecallCandidates,
    recall_read,
)
from recall.envelope import (
    ACTOR_UNKNOWN,
    Counts,
    Diagnostics,
    Entry,
    Envelope,
    ReportedDecision,
    TruncatedRef,
    content_hash,
    context_digest,
    prefix_fingerprint,
    query_hash,
)
from recall.hits import hits_fold_due
from recall.planner import BudgetPlan, BudgetPolicy, Candidate, plan_budget
from recall.runtime import query_embedding, token_estimator
from recall.scoring import inclusion_score

# --- recall -------------------------------------------------------------------------------------

TOP_K_MAX = 200
DECISIONS_MAX = 200
RERANK_POOL_MIN = 30
RERANK_POOL_FACTOR = 3


@dataclass(frozen=True)
class RecallRequest:
    workspace: Workspace
    workload: Workload
    environment: str
    actor_id: str
    query: str
    top_k: int
    override: dict[str, Any] | None
    author: str
    # The API token, when the call took it as remembered without looking it up: checked by
    # the read, or looked up before any other statement (``portal.tokens.TokenCheck``).
    token_check: TokenCheck | None = None
    # Who asked: an agent through the API (""), or the sandbox (``SANDBOX``), whose recall is
    # recorded like any but is a dry run: it counts no hits and touches no lifecycle field.
    origin: str = ""
    # A recall that is one part of a larger context (a session's turn, ``chat.assembly``):
    # its token budget is the smaller of the policy's and this cap (the event records both),
    # and its event names the session and the turn it was assembled for.
    token_budget_cap: int | None = None
    session_id: str | None = None
    turn_index: int | None = None
    # The diagnostics to report, when not the policy's: the sandbox's "show every decision"
    # asks for ``full`` (an editor may read every memory anyway). An agent's recall reports
    # what its policy says.
    verbosity: str | None = None

    def verbosity_under(self, policy: PolicyDocument) -> str:
        return self.verbosity or str(policy["diagnosticsVerbosity"])


SANDBOX = DRY_RUN_ORIGIN


@dataclass(frozen=True)
class Assembly:
    """Everything one recall computed, before anything is recorded."""

    effective: EffectivePolicy
    found: RecallCandidates
    scored: list[tuple[RankedRow, float]]  # the whole re-scored pool, best first
    plan: BudgetPlan
    envelope: Envelope
    now: datetime

    @property
    def actor_unknown(self) -> bool:
        """The workspace has no actor of this id: the envelope is empty (``ACTOR_UNKNOWN``)."""
        return self.found.actor_pk is None


def recall_plan(
    *, request: RecallRequest, fill_cache: bool, rejected_limit: int | None = None
) -> Assembly:
    """The recall pipeline (SPEC §5) up to the envelope, recording nothing: one policy query
    and one read statement (funnel, nearest rows, previous fingerprint, chain tip), or the
    read alone when the policy this process remembers for the workload is still current. With
    ``fill_cache``, that statement also stores a large actor's funnel (``FunnelCache``), the
    only thing it writes; without, it writes nothing.

    ``rejected_limit`` overrides how many policy-rejected ids to fetch (by default: up to
    ``DECISIONS_MAX`` at verbosity full, none otherwise).

    An actor the workspace has never had is recalled as one without memories, with the
    warning ``ACTOR_UNKNOWN``: a recall reads, it creates no actor (a memory write does).
    """
    now = timezone.now()
    query_vector = query_embedding(request.query)

    check = request.token_check

    def read(effective: EffectivePolicy) -> RecallCandidates:
        rejected = rejected_limit
        if rejected is None:
            full = request.verbosity_under(effective.policy) == "full"
            rejected = DECISIONS_MAX if full else 0
        found = read_once(effective, rejected)
        if check is not None and not check.checked(found.token_ok):
            check.confirm()  # TokenChanged, unless the scope alone was not as noted
            found = read_once(effective, rejected)
        return found

    def read_once(effective: EffectivePolicy, rejected: int) -> RecallCandidates:
        return recall_read(
            workspace_id=request.workspace.pk,
            workload_id=request.workload.id,
            environment=request.environment,
            actor_id=request.actor_id,
            policy=effective.policy,
            query_vector=query_vector,
            limit=max(request.top_k * RERANK_POOL_FACTOR, RERANK_POOL_MIN),
            rejected_limit=rejected,
            now=now,
            fill_cache=fill_cache,
            lane=append_lane(),
            token=check,
        )

    # The policy this process last computed for the workload, checked by the read itself (one
    # round trip fewer); asked for and read again when the context has changed since.
    remembered = (
        None
        if request.override
        else effective_policy_remembered(workload=request.workload, environment=request.environment)
    )
    if remembered is not None:
        effective = remembered[1]
        found = read(effective)
    if remembered is None or found.policy_context != remembered[0]:
        if check is not None:
            check.confirm()  # before any statement that does not check the token itself
        effective = effective_policy_for(
            workload=request.workload, environment=request.environment, override=request.override
        )
        found = read(effective)
    policy = effective.policy
    scored = _rescore(found.rows, now)
    ranked = scored[: request.top_k]
    budget = BudgetPolicy.from_policy(policy)
    if request.token_budget_cap is not None:
        cap = max(0, request.token_budget_cap)
        budget = replace(budget, total_token_budget=min(cap, budget.total_token_budget))
    plan = plan_budget(
        [Candidate(str(row.id), row.segment_kind, row.token_count, score) for row, score in ranked],
        budget,
    )
    warnings = [ACTOR_UNKNOWN] if found.actor_pk is None else []
    envelope = _envelope(
        request, effective, ranked, found.funnel, plan, found.path, now,
        warnings=warnings, below_floor=found.below_floor,
    )  # fmt: skip
    if request.verbosity_under(policy) == "full":
        decisions = envelope["diagnostics"]["decisions"]
        decisions += _rejected(found, DECISIONS_MAX - len(decisions))
    envelope["reused"] = found.previous_fingerprint == envelope["prefixFingerprint"]
    return Assembly(effective, found, scored, plan, envelope, now)


@dataclass(frozen=True)
class Recorded:
    """A recall's envelope and the ``context.assembled`` event that records it; ``scored``:
    the re-scored rows as the read found them (``tiers``)."""

    envelope: Envelope
    event: AuditEvent
    scored: Sequence[tuple[RankedRow, float]] = ()

    def tiers(self) -> dict[str, str]:
        """The tier (short_term, long_term) of each ranked memory, by id (a session's turn
        places its passages by it: ``chat.context``); worked out only when asked."""
        return {str(row.id): row.tier for row, _ in self.scored}


def recall_assemble(*, request: RecallRequest) -> Recorded:
    """Run the recall pipeline (SPEC §5), record it, and return the envelope with its event.

    After ``recall_plan``'s read (which fills the funnel cache), one statement writes
    everything (the ``context.assembled`` event, the chain tip and the event's injections,
    which are also its hits, counted later by ``recall.hits``: all or nothing), committed
    before this returns: an envelope is never returned without its audit record.
    """
    assembly = recall_plan(request=request, fill_cache=True)
    envelope = assembly.envelope
    included = [int(pk) for pk in assembly.plan.included_ids]
    truncated = [int(pk) for pk in assembly.plan.truncated_ids]
    effective = assembly.effective
    dry_run = request.origin == SANDBOX
    work: list[AppendWork] = [Injections(included, truncated, dry_run=dry_run)]
    if request.workspace.store_queries:
        # Beside the event, not in it: an erasure deletes the text, the chain keeps its hash.
        work.append(QueryKept(request.query))
    event = audit_event_append(
        workspace=request.workspace,
        tip=ChainTip.of(assembly.found.chain_tip, assembly.found.lane),
        type=EventType.ASSEMBLED,
        author=request.author,
        workload_id=request.workload.id,
        environment=request.environment,
        actor_id=request.actor_id,
        payload={
            "envelopeId": envelope["envelopeId"],
            "effectivePolicyHash": envelope["effectivePolicyHash"],
            "effectiveBudgetHash": envelope["effectiveBudgetHash"],
            "prefixFingerprint": envelope["prefixFingerprint"],
            "digest": envelope["digest"],
            "tokenCounts": envelope["tokenCounts"],
            "reused": envelope["reused"],
            "counts": envelope["diagnostics"]["counts"],
            # Said here at every verbosity (the envelope's warnings are left out at "none").
            **({"actorUnknown": True} if assembly.actor_unknown else {}),
            "topK": request.top_k,
            "accessPath": assembly.found.path,
            "queryHash": query_hash(envelope["envelopeId"], request.query),
            **({"origin": request.origin} if request.origin else {}),
            # What the request overrode, as validated: replay runs under it again.
            **({"policyOverride": effective.override_document} if effective.override else {}),
            # Provenance: which memories, under which policy versions (ids only, no content).
            "memoryIds": [str(pk) for pk in included],
            "truncatedIds": [str(pk) for pk in truncated],
            "policyVersions": {
                "floor": effective.floor_version,
                "workload": effective.workload_version,
                # "" is the workload's all-environments policy; None: it has no policy yet.
                "workloadEnvironment": effective.workload_environment,
                "override": effective.override,
            },
            **_part_of_a_turn(request, effective),
        },
        # The event's injections are also its hits (a dry run's excepted): counted later
        # (recall/hits.py), without rewriting the memories now.
        work=work,
    )
    hits_fold_due(workspace_id=request.workspace.pk)
    return Recorded(envelope, event, assembly.scored)


def _part_of_a_turn(request: RecallRequest, effective: EffectivePolicy) -> dict[str, Any]:
    """What a recall made for a session's turn adds to its event: the session, the turn, and
    the cap its token budget took (with the policy's own budget, so the smaller is seen)."""
    extra: dict[str, Any] = {}
    if request.session_id is not None:
        extra["sessionId"] = request.session_id
        extra["turn"] = request.turn_index
    if request.token_budget_cap is not None:
        extra["tokenBudgetCap"] = {
            "cap": request.token_budget_cap,
            "policy": effective.policy["totalTokenBudget"],
        }
    return extra


def _rejected(found: RecallCandidates, room: int) -> list[ReportedDecision]:
    """The memories left out by a policy axis, as ``decisions[]`` lists them after the ranked
    ones: below the similarity floor, nearest first (with their similarity), then the others
    (id and code only), up to ``room``."""
    below: list[ReportedDecision] = [
        {"id": str(pk), "code": SIMILARITY_CODE, "similarity": round(similarity, 6)}
        for pk, similarity in found.below_listed
    ]
    others: list[ReportedDecision] = [
        {"id": str(pk), "code": code} for pk, code in found.rejections
    ]
    return [*below, *others][: max(room, 0)]


def _rescore(rows: list[RankedRow], now: datetime) -> list[tuple[RankedRow, float]]:
    """Nearest rows re-scored (similarity x age x usage), best first."""
    scored = [
        (row, inclusion_score(row.similarity, row.created_at, row.hit_count, now)) for row in rows
    ]
    # Ties broken by id so the same inputs always give the same order.
    scored.sort(key=lambda pair: (-pair[1], pair[0].id))
    return scored


def _envelope(
    request: RecallRequest,
    effective: EffectivePolicy,
    ranked: list[tuple[RankedRow, float]],
    funnel: Funnel,
    plan: BudgetPlan,
    path: str,
    now: datetime,
    *,
    warnings: Sequence[str] = (),
    below_floor: int = 0,
) -> Envelope:
    policy = effective.policy
    by_id = {str(row.id): (row, score) for row, score in ranked}
    entries = [_entry(*by_id[pk]) for pk in plan.included_ids]
    truncated: list[TruncatedRef] = [
        {
            "id": pk,
            "segmentKind": by_id[pk][0].segment_kind,
            "memoryType": by_id[pk][0].memory_type,
            "tokens": by_id[pk][0].token_count,
        }
        for pk in plan.truncated_ids
    ]
    hashes = {pk: content_hash(by_id[pk][0].content) for pk in by_id}
    pinned = set(policy["pinned"])
    counts: Counts = {
        "candidates": funnel.candidates,
        # every axis passed, the similarity floor included
        "afterPolicy": funnel.after_policy - below_floor,
        "afterRanking": len(ranked),
        "afterBudgetAllocation": len(entries) + len(truncated),
    }
    verbosity = request.verbosity_under(policy)
    decisions: list[ReportedDecision] = []
    if verbosity == "full":
        decisions = [
            {
                "id": d.id,
                "code": d.code.value,
                "segmentKind": d.segment_kind,
                "tokens": by_id[d.id][0].token_count,
                "similarity": round(by_id[d.id][0].similarity, 6),
                "score": round(by_id[d.id][1], 6),
            }
            for d in plan.decisions[:DECISIONS_MAX]
        ]
    # Built whole, so its keys keep the order the API has always sent (decisions last).
    diagnostics: Diagnostics
    if verbosity == "none":
        diagnostics = {"verbosity": verbosity, "counts": counts, "decisions": decisions}
    else:
        diagnostics = {
            "verbosity": verbosity,
            "counts": counts,
            "reasons": _reasons(funnel, below_floor, len(ranked), plan),
            "accessPath": path,
            "warnings": [*warnings, *plan.warnings],
            "decisions": decisions,
        }
    query_tokens = token_estimator()(request.query)
    return {
        "envelopeId": str(uuid.uuid4()),
        "entries": entries,
        "truncatedRefs": truncated,
        "budget": {
            "totalTokenBudget": plan.total_token_budget,
            "perKind": {
                kind: {
                    "reserved": a.reserved,
                    "ceiling": a.ceiling,
                    "demand": a.demand,
                    "allocated": a.allocated,
                    "used": a.used,
                }
                for kind, a in plan.per_kind.items()
            },
            "usedTokens": plan.used_tokens,
            "pressure": plan.pressure,
            "pinnedOverflow": plan.pinned_overflow,
        },
        "diagnostics": diagnostics,
        "effectivePolicyHash": effective.policy_hash,
        "effectiveBudgetHash": effective.budget_hash,
        "prefixFingerprint": prefix_fingerprint(
            [(e["id"], hashes[e["id"]]) for e in entries if e["segmentKind"] in pinned],
            effective.policy_hash,
            effective.budget_hash,
        ),
        "digest": context_digest(
            [(e["id"], hashes[e["id"]]) for e in entries]
            + [(t["id"], hashes[t["id"]]) for t in truncated]
        ),
        "tokenCounts": {
            "entries": sum(e["tokens"] for e in entries),
            "truncatedRefs": len(truncated),
            "used": plan.used_tokens,
            "budget": plan.total_token_budget,
            "query": query_tokens,
            "perKind": {kind: a.used for kind, a in plan.per_kind.items()},
        },
        "reused": False,
        "generatedAt": now.isoformat(),
    }


def _reasons(funnel: Funnel, below_floor: int, ranked: int, plan: BudgetPlan) -> dict[str, int]:
    """How many memories each step left out or kept, by decision code (``diagnostics.reasons``):
    the funnel's, then the similarity floor's (the last policy axis, checked when ranking)."""
    passed = funnel.after_policy - below_floor
    return {
        **({"lifecycle_excluded": funnel.lifecycle_excluded} if funnel.lifecycle_excluded else {}),
        **({"embedding_pending": funnel.embedding_pending} if funnel.embedding_pending else {}),
        **funnel.reasons,
        **({SIMILARITY_CODE: below_floor} if below_floor else {}),
        **({"passes_policy": passed} if passed else {}),
        **({"below_top_k": passed - ranked} if passed > ranked else {}),
        **plan.reason_counts(),
    }


def _entry(row: RankedRow, score: float) -> Entry:
    return {
        "id": str(row.id),
        "segmentKind": row.segment_kind,
        "memoryType": row.memory_type,
        "sourceKind": row.source_kind,
        "confirmationStatus": row.confirmation_status,
        "confidence": row.confidence,
        "sensitivity": row.sensitivity,
        "content": row.content,
        "tokens": row.token_count,
        "similarity": round(row.similarity, 6),
        "score": round(score, 6),
        "createdAt": row.created_at.isoformat(),
    }
