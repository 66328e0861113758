"""Sessions whose turns reach a chosen utilisation, and compaction configurations, for the
compaction tests.

With ``max_history_turns: 0``, no system prompt, no output buffer and no memory, a turn's
estimate is its user message and the message's 4 tokens of framing: a message of ``n``
tokens over a 1,000-token window is ``(n + 4) / 10`` per cent, exactly.
"""

from __future__ import annotations

from typing import Any

from chat.models import Session
from chat.services import Posted, session_create, session_turns_post
from recall.layout.estimate import MESSAGE_OVERHEAD_TOKENS
from recall.tokens import estimate_tokens
from tests.chat.helpers import layout

WINDOW = 1000
# One exchange of the "talk" sessions: an assistant answer and a user question (about 85 and
# 15 tokens).
ANSWER = "The release train leaves on Friday and Ada owns the notes for the owners. " * 5
QUESTION = "What about the release plan, its owners and the dates?"


def measured(workload: Any, **compaction: Any) -> None:
    """Save a layout where each turn's utilisation is its user message's (``at``)."""
    layout(
        workload,
        {
            "context_window": WINDOW,
            "output_buffer": 0,
            "max_history_turns": 0,
            "compaction": {"enabled": True, **compaction},
        },
    )


def message_at(pct: float) -> str:
    """A user message whose turn is at ``pct`` per cent of a ``WINDOW``-token budget."""
    tokens = round(pct * WINDOW / 100) - MESSAGE_OVERHEAD_TOKENS
    text = "a" * (tokens * 4)
    assert estimate_tokens(text) == tokens
    return text


def start(workload: Any, **fields: Any) -> Session:
    return session_create(
        workspace=workload.workspace,
        actor_id=fields.pop("actor_id", "user:ada"),
        workload_id=workload.id,
        environment="prod",
        author="system:test",
        **fields,
    )


def post(session: Session, *messages: tuple[str, str]) -> Posted:
    """Post the messages to the session as stored now (a fresh read: nothing is carried in
    memory from one turn to the next)."""
    return session_turns_post(
        session=Session.objects.get(pk=session.pk),
        messages=[{"role": role, "content": content} for role, content in messages],
        author="system:test",
    )


def at(session: Session, pct: float) -> dict[str, Any]:
    """A user turn at ``pct`` per cent: its answer's compaction decision."""
    posted = post(session, ("user", message_at(pct)))
    assert posted.context is not None
    assert posted.context.budget_status["utilizationPct"] == pct
    return dict(posted.context.compaction)


def talk(session: Session, exchanges: int) -> list[Posted]:
    """``exchanges`` assistant answers and user questions."""
    return [post(session, ("assistant", ANSWER), ("user", QUESTION)) for _ in range(exchanges)]


def compacting(workload: Any, **compaction: Any) -> None:
    """A layout where ``talk`` reaches warning (92 %) on its 8th exchange and a run summarises the
    oldest turns, four at a time, keeping the last two."""
    layout(
        workload,
        {
            "context_window": 1000,
            "output_buffer": 0,
            "compaction": {
                "enabled": True,
                "cooldown_turns": 1,
                "min_turns_to_summarize": 2,
                "max_turns_per_summary": 4,
                "compaction_recency_window": 2,
                **compaction,
            },
        },
    )


def talk_until_compacted(session: Session, most: int = 15) -> Posted:
    """Exchanges until one asks for a compaction run: that exchange's answer."""
    for _ in range(most):
        posted = post(session, ("assistant", ANSWER), ("user", QUESTION))
        if posted.run is not None:
            return posted
    raise AssertionError(f"No compaction run after {most} exchanges.")
