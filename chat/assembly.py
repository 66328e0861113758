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
  parts become the prompt, and the session's compaction monitor records the turn's budget
  status and decides (``chat.compaction.coordinator``); a decision to compact writes the run.

Turns an earlier compaction summarised are not the current history any more: their summary
memories reach the prompt through the recall, like any memory.

Everything is recorded in one ``TurnContext``, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chat.compaction.coordinator import (
    Waited,
    budget_status_plain,
    compaction_start,
    monitor_keep,
    session_monitor,
)
from chat.context import (
    PastTurn,
    Recalled,
    compose_turn,
    prior_turns,
    recall_budget,
    retrieval_plan,
)
from chat.models import CompactionRun, CompactionTrigger, Session, Turn, TurnContext
from recall.assembly import TOP_K_MAX, RecallRequest, recall_assemble
from recall.layout.config import LayoutConfig, PrimingConfig
from recall.layout.planner import request_budget
from recall.layout.request import LayoutRequest
from recall.layout.services import layout_config_current
from recall.runtime import token_estimator
from recall.selectors import memory_tiers


@dataclass(frozen=True)
class Assembled:
    """A turn's recorded context and the compaction run its monitor asked for, if any (to be
    sent once the session is saved: ``chat.compaction.coordinator.compaction_send``)."""

    context: TurnContext
    run: CompactionRun | None


def turn_assemble(
    *, session: Session, query: Turn, author: str, waited: Waited | None = None
) -> Assembled:
    """Assemble and record the context for ``query``, the user's turn just appended to the
    (locked) session; ``waited`` is the run in flight the turn waited for. The session's
    monitor state is updated on ``session``, which the caller saves."""
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
    history, history_given = _history(session, query, config)
    composed = compose_turn(
        config,
        system_prompt=session.system_prompt,
        system_prompt_tokens=session.system_prompt_tokens,
        tool_schema_tokens=session.tool_schema_tokens,
        memories=_recalled(session, envelope["entries"]),
        plan=plan,
        history=history,
        history_given=history_given,
        prior=prior,
        query=_past(query),
        estimator=estimator,
        config_version=current.version.version if current.version else None,
    )
    status = composed.result.budget_status(turn_index=query.index)
    monitor = session_monitor(session=session, config=config)
    monitor.record_turn(status)
    decision = monitor.compaction_decision()
    run = None
    if decision.compact:
        run = compaction_start(
            session=session,
            monitor=monitor,
            config=config,
            trigger=CompactionTrigger.AUTOMATIC,
            reason=decision.code,
            author=author,
        )
    else:
        monitor_keep(session, monitor)
    # The policy's own budget, which the event records beside the cap.
    policy_budget = int(recorded.event.payload["tokenBudgetCap"]["policy"])
    diagnostics: Any = envelope["diagnostics"]
    context = TurnContext.objects.create(
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
            # Each entry's relevancy to the query, as the layout read it (the Layout tab
            # opens the turn with it: ``chat.selectors.turn_layout_start``).
            "similarities": {
                entry["id"]: float(entry["similarity"]) for entry in envelope["entries"]
            },
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
            "runId": str(run.pk) if run is not None else None,
            "waitedFor": waited.as_dict() if waited is not None else None,
        },
        event_id=recorded.event.pk,
    )
    return Assembled(context, run)


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


def _history(session: Session, query: Turn, config: LayoutConfig) -> tuple[list[PastTurn], int]:
    """The session's current turns before ``query`` that the layout can keep (its last
    ``max_history_turns``; older ones are counted, never read), and how many there are.
    Turns a compaction summarised are not current."""
    current = session.turns.filter(index__lt=query.index, compacted_by__isnull=True)
    given = current.count()
    keep = config.max_history_turns
    if keep == 0 or given == 0:
        return [], given
    rows = current.order_by("-index")[:keep]
    return [_past(turn) for turn in reversed(list(rows))], given


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
        rows = Turn.objects.filter(session_id=pk, compacted_by__isnull=True).order_by("-index")[
            : priming.previous_session_turns
        ]
        tails.append([_past(turn) for turn in reversed(list(rows))])
    return prior_turns(tails, priming)
