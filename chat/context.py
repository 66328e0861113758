"""The context of a turn, in plain Python: where each recalled memory goes in the layout, how
many the recall retrieves, which earlier-session turns prime a session, and how the laid-out
parts become the prompt.

Plain Python, no Django import. For one user turn, phase by phase (``chat.assembly`` runs
them around the recall and the layout planner):

1. **Retrieval plan** (``retrieval_plan``): per supporting section, how many recalled
   memories it may take: its ``max_items`` (an uncapped section ``UNCAPPED_RETRIEVAL``); on a
   primed turn (a session's first, ``priming.enabled``) the priming limits replace those of
   the sections they name (``PRIMED_SECTIONS``). The recall's ``topK`` is their sum.
2. **Prior-session turns** (``prior_turns``): on a primed session, the last
   ``previous_session_turns`` turns of up to ``previous_sessions`` earlier sessions, newest
   first while they fit ``priming.token_budget``, given oldest first.
3. **Token budget** (``recall_budget``): the recall's budget is the smallest of the policy's,
   the turn's supporting-context budget and, on a primed turn, what the prior-session turns
   left of ``priming.token_budget``; the answer says which one won.
4. **Sections** (``supporting_sections``): each recalled memory goes to the section of the
   table below, in rank order, up to its section's retrieval limit; the layout planner then
   fills the sections by ``section_priority`` within ``max_items`` and the supporting budget,
   and prunes with the cascade (``compose_turn``).
5. **Prompt** (``render_prompt``): one system message (the session's system prompt, then
   each kept section under a header, then the prior-session turns under theirs), the kept
   current-session turns as they were sent, then the user's message; and, for each line,
   where it came from (``Part``). Every framing string costs no more tokens than the layout
   planner reserved for it (``recall.layout.estimate``), so the prompt's estimate stays within
   the layout's.

The section table (``section_of``), first match wins:

==========================================  ==============================================
a memory                                     goes to
==========================================  ==============================================
segmentKind ``tool_result``                  ``tools``
segmentKind ``retrieval``                    ``passages`` (term: the memory's tier)
memoryType fact, preference, decision,       ``known_facts``
instruction
memoryType ``insight``                       ``insights``
memoryType ``summary``                       ``summaries``
memoryType ``entity``                        ``entities`` if ``section_priority`` lists it,
                                             else ``state``
memoryType ``episode``                       ``passages`` (term: the memory's tier)
==========================================  ==============================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recall.layout.config import LayoutConfig, PrimingConfig
from recall.layout.estimate import MESSAGE_OVERHEAD_TOKENS, TokenEstimator
from recall.layout.planner import LayoutResult, plan_checked_layout
from recall.layout.request import LayoutRequest, SupportingItem
from recall.layout.request import Turn as LayoutTurn

SECTION_OF_KIND: dict[str, str] = {"tool_result": "tools", "retrieval": "passages"}
SECTION_OF_TYPE: dict[str, str] = {
    "fact": "known_facts",
    "preference": "known_facts",
    "decision": "known_facts",
    "instruction": "known_facts",
    "insight": "insights",
    "summary": "summaries",
    "episode": "passages",
}
ENTITY_TYPE = "entity"
TERM_OF_TIER: dict[str, str] = {"short_term": "short", "long_term": "long"}

# How many memories an uncapped section (``max_items`` null or absent) may take from a recall.
UNCAPPED_RETRIEVAL = 20
# The priming limit of each section it names; the entity limit goes to the section entities
# go to (``section_of``).
PRIMED_SECTIONS: dict[str, str] = {
    "known_facts": "max_known_facts",
    "insights": "max_insights",
    "summaries": "max_summaries",
}

SECTION_TITLES: dict[str, str] = {
    "known_facts": "Known facts",
    "passages": "Passages",
    "insights": "Insights",
    "summaries": "Summaries",
    "tools": "Tool results",
    "state": "State",
    "entities": "Entities",
}
PRIOR_TITLE = "Earlier sessions"


@dataclass(frozen=True)
class Recalled:
    """One entry of the recall's envelope, as the assembly reads it."""

    id: str
    content: str
    memory_type: str
    segment_kind: str
    tier: str
    similarity: float | None  # None: unscored (a turn recorded before similarities were)
    score: float


@dataclass(frozen=True)
class PastTurn:
    """A turn of a session: the current one's history, or an earlier one's (prior)."""

    session_id: str
    index: int
    role: str
    content: str
    tokens: int


def entity_section(priority: Sequence[str]) -> str:
    return "entities" if "entities" in priority else "state"


def section_of(memory: Recalled, priority: Sequence[str]) -> str:
    """The supporting section a recalled memory goes to (the module's table)."""
    by_kind = SECTION_OF_KIND.get(memory.segment_kind)
    if by_kind is not None:
        return by_kind
    if memory.memory_type == ENTITY_TYPE:
        return entity_section(priority)
    return SECTION_OF_TYPE.get(memory.memory_type, "passages")


# --- 1. the retrieval plan ----------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalPlan:
    limits: Mapping[str, int]  # section -> recalled memories it may take
    top_k: int
    primed: bool


def retrieval_plan(config: LayoutConfig, *, primed: bool, top_k_max: int) -> RetrievalPlan:
    """Per section of ``section_priority``, how many recalled memories it may take; the
    recall's ``topK`` is their sum (at most ``top_k_max``)."""
    supporting = config.supporting_context
    priority = supporting.section_priority
    limits: dict[str, int] = {}
    for section in priority:
        cap = supporting.max_items.get(section)
        limits[section] = UNCAPPED_RETRIEVAL if cap is None else cap
    if primed:
        priming = config.priming
        for section, key in PRIMED_SECTIONS.items():
            if section in limits:
                limits[section] = getattr(priming, key)
        entities = entity_section(priority)
        if entities in limits:
            limits[entities] = priming.top_entities
    return RetrievalPlan(limits, min(top_k_max, sum(limits.values())), primed)


# --- 2. prior-session turns ---------------------------------------------------------------------


def prior_turns(sessions: Sequence[Sequence[PastTurn]], priming: PrimingConfig) -> list[PastTurn]:
    """The prior-session history of a primed session.

    ``sessions`` are the actor's earlier sessions of the workload, newest first, each its
    turns in order. Of the ``previous_sessions`` newest, each keeps its last
    ``previous_session_turns`` turns; taken newest first while their tokens fit
    ``priming.token_budget`` (a turn that does not fit ends the walk, so each session keeps
    an unbroken tail), they are returned oldest first.
    """
    if not priming.enabled or priming.previous_session_turns == 0:
        return []
    room = priming.token_budget
    taken: list[PastTurn] = []
    for turns in sessions[: priming.previous_sessions]:
        for turn in reversed(turns[-priming.previous_session_turns :]):
            if turn.tokens > room:
                return list(reversed(taken))
            taken.append(turn)
            room -= turn.tokens
    return list(reversed(taken))


# --- 3. the recall's token budget ---------------------------------------------------------------


@dataclass(frozen=True)
class RecallBudget:
    """The recall's token-budget cap for a turn and where it came from."""

    supporting_context: int
    priming: int | None  # what priming left for memories on a primed turn, else None

    @property
    def cap(self) -> int:
        if self.priming is None:
            return self.supporting_context
        return min(self.supporting_context, self.priming)

    def limited_by(self, policy: int) -> str:
        """Which budget won: ``policy``, ``supporting_context`` or ``priming`` (ties go to
        the policy, then the supporting context)."""
        if policy <= self.cap:
            return "policy"
        if self.priming is None or self.supporting_context <= self.priming:
            return "supporting_context"
        return "priming"


def recall_budget(
    supporting_context_budget: int, priming: PrimingConfig, *, primed: bool, prior_tokens: int
) -> RecallBudget:
    left = max(0, priming.token_budget - prior_tokens) if primed else None
    return RecallBudget(supporting_context_budget, left)


# --- 4. sections --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sections:
    items: dict[str, list[SupportingItem]]
    over_retrieval_limit: int  # recalled memories their section had no room for


def supporting_sections(
    memories: Sequence[Recalled], plan: RetrievalPlan, priority: Sequence[str]
) -> Sections:
    """The recalled memories by section (the table), best score first, each section cut to
    its retrieval limit. A section outside ``section_priority`` is passed on whole: the
    planner leaves it out and says so."""
    ranked = sorted(memories, key=lambda m: (-m.score, m.id))
    items: dict[str, list[SupportingItem]] = {}
    over = 0
    for memory in ranked:
        section = section_of(memory, priority)
        kept = items.setdefault(section, [])
        limit = plan.limits.get(section)
        if limit is not None and len(kept) >= limit:
            over += 1
            continue
        term = TERM_OF_TIER.get(memory.tier, "short") if section == "passages" else None
        kept.append(
            SupportingItem(
                content=memory.content, relevancy=memory.similarity, term=term, id=memory.id
            )
        )
    return Sections({name: kept for name, kept in items.items() if kept}, over)


# --- 5. the prompt ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """Where a line of the prompt came from: the system prompt, a memory (``memory_id``), a
    turn of an earlier session (``session_id``, ``turn``), or a turn of this one (``turn``)."""

    kind: str  # system_prompt | supporting | prior | history | query
    message: int  # the index of its message in the prompt
    section: str | None = None
    memory_id: str | None = None
    session_id: str | None = None
    turn: int | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "message": self.message}
        for key, value in (
            ("section", self.section),
            ("memoryId", self.memory_id),
            ("sessionId", self.session_id),
            ("turn", self.turn),
        ):
            if value is not None:
                data[key] = value
        return data


@dataclass(frozen=True)
class Prompt:
    messages: list[dict[str, str]]
    parts: list[Part]
    # The system message's text after the session's system prompt (sections, prior turns):
    # what the dynamic budget pays for in it.
    system_dynamic: str


def prompt_dynamic_tokens(prompt: Prompt, estimator: TokenEstimator) -> int:
    """The prompt's estimate in the dynamic budget: the system message's text after the
    system prompt, and every other message with its framing (as the planner counts them)."""
    rest = [m for m in prompt.messages if m["role"] != "system"]
    return estimator(prompt.system_dynamic) + sum(
        estimator(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in rest
    )


# The system message's blocks (the system prompt, each section, the earlier sessions) are
# separated by one blank line. A section's framing ("\n\n## Title", a newline between its
# lines) has the characters and words of "\n## Title\n" and a newline after each line: what
# the planner reserves for a header and its bullets (recall.layout.estimate).
BLOCK_SEPARATOR = "\n\n"


def section_block(title: str, lines: Sequence[str]) -> str:
    return "\n".join([f"## {title}", *lines])


def render_prompt(
    *,
    system_prompt: str,
    supporting: Mapping[str, Sequence[SupportingItem]],
    priority: Sequence[str],
    prior: Sequence[PastTurn],
    history: Sequence[PastTurn],
    query: PastTurn,
) -> Prompt:
    """The chat-completions messages of a laid-out turn and where each line came from.

    ``supporting`` holds the kept items per section; sections are rendered in ``priority``
    order. ``prior`` and ``history`` are the kept turns, oldest first.
    """
    parts: list[Part] = []
    blocks: list[str] = []
    if system_prompt:
        parts.append(Part("system_prompt", 0))
    for section in priority:
        items = supporting.get(section) or ()
        if not items:
            continue
        title = SECTION_TITLES.get(section, section)
        blocks.append(section_block(title, [f"- {item.content}" for item in items]))
        parts.extend(Part("supporting", 0, section=section, memory_id=item.id) for item in items)
    if prior:
        blocks.append(section_block(PRIOR_TITLE, [f"{t.role}: {t.content}" for t in prior]))
        parts.extend(Part("prior", 0, session_id=t.session_id, turn=t.index) for t in prior)
    dynamic = BLOCK_SEPARATOR.join(blocks)
    if system_prompt and dynamic:
        dynamic = BLOCK_SEPARATOR + dynamic
    messages: list[dict[str, str]] = []
    system = system_prompt + dynamic
    if system:
        messages.append({"role": "system", "content": system})
    for turn in (*history, query):
        parts.append(Part("query" if turn is query else "history", len(messages), turn=turn.index))
        messages.append({"role": turn.role, "content": turn.content})
    return Prompt(messages, parts, dynamic)


# --- the whole turn ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Composed:
    """A laid-out turn: the planner's result, the prompt, and the report of the layout."""

    result: LayoutResult
    prompt: Prompt
    layout: dict[str, Any]


def compose_turn(
    config: LayoutConfig,
    *,
    system_prompt: str,
    system_prompt_tokens: int,
    tool_schema_tokens: int,
    memories: Sequence[Recalled],
    plan: RetrievalPlan,
    history: Sequence[PastTurn],
    prior: Sequence[PastTurn],
    query: PastTurn,
    estimator: TokenEstimator,
    config_version: int | None = None,
    history_given: int | None = None,
) -> Composed:
    """Phases 4 and 5 after the recall: the recalled memories into sections, the layout
    planned (``recall.layout.planner``), the kept parts rendered as the prompt.

    ``history`` is the current session's turns before ``query`` that the layout may keep
    (its last ``max_history_turns``); ``history_given`` how many current turns precede
    ``query`` (by default ``query.index - 1``: none was summarised), the older ones counted.
    """
    if history_given is None:
        history_given = query.index - 1
    priority = config.supporting_context.section_priority
    sections = supporting_sections(memories, plan, priority)
    result = plan_checked_layout(
        LayoutRequest(
            history=tuple(LayoutTurn(t.role, t.content) for t in history),
            prior_session_history=tuple(LayoutTurn(t.role, t.content) for t in prior),
            supporting={name: tuple(items) for name, items in sections.items.items()},
            query=query.content,
            system_prompt_tokens=system_prompt_tokens,
            tool_schema_tokens=tool_schema_tokens,
            config=config,
        ),
        estimator=estimator,
    )
    # The cascade keeps the last turns of each history: the kept ones are a tail.
    kept_history = history[len(history) - len(result.history) :]
    kept_prior = prior[len(prior) - len(result.prior_session_history) :]
    prompt = render_prompt(
        system_prompt=system_prompt,
        supporting=result.supporting,
        priority=priority,
        prior=kept_prior,
        history=kept_history,
        query=query,
    )
    layout = layout_report(
        result,
        given={name: len(items) for name, items in sections.items.items()},
        history_given=history_given,
        history_unread=history_given - len(history),
        prior_given=len(prior),
        over_retrieval_limit=sections.over_retrieval_limit,
        config_version=config_version,
    )
    layout["promptTokens"] = prompt_dynamic_tokens(prompt, estimator)
    return Composed(result, prompt, layout)


# --- the layout, as the turn's answer reports it -----------------------------------------------


def layout_report(
    result: LayoutResult,
    *,
    given: Mapping[str, int],
    history_given: int,
    history_unread: int,
    prior_given: int,
    over_retrieval_limit: int,
    config_version: int | None,
) -> dict[str, Any]:
    """The accounting, the cascade's stages and, per part, what was given and what was kept:
    counts and tokens, never content (viewers read it)."""
    supporting = {
        section: {"given": count, "kept": len(result.supporting.get(section, ()))}
        for section, count in given.items()
    }
    filtered = dict(result.filtered)
    # Turns older than max_history_turns were not read: counted here as the planner would.
    filtered["history_over_max_turns"] += history_unread
    filtered = {key: n for key, n in filtered.items() if n}
    if over_retrieval_limit:
        filtered["over_retrieval_limit"] = over_retrieval_limit
    return {
        "configVersion": config_version,
        "contextWindow": result.context_window,
        "fixedCosts": result.fixed_costs,
        "dynamicBudget": result.dynamic_budget,
        "supportingContextBudget": result.supporting_context_budget,
        "formattingOverhead": result.formatting_overhead,
        "estimateBeforePruning": result.estimate_before_pruning,
        "estimatedTokens": result.estimated_tokens,
        "freeTokens": result.free_tokens,
        "fits": result.fits,
        "emergencyOverage": result.emergency_overage,
        "parts": {
            "history": {
                "given": history_given,
                "kept": len(result.history),
                "tokens": result.history_tokens,
            },
            "priorSessionHistory": {
                "given": prior_given,
                "kept": len(result.prior_session_history),
                "tokens": result.prior_history_tokens,
            },
            "supporting": {"sections": supporting, "tokens": result.supporting_tokens},
            "query": {"tokens": result.query_tokens},
        },
        "stages": [
            {
                "number": stage.number,
                "name": stage.name,
                "description": stage.description,
                "removed": dict(stage.removed),
                "estimateAfter": stage.estimate_after,
                "fits": stage.fits,
            }
            for stage in result.stages
        ],
        "filtered": filtered,
        "warnings": list(result.warnings),
    }
