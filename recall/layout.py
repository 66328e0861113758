"""Chat layout budgeting and the nine-stage pruning cascade (seed 000, SPEC section 6).

Plain Python, no Django import.

Budget accounting, exactly as the seed::

    fixed_costs = system_prompt_tokens + tool_schema_tokens + output_buffer
    dynamic_budget = max(0, context_window - fixed_costs)
    supporting_context_budget = floor(dynamic_budget * budget_ratio)

The dynamic budget must hold everything that is not a fixed cost: retained prior-session
and current-session history, supporting context, the new query and their formatting.
Supporting context is additionally bounded by ``supporting_context_budget``; the rest is
not a separately enforced history quota (as in the seed).

Token figures are *estimates* (see ``estimate_tokens``), not provider tokenization:
leave headroom and inspect the formatted prompt.

Turns: each element of ``history`` / ``prior_session_history`` is one message
(``{role, content}``) and counts as one turn for the "last N turns" stages.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from enum import Enum
from typing import Any

import yaml

from recall.budget_monitor import BudgetSeverity, BudgetStatus, CompactionConfig, utilization_pct
from recall.tokens import estimate_tokens as _project_estimate_tokens

# --------------------------------------------------------------------------------------
# Vocabulary and defaults
# --------------------------------------------------------------------------------------

KNOWN_SECTIONS: tuple[str, ...] = (
    "known_facts",
    "passages",
    "insights",
    "summaries",
    "tools",
    "state",
    "entities",
)
# The seed's Chat fragment is the default configuration.
DEFAULT_SECTION_PRIORITY: tuple[str, ...] = (
    "known_facts",
    "passages",
    "insights",
    "summaries",
    "tools",
    "state",
)
DEFAULT_MAX_ITEMS: dict[str, int | None] = {
    "passages": 5,
    "known_facts": 15,
    "insights": 10,
    "summaries": 5,
    "tools": 5,
}
PASSAGE_TERMS: tuple[str, ...] = ("short", "long")

# Names from older guides that are easy to type by mistake; the error says what to use.
LEGACY_NAMES: dict[str, str] = {"key_facts": "known_facts"}

# Formatting overhead estimates (tokens). The formatter wraps each message in role
# markers, gives each non-empty section a header line and each item a bullet/newline;
# these are reserved so the content estimate alone cannot overfill the window.
MESSAGE_OVERHEAD_TOKENS = 4
# The seed's two `memory:` fragments verbatim (seed 000): the sandbox prefills the Chat one, and
# parsing either must give the defaults above.
SEED_CHAT_FRAGMENT = """\
memory:
  context_window: 32000
  output_buffer: 2500
  max_history_turns: 15
  supporting_context:
    budget_ratio: 0.30
    section_priority: [known_facts, passages, insights, summaries, tools, state]
    max_items:
      passages: 5
      known_facts: 15
      insights: 10
      summaries: 5
      tools: 5
  priming:
    enabled: true
    token_budget: 4000
    top_entities: 20
    max_insights: 10
    max_summaries: 5
    max_known_facts: 20
    previous_sessions: 1
    previous_session_turns: 3
"""
SEED_COMPACTION_FRAGMENT = """\
memory:
  compaction:
    enabled: true
    llm_service: compaction
    compaction_threshold: 0.85
    critical_threshold: 0.95
    target_utilization: 0.70
    cooldown_turns: 3
    max_duration_ms: 15000
    critical_max_duration_ms: 45000
    min_turns_to_summarize: 5
    max_turns_per_summary: 8
    compaction_recency_window: 4
    insight_dedup_enabled: true
    insight_similarity_threshold: 0.90
    max_insights_to_check: 50
    trend_window: 10
"""


SECTION_HEADER_TOKENS = 6
ITEM_OVERHEAD_TOKENS = 2

TokenEstimator = Callable[[str], int]

# The default estimator is the project's shared heuristic (recall.tokens): about
# ceil(len(text) / 4), never below a third of the words, 0 for empty text. The
# per-message overhead above is added on top of it.
estimate_tokens: TokenEstimator = _project_estimate_tokens


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SupportingContextConfig:
    """``memory.supporting_context``.

    ``max_items`` maps a section to its item cap; a section absent from it, or mapped to
    None, is uncapped. ``min_query_relevance`` (0.0 = off) drops scored items below it;
    ``exclude_redundant_summaries`` drops summaries flagged redundant.
    """

    budget_ratio: float = 0.30
    section_priority: tuple[str, ...] = DEFAULT_SECTION_PRIORITY
    max_items: Mapping[str, int | None] = field(default_factory=lambda: dict(DEFAULT_MAX_ITEMS))
    min_query_relevance: float = 0.0
    exclude_redundant_summaries: bool = True


@dataclass(frozen=True)
class PrimingConfig:
    """``memory.priming``: retrieval limits. They bound what is fetched, not formatted."""

    enabled: bool = True
    token_budget: int = 4000
    top_entities: int = 20
    max_insights: int = 10
    max_summaries: int = 5
    max_known_facts: int = 20
    previous_sessions: int = 1
    previous_session_turns: int = 3


@dataclass(frozen=True)
class LayoutConfig:
    """The ``memory:`` configuration: the Chat layout fragment plus ``compaction``."""

    context_window: int = 32000
    output_buffer: int = 2500
    max_history_turns: int = 15
    supporting_context: SupportingContextConfig = field(default_factory=SupportingContextConfig)
    priming: PrimingConfig = field(default_factory=PrimingConfig)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)


class LayoutError(ValueError):
    """Invalid layout input; ``errors`` maps a dotted path to a message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors: dict[str, str] = dict(errors)
        detail = "; ".join(f"{path}: {message}" for path, message in self.errors.items())
        super().__init__(detail)


class LayoutConfigError(LayoutError):
    """A ``memory:`` configuration was rejected."""


class LayoutRequestError(LayoutError):
    """A layout request was rejected."""


# A checker returns (normalised value, None) or (None, error message).
_Checked = tuple[Any, str | None]
_Checker = Callable[[Any], _Checked]
# A nested parser returns (parsed value, errors by dotted path).
_Parsed = tuple[Any, dict[str, str]]
_NestedParser = Callable[[Any, str], _Parsed]


def _is_number(value: Any) -> bool:
    # bool is an int subclass; `true` is never a valid number in a config.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_bool(value: Any) -> _Checked:
    if isinstance(value, bool):
        return value, None
    return None, f"must be true or false, got {value!r}"


# No real context window comes near this; the bound keeps later float maths from overflowing.
MAX_COUNT = 10**9


def _check_count(value: Any) -> _Checked:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value, None
    return None, f"must be a whole number from 0 to {MAX_COUNT}, got {value!r}"


def _check_ratio(value: Any) -> _Checked:
    if _is_number(value) and math.isfinite(value) and 0 <= value <= 1:
        return float(value), None
    return None, f"must be a number from 0 to 1, got {value!r}"


def _check_text(value: Any) -> _Checked:
    if isinstance(value, str) and value.strip():
        return value, None
    return None, f"must be a non-empty string, got {value!r}"


def _unknown_key_message(key: Any, known: Iterable[str], what: str = "key") -> str:
    known = list(known)
    message = f"unknown {what} {key!r}"
    if not isinstance(key, str):
        return f"{message}; expected one of: {', '.join(known)}"
    if key in LEGACY_NAMES and LEGACY_NAMES[key] in known:
        return (
            f"{message}; use {LEGACY_NAMES[key]!r} ({key!r} is an earlier guide's name "
            "and this layout does not read it)"
        )
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"{message}; did you mean {close[0]!r}?"
    return f"{message}; expected one of: {', '.join(known)}"


def _parse_object(
    value: Any,
    path: str,
    cls: type,
    scalars: Mapping[str, _Checker],
    nested: Mapping[str, _NestedParser] | None = None,
) -> _Parsed:
    """Parse a mapping into ``cls``: unknown keys rejected, missing keys defaulted."""
    nested = nested or {}
    if value is None:
        return cls(), {}
    if not isinstance(value, Mapping):
        return cls(), {path: f"must be a mapping, got {type(value).__name__}"}
    kwargs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    known = [*scalars, *nested]
    for key, item in value.items():
        sub = f"{path}.{key}"
        if key in scalars:
            checked, problem = scalars[key](item)
            sub_errors = {sub: problem} if problem else {}
        elif key in nested:
            checked, sub_errors = nested[key](item, sub)
        else:
            checked, sub_errors = None, {sub: _unknown_key_message(key, known)}
        errors.update(sub_errors)
        if not sub_errors:
            kwargs[key] = checked
    return cls(**kwargs), errors


def _parse_section_priority(value: Any, path: str) -> _Parsed:
    if not isinstance(value, list | tuple):
        return None, {path: f"must be a list of section names, got {value!r}"}
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for index, name in enumerate(value):
        sub = f"{path}[{index}]"
        if name not in KNOWN_SECTIONS:
            errors[sub] = _unknown_key_message(name, KNOWN_SECTIONS, "section")
        elif name in seen:
            errors[sub] = f"section {name!r} is listed twice"
        else:
            seen.add(name)  # a known name: an unknown one may not be hashable ({})
    return tuple(value), errors


def _parse_max_items(value: Any, path: str) -> _Parsed:
    if value is None:
        return dict(DEFAULT_MAX_ITEMS), {}
    if not isinstance(value, Mapping):
        return None, {path: f"must be a mapping of section name to count, got {value!r}"}
    # Given caps are merged over the defaults, like every other key; null = uncapped.
    merged: dict[str, int | None] = dict(DEFAULT_MAX_ITEMS)
    errors: dict[str, str] = {}
    for name, cap in value.items():
        sub = f"{path}.{name}"
        if name not in KNOWN_SECTIONS:
            errors[sub] = _unknown_key_message(name, KNOWN_SECTIONS, "section")
            continue
        checked, problem = (None, None) if cap is None else _check_count(cap)
        if problem:
            errors[sub] = problem
        else:
            merged[name] = checked
    return merged, errors


_SUPPORTING_SCALARS: dict[str, _Checker] = {
    "budget_ratio": _check_ratio,
    "min_query_relevance": _check_ratio,
    "exclude_redundant_summaries": _check_bool,
}
_SUPPORTING_NESTED: dict[str, _NestedParser] = {
    "section_priority": _parse_section_priority,
    "max_items": _parse_max_items,
}
_PRIMING_SCALARS: dict[str, _Checker] = {
    "enabled": _check_bool,
    "token_budget": _check_count,
    "top_entities": _check_count,
    "max_insights": _check_count,
    "max_summaries": _check_count,
    "max_known_facts": _check_count,
    "previous_sessions": _check_count,
    "previous_session_turns": _check_count,
}
_COMPACTION_SCALARS: dict[str, _Checker] = {
    "enabled": _check_bool,
    "llm_service": _check_text,
    "compaction_threshold": _check_ratio,
    "critical_threshold": _check_ratio,
    "target_utilization": _check_ratio,
    "cooldown_turns": _check_count,
    "max_duration_ms": _check_count,
    "critical_max_duration_ms": _check_count,
    "min_turns_to_summarize": _check_count,
    "max_turns_per_summary": _check_count,
    "compaction_recency_window": _check_count,
    "insight_dedup_enabled": _check_bool,
    "insight_similarity_threshold": _check_ratio,
    "max_insights_to_check": _check_count,
    "trend_window": _check_count,
}
_MEMORY_SCALARS: dict[str, _Checker] = {
    "context_window": _check_count,
    "output_buffer": _check_count,
    "max_history_turns": _check_count,
}


def _parse_supporting(value: Any, path: str) -> _Parsed:
    return _parse_object(
        value, path, SupportingContextConfig, _SUPPORTING_SCALARS, _SUPPORTING_NESTED
    )


def _parse_priming(value: Any, path: str) -> _Parsed:
    return _parse_object(value, path, PrimingConfig, _PRIMING_SCALARS)


def _parse_compaction(value: Any, path: str) -> _Parsed:
    return _parse_object(value, path, CompactionConfig, _COMPACTION_SCALARS)


_MEMORY_NESTED: dict[str, _NestedParser] = {
    "supporting_context": _parse_supporting,
    "priming": _parse_priming,
    "compaction": _parse_compaction,
}


def _load_yaml(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LayoutConfigError({"memory": f"invalid YAML: {exc}"}) from exc


def _memory_section(data: Any) -> Any:
    """Accept the document with or without its top-level ``memory:`` key."""
    if isinstance(data, Mapping) and "memory" in data:
        extra = [key for key in data if key != "memory"]
        if extra:
            raise LayoutConfigError(
                {str(key): "unknown top-level key; only 'memory' is allowed" for key in extra}
            )
        return data["memory"]
    return data


def parse_memory_config(data: Mapping[str, Any] | str | None) -> LayoutConfig:
    """Parse the ``memory:`` config (a dict or YAML text) into a ``LayoutConfig``.

    Missing keys take the seed's Chat defaults. Unknown or misspelled keys, at every
    level, and ill-typed values are all collected and raised together as a
    ``LayoutConfigError`` keyed by dotted path (always rooted at ``memory``).
    """
    if isinstance(data, str):
        data = _load_yaml(data)
    config, errors = _parse_object(
        _memory_section(data), "memory", LayoutConfig, _MEMORY_SCALARS, _MEMORY_NESTED
    )
    if errors:
        raise LayoutConfigError(errors)
    return config


def layout_config_to_dict(config: LayoutConfig) -> dict[str, Any]:
    """``{"memory": {...}}`` with plain lists/dicts; ``parse_memory_config`` inverts it."""
    return {"memory": _jsonable(config)}


def layout_config_errors(config: LayoutConfig) -> dict[str, str]:
    """Validate a directly constructed config with the same rules as the parser."""
    try:
        parse_memory_config(layout_config_to_dict(config))
    except LayoutConfigError as exc:
        return exc.errors
    return {}


# --------------------------------------------------------------------------------------
# Budget accounting
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetAccounting:
    fixed_costs: int
    dynamic_budget: int
    supporting_context_budget: int


def compute_budget(
    context_window: int,
    system_prompt_tokens: int,
    tool_schema_tokens: int,
    output_buffer: int,
    budget_ratio: float,
) -> BudgetAccounting:
    """The seed's formulas (32000/1500/500/2500/0.30 -> 27500 and 8250)."""
    fixed_costs = system_prompt_tokens + tool_schema_tokens + output_buffer
    dynamic_budget = max(0, context_window - fixed_costs)
    return BudgetAccounting(
        fixed_costs=fixed_costs,
        dynamic_budget=dynamic_budget,
        supporting_context_budget=math.floor(dynamic_budget * budget_ratio),
    )


# --------------------------------------------------------------------------------------
# Request
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One chat message; one turn for the cascade's "last N turns" stages."""

    role: str
    content: str


@dataclass(frozen=True)
class SupportingItem:
    """One supporting-context item.

    ``term`` is ``"short"`` or ``"long"`` and is required for passages. ``relevancy`` is
    the query relevance (None = unscored). ``redundant`` matters for summaries only.
    """

    content: str
    relevancy: float | None = None
    term: str | None = None
    decayed: bool = False
    superseded: bool = False
    redundant: bool = False
    id: str | None = None


TurnInput = Turn | Mapping[str, Any]
ItemInput = SupportingItem | Mapping[str, Any]


@dataclass(frozen=True)
class LayoutRequest:
    """What to lay out. None for context_window/output_buffer/budget_ratio = from config.

    ``history`` is the current session, oldest first; ``prior_session_history`` is
    earlier sessions' turns. ``supporting`` maps a section name to its items, in the
    caller's ranking order.
    """

    history: Sequence[TurnInput] = ()
    prior_session_history: Sequence[TurnInput] = ()
    supporting: Mapping[str, Sequence[ItemInput]] = field(default_factory=dict)
    query: str = ""
    system_prompt_tokens: int = 0
    tool_schema_tokens: int = 0
    context_window: int | None = None
    output_buffer: int | None = None
    budget_ratio: float | None = None
    config: LayoutConfig = field(default_factory=LayoutConfig)


_TURN_KEYS = ("role", "content")
_ITEM_KEYS = tuple(f.name for f in fields(SupportingItem))


def _coerce_turn(value: TurnInput, path: str, errors: dict[str, str]) -> Turn | None:
    if isinstance(value, Turn):
        turn = value
    elif isinstance(value, Mapping):
        unknown = [k for k in value if k not in _TURN_KEYS]
        for key in unknown:
            errors[f"{path}.{key}"] = _unknown_key_message(key, _TURN_KEYS)
        if unknown:
            return None
        turn = Turn(role=value.get("role", ""), content=value.get("content", ""))
    else:
        errors[path] = f"must be a message {{role, content}}, got {type(value).__name__}"
        return None
    if not isinstance(turn.role, str) or not isinstance(turn.content, str):
        errors[path] = "role and content must be strings"
        return None
    return turn


def _item_problem(item: SupportingItem, section: str) -> str | None:
    if not isinstance(item.content, str):
        return "content must be a string"
    if item.relevancy is not None and not (
        _is_number(item.relevancy) and math.isfinite(item.relevancy)
    ):
        return f"relevancy must be a finite number or null, got {item.relevancy!r}"
    if item.term is not None and item.term not in PASSAGE_TERMS:
        return f"term must be 'short' or 'long', got {item.term!r}"
    if section == "passages" and item.term is None:
        return "passages need a term: 'short' or 'long'"
    return None


def _coerce_item(
    value: ItemInput, section: str, path: str, errors: dict[str, str]
) -> SupportingItem | None:
    if isinstance(value, SupportingItem):
        item = value
    elif isinstance(value, Mapping):
        unknown = [k for k in value if k not in _ITEM_KEYS]
        for key in unknown:
            errors[f"{path}.{key}"] = _unknown_key_message(key, _ITEM_KEYS)
        if unknown:
            return None
        item = SupportingItem(**value)
    else:
        errors[path] = f"must be a supporting item, got {type(value).__name__}"
        return None
    problem = _item_problem(item, section)
    if problem:
        errors[path] = problem
        return None
    return item


def _coerce_turns(values: Sequence[TurnInput], path: str, errors: dict[str, str]) -> list[Turn]:
    turns = [_coerce_turn(v, f"{path}[{i}]", errors) for i, v in enumerate(values)]
    return [t for t in turns if t is not None]


def _coerce_supporting(
    values: Mapping[str, Sequence[ItemInput]], errors: dict[str, str]
) -> dict[str, list[SupportingItem]]:
    supporting: dict[str, list[SupportingItem]] = {}
    for section, items in values.items():
        path = f"supporting.{section}"
        if section not in KNOWN_SECTIONS:
            errors[path] = _unknown_key_message(section, KNOWN_SECTIONS, "section")
            continue
        coerced = [_coerce_item(v, section, f"{path}[{i}]", errors) for i, v in enumerate(items)]
        supporting[section] = [item for item in coerced if item is not None]
    return supporting


@dataclass(frozen=True)
class _Resolved:
    """A validated request: numbers resolved against the config, inputs coerced."""

    budget: BudgetAccounting
    context_window: int
    history: list[Turn]
    prior: list[Turn]
    supporting: dict[str, list[SupportingItem]]
    query: str
    config: LayoutConfig


def _resolve_request(request: LayoutRequest) -> _Resolved:
    config = request.config
    errors = {
        f"config.{k.removeprefix('memory.')}": v for k, v in layout_config_errors(config).items()
    }
    window = config.context_window if request.context_window is None else request.context_window
    output = config.output_buffer if request.output_buffer is None else request.output_buffer
    ratio = request.budget_ratio
    if ratio is None:
        ratio = config.supporting_context.budget_ratio
    numbers = {
        "context_window": _check_count(window),
        "output_buffer": _check_count(output),
        "system_prompt_tokens": _check_count(request.system_prompt_tokens),
        "tool_schema_tokens": _check_count(request.tool_schema_tokens),
        "budget_ratio": _check_ratio(ratio),
    }
    errors.update({name: problem for name, (_, problem) in numbers.items() if problem})
    if not isinstance(request.query, str):
        errors["query"] = "must be a string"
    history = _coerce_turns(request.history, "history", errors)
    prior = _coerce_turns(request.prior_session_history, "prior_session_history", errors)
    supporting = _coerce_supporting(request.supporting, errors)
    if errors:
        raise LayoutRequestError(errors)
    budget = compute_budget(
        window, request.system_prompt_tokens, request.tool_schema_tokens, output, float(ratio)
    )
    return _Resolved(budget, window, history, prior, supporting, request.query, config)


# --------------------------------------------------------------------------------------
# Estimation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Payload:
    """What would be sent: the thing the cascade prunes."""

    history: tuple[Turn, ...]
    prior: tuple[Turn, ...]
    supporting: Mapping[str, tuple[SupportingItem, ...]]


@dataclass(frozen=True)
class TokenBreakdown:
    """Estimated tokens per part; ``formatting`` is all framing (messages, headers, bullets)."""

    history: int
    prior_history: int
    supporting: int
    query: int
    formatting: int

    @property
    def total(self) -> int:
        return self.history + self.prior_history + self.supporting + self.query + self.formatting


class _Counter:
    """Wraps the estimator with a cache: the cascade re-estimates the same texts often."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self._estimator = estimator
        self._cache: dict[str, int] = {}

    def text(self, value: str) -> int:
        if value not in self._cache:
            tokens = self._estimator(value)
            if not isinstance(tokens, int) or tokens < 0:
                raise ValueError(f"token estimator returned {tokens!r}; expected an int >= 0")
            self._cache[value] = tokens
        return self._cache[value]

    def turns(self, turns: Iterable[Turn]) -> int:
        return sum(self.text(t.content) for t in turns)

    def items(self, items: Iterable[SupportingItem]) -> int:
        return sum(self.text(i.content) for i in items)


def _item_cost(counter: _Counter, item: SupportingItem, opens_section: bool) -> int:
    header = SECTION_HEADER_TOKENS if opens_section else 0
    return counter.text(item.content) + ITEM_OVERHEAD_TOKENS + header


def _formatting_overhead(payload: _Payload, query: str) -> int:
    messages = len(payload.history) + len(payload.prior) + (1 if query else 0)
    sections = sum(1 for items in payload.supporting.values() if items)
    if payload.prior:
        sections += 1  # earlier-session turns get their own header
    items = sum(len(items) for items in payload.supporting.values())
    return (
        messages * MESSAGE_OVERHEAD_TOKENS
        + sections * SECTION_HEADER_TOKENS
        + items * ITEM_OVERHEAD_TOKENS
    )


def _estimate(payload: _Payload, query: str, counter: _Counter) -> TokenBreakdown:
    return TokenBreakdown(
        history=counter.turns(payload.history),
        prior_history=counter.turns(payload.prior),
        supporting=sum(counter.items(items) for items in payload.supporting.values()),
        query=counter.text(query) if query else 0,
        formatting=_formatting_overhead(payload, query),
    )


# --------------------------------------------------------------------------------------
# Filtering and section filling (before pruning)
# --------------------------------------------------------------------------------------

FILTER_REASONS: tuple[str, ...] = (
    "decayed",
    "superseded",
    "redundant_summary",
    "below_min_query_relevance",
    "history_over_max_turns",
    "not_in_section_priority",
    "over_max_items",
    "over_supporting_budget",
)


def _exclusion_reason(
    item: SupportingItem, section: str, config: SupportingContextConfig
) -> str | None:
    if item.decayed:
        return "decayed"
    if item.superseded:
        return "superseded"
    if section == "summaries" and item.redundant and config.exclude_redundant_summaries:
        return "redundant_summary"
    # Unscored items (state, tools...) are not judged by query relevance.
    below = item.relevancy is not None and item.relevancy < config.min_query_relevance
    if config.min_query_relevance > 0 and below:
        return "below_min_query_relevance"
    return None


def filter_supporting(
    supporting: Mapping[str, Sequence[SupportingItem]],
    config: SupportingContextConfig,
    filtered: dict[str, int],
) -> dict[str, list[SupportingItem]]:
    """Drop decayed/superseded items, redundant summaries and low-relevance items."""
    kept: dict[str, list[SupportingItem]] = {}
    for section, items in supporting.items():
        kept[section] = []
        for item in items:
            reason = _exclusion_reason(item, section, config)
            if reason is None:
                kept[section].append(item)
            else:
                filtered[reason] += 1
    return kept


def _fill_section(
    items: Sequence[SupportingItem],
    cap: int | None,
    remaining: int,
    counter: _Counter,
    filtered: dict[str, int],
) -> tuple[list[SupportingItem], int]:
    kept: list[SupportingItem] = []
    for item in items:
        if cap is not None and len(kept) >= cap:
            filtered["over_max_items"] += 1
            continue
        cost = _item_cost(counter, item, opens_section=not kept)
        # Skip rather than stop: a later, smaller item may still fit.
        if cost > remaining:
            filtered["over_supporting_budget"] += 1
            continue
        kept.append(item)
        remaining -= cost
    return kept, remaining


def fill_sections(
    supporting: Mapping[str, Sequence[SupportingItem]],
    config: SupportingContextConfig,
    supporting_budget: int,
    counter: _Counter,
    filtered: dict[str, int],
) -> dict[str, tuple[SupportingItem, ...]]:
    """Fill sections in ``section_priority`` order within the budget and ``max_items``.

    Each item costs its content plus formatting overhead (a bullet, and the section
    header for the first item), reserved here so formatting cannot overflow the budget.
    Sections not listed in ``section_priority`` get no space (counted and warned).
    """
    remaining = supporting_budget
    selected: dict[str, tuple[SupportingItem, ...]] = {}
    for section in config.section_priority:
        cap = config.max_items.get(section)
        items = supporting.get(section, [])
        kept, remaining = _fill_section(items, cap, remaining, counter, filtered)
        selected[section] = tuple(kept)
    for section, items in supporting.items():
        if section not in config.section_priority:
            filtered["not_in_section_priority"] += len(items)
    return selected


# --------------------------------------------------------------------------------------
# The pruning cascade
# --------------------------------------------------------------------------------------

Removed = dict[str, int]
_StageFn = Callable[[_Payload], tuple[_Payload, Removed]]


def _relevance_key(item: SupportingItem) -> float:
    # Unscored items rank below every score: under pressure they go first.
    return -math.inf if item.relevancy is None else item.relevancy


def _top_indices_by_relevance(
    items: Sequence[SupportingItem], indices: Sequence[int], keep: int
) -> set[int]:
    """Indices of the ``keep`` most relevant of ``items[indices]``; ties by position."""
    ranked = sorted(indices, key=lambda i: (-_relevance_key(items[i]), i))
    return set(ranked[:keep])


def _passage_mask(passages: Sequence[SupportingItem], short: int, long: int) -> list[bool]:
    """Mask keeping the top ``short`` short-term and ``long`` long-term passages."""
    chosen: set[int] = set()
    for term, keep in (("short", short), ("long", long)):
        indices = [i for i, p in enumerate(passages) if p.term == term]
        chosen |= _top_indices_by_relevance(passages, indices, keep)
    return [i in chosen for i in range(len(passages))]


def _with_sections(payload: _Payload, **sections: tuple[SupportingItem, ...]) -> _Payload:
    return replace(payload, supporting={**payload.supporting, **sections})


def _nonzero(counts: Removed) -> Removed:
    return {key: count for key, count in counts.items() if count}


def drop_prior_session_history(payload: _Payload) -> tuple[_Payload, Removed]:
    return replace(payload, prior=()), _nonzero({"prior_session_turns": len(payload.prior)})


def _keep_last_turns(payload: _Payload, keep: int) -> tuple[_Payload, Removed]:
    kept = payload.history[-keep:] if keep else ()
    return replace(payload, history=kept), _nonzero({"turns": len(payload.history) - len(kept)})


def keep_last_10_turns(payload: _Payload) -> tuple[_Payload, Removed]:
    return _keep_last_turns(payload, 10)


def keep_last_5_turns(payload: _Payload) -> tuple[_Payload, Removed]:
    return _keep_last_turns(payload, 5)


def _split_passages(
    passages: Sequence[SupportingItem], keep: Sequence[bool]
) -> tuple[tuple[SupportingItem, ...], Removed]:
    """Keep passages by index mask; count the rest per term (equal items stay distinct)."""
    kept = tuple(p for p, k in zip(passages, keep, strict=True) if k)
    removed: Removed = {}
    for passage, k in zip(passages, keep, strict=True):
        if not k:
            key = f"{passage.term}_passages"
            removed[key] = removed.get(key, 0) + 1
    return kept, removed


def _drop_passages_below(
    payload: _Payload, terms: tuple[str, ...], threshold: float
) -> tuple[_Payload, Removed]:
    passages = payload.supporting.get("passages", ())
    keep = [p.term not in terms or _relevance_key(p) >= threshold for p in passages]
    kept, removed = _split_passages(passages, keep)
    return _with_sections(payload, passages=kept), removed


def drop_long_passages_below_0_3(payload: _Payload) -> tuple[_Payload, Removed]:
    return _drop_passages_below(payload, ("long",), 0.3)


def drop_passages_below_0_5(payload: _Payload) -> tuple[_Payload, Removed]:
    return _drop_passages_below(payload, ("short", "long"), 0.5)


def _cap_passages(payload: _Payload, short: int, long: int) -> tuple[_Payload, Removed]:
    passages = payload.supporting.get("passages", ())
    kept, removed = _split_passages(passages, _passage_mask(passages, short, long))
    return _with_sections(payload, passages=kept), removed


def keep_3_short_2_long_passages(payload: _Payload) -> tuple[_Payload, Removed]:
    return _cap_passages(payload, short=3, long=2)


def _cap_sections(payload: _Payload, caps: Mapping[str, int]) -> tuple[_Payload, Removed]:
    """Keep the first N of each section, in the caller's ranking order."""
    capped = {name: payload.supporting.get(name, ())[:cap] for name, cap in caps.items()}
    removed = {name: len(payload.supporting.get(name, ())) - len(capped[name]) for name in caps}
    return _with_sections(payload, **capped), _nonzero(removed)


def keep_3_insights_3_summaries(payload: _Payload) -> tuple[_Payload, Removed]:
    return _cap_sections(payload, {"insights": 3, "summaries": 3})


def keep_5_entities_5_facts(payload: _Payload) -> tuple[_Payload, Removed]:
    return _cap_sections(payload, {"entities": 5, "known_facts": 5})


def emergency_minimum(payload: _Payload) -> tuple[_Payload, Removed]:
    """Last 2 turns and up to 2 short-term passages; every other item is cleared."""
    reduced, removed = _keep_last_turns(payload, 2)
    if payload.prior:  # stage 1 already emptied it; this keeps the stage correct alone
        removed["prior_session_turns"] = len(payload.prior)
    passages = payload.supporting.get("passages", ())
    kept, removed_passages = _split_passages(passages, _passage_mask(passages, 2, 0))
    removed.update(removed_passages)
    for name, items in payload.supporting.items():
        if name != "passages" and items:
            removed[name] = len(items)
    cleared = {name: () for name in payload.supporting if name != "passages"}
    return replace(reduced, prior=(), supporting={**cleared, "passages": kept}), removed


@dataclass(frozen=True)
class PruningStage:
    number: int
    name: str
    description: str
    apply: _StageFn


PRUNING_STAGES: tuple[PruningStage, ...] = (
    PruningStage(
        1,
        "drop_prior_session_history",
        "Drops all prior-session history.",
        drop_prior_session_history,
    ),
    PruningStage(
        2,
        "keep_last_10_turns",
        "Keeps at most the last 10 current-session turns.",
        keep_last_10_turns,
    ),
    PruningStage(
        3,
        "drop_long_passages_below_0_3",
        "Removes long-term passages with relevancy below 0.3.",
        drop_long_passages_below_0_3,
    ),
    PruningStage(
        4,
        "drop_passages_below_0_5",
        "Removes short/long-term passages with relevancy below 0.5.",
        drop_passages_below_0_5,
    ),
    PruningStage(
        5,
        "keep_last_5_turns",
        "Keeps at most the last 5 current turns.",
        keep_last_5_turns,
    ),
    PruningStage(
        6,
        "keep_3_short_2_long_passages",
        "Keeps up to 3 short-term and 2 long-term passages by relevance.",
        keep_3_short_2_long_passages,
    ),
    PruningStage(
        7,
        "keep_3_insights_3_summaries",
        "Keeps up to 3 insights and 3 summaries.",
        keep_3_insights_3_summaries,
    ),
    PruningStage(
        8,
        "keep_5_entities_5_facts",
        "Keeps up to 5 entities and 5 facts.",
        keep_5_entities_5_facts,
    ),
    PruningStage(
        9,
        "emergency_minimum",
        "Falls back to the last 2 turns and up to 2 short-term passages, clearing the "
        "other supporting items and emitting a pruning warning.",
        emergency_minimum,
    ),
)
EMERGENCY_STAGE = PRUNING_STAGES[-1].number


@dataclass(frozen=True)
class StageReport:
    """One cascade stage that ran: what it removed and whether the result then fit."""

    number: int
    name: str
    description: str
    removed: dict[str, int]
    estimate_after: int
    fits: bool


def run_cascade(
    payload: _Payload, query: str, dynamic_budget: int, counter: _Counter
) -> tuple[_Payload, list[StageReport]]:
    """Apply stages in order, checking the estimate after each; stop at the first fit."""
    reports: list[StageReport] = []
    for stage in PRUNING_STAGES:
        payload, removed = stage.apply(payload)
        estimate = _estimate(payload, query, counter).total
        fits = estimate <= dynamic_budget
        reports.append(
            StageReport(stage.number, stage.name, stage.description, removed, estimate, fits)
        )
        if fits:
            break
    return payload, reports


# --------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayoutResult:
    """The laid-out context and its budget diagnostics.

    ``utilization_pct`` is ``estimated_tokens`` relative to the *dynamic* budget: fixed
    costs (system prompt, tool schemas, output buffer) are reserved up front, so 100 %
    means the window is full with the output buffer still intact. ``available_budget``
    is that denominator (as in ``BudgetStatus``); ``free_tokens`` is what is left.
    The per-part figures (fixed / history / supporting / query / formatting / free) add
    up to ``context_window`` whenever the layout fits.
    """

    context_window: int
    fixed_costs: int
    dynamic_budget: int
    supporting_context_budget: int
    formatting_overhead: int
    estimate_before_pruning: int
    estimated_tokens: int
    available_budget: int
    free_tokens: int
    utilization_pct: float
    severity: BudgetSeverity
    fits: bool
    emergency_overage: bool
    history_tokens: int
    prior_history_tokens: int
    supporting_tokens: int
    query_tokens: int
    stages: list[StageReport]
    history: list[Turn]
    prior_session_history: list[Turn]
    supporting: dict[str, list[SupportingItem]]
    filtered: dict[str, int]
    warnings: list[str]

    @property
    def stages_run(self) -> list[int]:
        return [stage.number for stage in self.stages]

    def budget_status(self, turn_index: int | None = None) -> BudgetStatus:
        """This layout as a reading for ``ContextBudgetMonitor.record_turn``."""
        return BudgetStatus(
            total_tokens=self.estimated_tokens,
            available_budget=self.available_budget,
            utilization_pct=self.utilization_pct,
            severity=self.severity,
            turn_index=turn_index,
        )


def _budget_warnings(resolved: _Resolved, filtered: Mapping[str, int]) -> list[str]:
    warnings: list[str] = []
    budget = resolved.budget
    if budget.dynamic_budget == 0:
        warnings.append(
            f"fixed costs ({budget.fixed_costs} tokens) leave no room in the "
            f"{resolved.context_window}-token context window"
        )
    if filtered["not_in_section_priority"]:
        unlisted = sorted(
            s
            for s, items in resolved.supporting.items()
            if items and s not in resolved.config.supporting_context.section_priority
        )
        warnings.append(
            f"{filtered['not_in_section_priority']} item(s) in section(s) "
            f"{', '.join(unlisted)} were not used: not listed in section_priority"
        )
    return warnings


def _describe_removed(removed: Mapping[str, int]) -> str:
    if not removed:
        return "nothing more"
    return ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in removed.items())


def _cascade_warnings(reports: Sequence[StageReport], dynamic_budget: int) -> list[str]:
    if not reports or reports[-1].number != EMERGENCY_STAGE:
        return []
    last = reports[-1]
    warnings = [
        "pruning reached the emergency minimum: kept only the last 2 turns and up to 2 "
        f"short-term passages; removed {_describe_removed(last.removed)}"
    ]
    if not last.fits:
        warnings.append(
            f"emergency overage: even the emergency minimum is estimated at "
            f"{last.estimate_after} tokens, {last.estimate_after - dynamic_budget} over the "
            f"{dynamic_budget}-token dynamic budget; reduce fixed costs, the query or turn "
            "sizes — do not raise context_window above the real model limit"
        )
    return warnings


def _build_result(
    resolved: _Resolved,
    payload: _Payload,
    initial: TokenBreakdown,
    final: TokenBreakdown,
    reports: list[StageReport],
    filtered: dict[str, int],
) -> LayoutResult:
    budget = resolved.budget
    total = final.total
    fits = total <= budget.dynamic_budget
    pct = utilization_pct(total, budget.dynamic_budget)
    return LayoutResult(
        context_window=resolved.context_window,
        fixed_costs=budget.fixed_costs,
        dynamic_budget=budget.dynamic_budget,
        supporting_context_budget=budget.supporting_context_budget,
        formatting_overhead=final.formatting,
        estimate_before_pruning=initial.total,
        estimated_tokens=total,
        available_budget=budget.dynamic_budget,
        free_tokens=max(0, budget.dynamic_budget - total),
        utilization_pct=pct,
        severity=BudgetSeverity.from_utilization(pct),
        fits=fits,
        # The cascade only ends unfit after stage 9, so "not fits" is the emergency case.
        emergency_overage=not fits,
        history_tokens=final.history,
        prior_history_tokens=final.prior_history,
        supporting_tokens=final.supporting,
        query_tokens=final.query,
        stages=reports,
        history=list(payload.history),
        prior_session_history=list(payload.prior),
        supporting={name: list(items) for name, items in payload.supporting.items() if items},
        filtered=filtered,
        warnings=_budget_warnings(resolved, filtered)
        + _cascade_warnings(reports, budget.dynamic_budget),
    )


def plan_layout(
    request: LayoutRequest, estimator: TokenEstimator = estimate_tokens
) -> LayoutResult:
    """Filter, fill supporting sections, and prune with the nine-stage cascade if needed.

    Raises ``LayoutRequestError`` for invalid input. ``estimator`` maps text to a token
    count (default ``estimate_tokens``); formatting overhead is added on top of it.
    """
    resolved = _resolve_request(request)
    counter = _Counter(estimator)
    supporting_config = resolved.config.supporting_context
    filtered = dict.fromkeys(FILTER_REASONS, 0)
    max_turns = resolved.config.max_history_turns
    history = resolved.history[-max_turns:] if max_turns else []
    filtered["history_over_max_turns"] = len(resolved.history) - len(history)
    usable = filter_supporting(resolved.supporting, supporting_config, filtered)
    selected = fill_sections(
        usable, supporting_config, resolved.budget.supporting_context_budget, counter, filtered
    )
    payload = _Payload(tuple(history), tuple(resolved.prior), selected)
    initial = _estimate(payload, resolved.query, counter)
    reports: list[StageReport] = []
    if initial.total > resolved.budget.dynamic_budget:
        payload, reports = run_cascade(
            payload, resolved.query, resolved.budget.dynamic_budget, counter
        )
    final = _estimate(payload, resolved.query, counter)
    return _build_result(resolved, payload, initial, final, reports, filtered)


# --------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no infinity; a zero budget is also flagged as overage
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def layout_result_to_dict(result: LayoutResult) -> dict[str, Any]:
    """Plain JSON-ready dict (snake_case; the API layer renames). Stages omit callables."""
    data = _jsonable(result)
    data["stages_run"] = result.stages_run
    return data
