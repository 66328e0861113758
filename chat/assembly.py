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

Everything is recorded in one ``TurnContext``, written with the request's turns in the caller's
transaction (``chat.statements``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chat.compaction.coordinator import (
    Waited,
    budget_status_plain,
    compaction_start,
    monitor_keep,
    session_monitor,
)
from chat.context import PastTurn, Recalled, compose_turn, recall_budget, retrieval_plan
from chat.models import CompactionRun, CompactionTrigger, Session, Turn, TurnContext
from chat.selectors import turn_histories
from recall.assembly import TOP_K_MAX, RecallRequest, recall_assemble
from recall.layout.planner import request_budget
from recall.layout.request import LayoutRequest
from recall.layout.services import CurrentLayoutConfig
from recall.runtime import token_estimator


@dataclass(frozen=True)
class Assembled:
    """A turn's recorded context and the compaction run its monitor asked for, if any (to be
    sent once the session is saved: ``chat.compaction.coordinator.compaction_send``)."""

    context: TurnContext
    run: CompactionRun | None


def turn_assemble(
    *,
    session: Session,
    query: Turn,
    author: str,
    layout: CurrentLayoutConfig,
    assembled_before: bool,
    appended: Sequence[Turn] = (),
    waited: Waited | None = None,
) -> Assembled:
    """Assemble the context for ``query``, the user's turn the request appends to the
    (locked) session after ``appended`` (neither written yet), under ``layout``, the
    workload's current layout configuration; ``assembled_before``: whether a context was
    assembled for an earlier turn of the session (its first is primed); ``waited`` is the
    run in flight the turn waited for. The recall is recorded; the context is returned to be
    written with the turns (``chat.statements.turn_recorded``), and the session's
    monitor state is updated on ``session``, which the caller writes with them."""
    config = layout.config
    estimator = token_estimator()
    layout_request = LayoutRequest(
        query=query.content,
        system_prompt_tokens=session.system_prompt_tokens,
        tool_schema_tokens=session.tool_schema_tokens,
        config=config,
    )
    budget = request_budget(layout_request)
    primed = config.priming.enabled and not assembled_before
    keep = config.max_history_turns
    histories = turn_histories(
        session=session, before=query.index, keep=keep, priming=config.priming
    )
    # The turns this request appends before the query end the current history.
    history = [*histories.current, *(_past(turn) for turn in appended)][-keep:] if keep else []
    history_given = histories.given + len(appended)
    prior = histories.prior
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
        memories=_recalled(envelope["entries"], recorded.tiers()),
        plan=plan,
        history=history,
        history_given=history_given,
        prior=prior,
        query=_past(query),
        estimator=estimator,
        config_version=layout.version.version if layout.version else None,
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
    context = TurnContext(
        workspace_id=session.workspace_id,
        session=session,
        turn=query.index,
        primed=primed,
        prompt=composed.prompt.messages,
        parts=[part.as_dict() for part in composed.prompt.parts],
        prior_given=[[int(t.session_id), t.index] for t in prior],
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


def _recalled(entries: Sequence[Any], tiers: Mapping[str, str]) -> list[Recalled]:
    return [
        Recalled(
            id=entry["id"],
            content=entry["content"],
            memory_type=entry["memoryType"],
            segment_kind=entry["segmentKind"],
            tier=tiers.get(entry["id"], "short_term"),
            similarity=float(entry["similarity"]),
            score=float(entry["score"]),
        )
        for entry in entries
    ]
