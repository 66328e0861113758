"""The context assembled for a user turn: the governed recall and the layout planner,
composed (the phases are ``chat.context``'s).

For the user's message of a session, under the workload's stored layout configuration:

* the recall runs as any recall does (the workload's effective policy for the session's
  environment, the user's message as its query, one ``context.assembled`` event), its topK
  from the retrieval plan and its token budget capped at the turn's supporting-context
  budget (on a primed turn, at what priming left): ``RecallRequest.token_budget_cap``;
* its entries go to the layout's sections, the session's earlier turns are the current
  history and, while priming is on, the actor's earlier sessions of the workload give the
  prior-session history;
* the planner lays them out (seed 000's accounting, section filling and cascade), the kept
  parts become the prompt, and the compaction monitor reads the turn's budget status.

Everything is recorded in one ``TurnContext``, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat.context import (
    PastTurn,
    Recalled,
    compose_turn,
    prior_turns,
    recall_budget,
    retrieval_plan,
)
from chat.models import Session, Turn, TurnContext
from recall.assembly import TOP_K_MAX, RecallRequest, recall_assemble
from recall.layout.config import LayoutConfig, PrimingConfig
from recall.layout.monitor import (
    BudgetSeverity,
    BudgetStatus,
    CompactionConfig,
    ContextBudgetMonitor,
)
from recall.layout.planner import request_budget
from recall.layout.request import LayoutRequest
from recall.layout.services import layout_config_current
from recall.runtime import token_estimator
from recall.selectors import memory_tiers


def turn_assemble(*, session: Session, query: Turn, author: str) -> TurnContext:
    """Assemble and record the context for ``query``, the user's turn just appended to the
    (locked) session."""
    current = layout_config_current(workload=session.workload)
    config = current.config
    estimator = token_estimator()
    layout_request = LayoutRequest(
        query=query.content,
        system_prompt_tokens=session.system_prompt_tokens,
        tool_schema_tokens=session.tool_schema_tokens,
        config=config,
    )
    budget = request_budget(layout_request)
    primed = config.priming.enabled and not session.contexts.exists()
    prior = prior_session_turns(session=session, priming=config.priming)
    plan = retrieval_plan(config, primed=primed, top_k_max=TOP_K_MAX)
    caps = recall_budget(
        budget.supporting_context_budget,
        config.priming,
        primed=primed,
        prior_tokens=sum(turn.tokens for turn in prior),
    )
    recorded = recall_assemble(
        request=RecallRequest(
            workspace=session.workspace,
            workload=session.workload,
            environment=session.environment,
            actor_id=session.actor.external_id,
            query=query.content,
            top_k=plan.top_k,
            override=None,
            author=author,
            token_budget_cap=caps.cap,
            session_id=str(session.pk),
            turn_index=query.index,
        )
    )
    envelope = recorded.envelope
    composed = compose_turn(
        config,
        system_prompt=session.system_prompt,
        system_prompt_tokens=session.system_prompt_tokens,
        tool_schema_tokens=session.tool_schema_tokens,
        memories=_recalled(session, envelope["entries"]),
        plan=plan,
        history=_history(session, query, config),
        prior=prior,
        query=_past(query),
        estimator=estimator,
        config_version=current.version.version if current.version else None,
    )
    status = composed.result.budget_status(turn_index=query.index)
    monitor = session_monitor(session=session, config=config.compaction)
    monitor.record_turn(status)
    decision = monitor.compaction_decision()
    # The policy's own budget, which the event records beside the cap.
    policy_budget = int(recorded.event.payload["tokenBudgetCap"]["policy"])
    diagnostics: Any = envelope["diagnostics"]
    return TurnContext.objects.create(
        workspace_id=session.workspace_id,
        session=session,
        turn=query.index,
        primed=primed,
        prompt=composed.prompt.messages,
        parts=[part.as_dict() for part in composed.prompt.parts],
        layout=composed.layout,
        recall={
            "envelopeId": envelope["envelopeId"],
            "eventId": recorded.event.pk,
            "digest": envelope["digest"],
            "counts": diagnostics["counts"],
            "memoryIds": [entry["id"] for entry in envelope["entries"]],
            "truncatedIds": [ref["id"] for ref in envelope["truncatedRefs"]],
            "topK": plan.top_k,
            "usedTokens": envelope["budget"]["usedTokens"],
            "tokenBudget": {
                "policy": policy_budget,
                "supportingContext": caps.supporting_context,
                "priming": caps.priming,
                "applied": min(policy_budget, caps.cap),
                "limitedBy": caps.limited_by(policy_budget),
            },
            "warnings": list(diagnostics.get("warnings", [])),
        },
        budget_status=budget_status_plain(status),
        compaction={
            "enabled": config.compaction.enabled,
            "compact": decision.compact,
            "code": decision.code,
            "reason": decision.reason,
            "severity": decision.severity.value if decision.severity else None,
            "timeBudgetMs": decision.time_budget_ms,
        },
        event_id=recorded.event.pk,
    )


def _past(turn: Turn) -> PastTurn:
    return PastTurn(str(turn.session_id), turn.index, turn.role, turn.content, turn.tokens)


def _recalled(session: Session, entries: Sequence[Any]) -> list[Recalled]:
    tiers = memory_tiers(workspace=session.workspace, ids=[int(e["id"]) for e in entries])
    return [
        Recalled(
            id=entry["id"],
            content=entry["content"],
            memory_type=entry["memoryType"],
            segment_kind=entry["segmentKind"],
            tier=tiers.get(int(entry["id"]), "short_term"),
            similarity=float(entry["similarity"]),
            score=float(entry["score"]),
        )
        for entry in entries
    ]


def _history(session: Session, query: Turn, config: LayoutConfig) -> list[PastTurn]:
    """The session's turns before ``query`` that the layout can keep: its last
    ``max_history_turns`` (older ones are counted, never read)."""
    keep = config.max_history_turns
    if keep == 0:
        return []
    rows = session.turns.filter(index__lt=query.index).order_by("-index")[:keep]
    return [_past(turn) for turn in reversed(list(rows))]


def prior_session_turns(*, session: Session, priming: PrimingConfig) -> list[PastTurn]:
    """The prior-session history of the session (``chat.context.prior_turns``): the actor's
    sessions of the workload started before this one, newest first, read for their last
    ``previous_session_turns`` turns each. Nothing while priming is off."""
    if not priming.enabled or not priming.previous_sessions or not priming.previous_session_turns:
        return []
    earlier = list(
        Session.objects.filter(
            workspace_id=session.workspace_id,
            actor_id=session.actor_id,
            workload_id=session.workload_id,
            pk__lt=session.pk,
        )
        .order_by("-pk")
        .values_list("pk", flat=True)[: priming.previous_sessions]
    )
    tails: list[list[PastTurn]] = []
    for pk in earlier:
        rows = Turn.objects.filter(session_id=pk).order_by("-index")[
            : priming.previous_session_turns
        ]
        tails.append([_past(turn) for turn in reversed(list(rows))])
    return prior_turns(tails, priming)


def budget_status_plain(status: BudgetStatus) -> dict[str, Any]:
    pct = status.utilization_pct
    return {
        "turn": status.turn_index,
        "totalTokens": status.total_tokens,
        "availableBudget": status.available_budget,
        # JSON has no infinity: a zero budget with anything in it is null, and overage.
        "utilizationPct": round(pct, 2) if pct != float("inf") else None,
        "severity": status.severity.value,
    }


def session_monitor(*, session: Session, config: CompactionConfig) -> ContextBudgetMonitor:
    """The session's compaction monitor, rebuilt from the budget statuses of its latest
    assembled turns (its trend window).

    Compaction (issue 34) keeps the monitor's own state here, with the session: the
    compactions started and finished, which the cooldown counts from.
    """
    monitor = ContextBudgetMonitor(config)
    window = max(config.trend_window, 1)
    statuses = list(
        session.contexts.order_by("-turn").values_list("budget_status", flat=True)[:window]
    )
    for stored in reversed(statuses):
        pct = stored["utilizationPct"]
        monitor.record_turn(
            BudgetStatus(
                total_tokens=stored["totalTokens"],
                available_budget=stored["availableBudget"],
                utilization_pct=float("inf") if pct is None else float(pct),
                severity=BudgetSeverity(stored["severity"]),
                turn_index=stored["turn"],
            )
        )
    return monitor
