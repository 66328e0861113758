"""What a caller asks the layout planner to lay out, and its one pure validation.

Plain Python, no Django import.

A ``LayoutRequest`` holds typed turns and items. The API and the sandbox page build it from
data that ``LayoutRequestSerializer`` has already validated, and the planner trusts it
(``planner.plan_checked_layout``). Every other caller (a script, a test, the seed's offline
example) goes through ``check_request`` (``planner.plan_layout`` does): it may have built the
request from JSON-like data, so turns and items written as plain mappings are built into
their dataclasses there, and every number, item and the config are checked, all problems
raised together as one ``LayoutRequestError`` keyed by the request's own names
(``history[2].role``, ``supporting.passages[0]``, ``config.compaction.enabled``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

from recall.layout.config import (
    LayoutConfig,
    LayoutError,
    check_count,
    check_ratio,
    is_number,
    layout_config_errors,
    unknown_key_message,
)
from recall.layout.vocabulary import KNOWN_SECTIONS, PASSAGE_TERMS


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


@dataclass(frozen=True)
class LayoutRequest:
    """What to lay out. None for context_window/output_buffer/budget_ratio = from config.

    ``history`` is the current session, oldest first; ``prior_session_history`` is
    earlier sessions' turns. ``supporting`` maps a section name to its items, in the
    caller's ranking order.
    """

    history: Sequence[Turn] = ()
    prior_session_history: Sequence[Turn] = ()
    supporting: Mapping[str, Sequence[SupportingItem]] = field(default_factory=dict)
    query: str = ""
    system_prompt_tokens: int = 0
    tool_schema_tokens: int = 0
    context_window: int | None = None
    output_buffer: int | None = None
    budget_ratio: float | None = None
    config: LayoutConfig = field(default_factory=LayoutConfig)

    # The one place where "None means the config's" is decided.
    @property
    def resolved_context_window(self) -> int:
        given = self.context_window
        return self.config.context_window if given is None else given

    @property
    def resolved_output_buffer(self) -> int:
        given = self.output_buffer
        return self.config.output_buffer if given is None else given

    @property
    def resolved_budget_ratio(self) -> float:
        given = self.budget_ratio
        return self.config.supporting_context.budget_ratio if given is None else given


class LayoutRequestError(LayoutError):
    """A layout request was rejected."""


_TURN_KEYS = ("role", "content")
_ITEM_KEYS = tuple(f.name for f in fields(SupportingItem))


def _checked_turn(value: object, path: str, errors: dict[str, str]) -> Turn | None:
    if isinstance(value, Turn):
        turn = value
    elif isinstance(value, Mapping):
        unknown = [k for k in value if k not in _TURN_KEYS]
        for key in unknown:
            errors[f"{path}.{key}"] = unknown_key_message(key, _TURN_KEYS)
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
        is_number(item.relevancy) and math.isfinite(item.relevancy)
    ):
        return f"relevancy must be a finite number or null, got {item.relevancy!r}"
    if item.term is not None and item.term not in PASSAGE_TERMS:
        return f"term must be 'short' or 'long', got {item.term!r}"
    if section == "passages" and item.term is None:
        return "passages need a term: 'short' or 'long'"
    return None


def _checked_item(
    value: object, section: str, path: str, errors: dict[str, str]
) -> SupportingItem | None:
    if isinstance(value, SupportingItem):
        item = value
    elif isinstance(value, Mapping):
        unknown = [k for k in value if k not in _ITEM_KEYS]
        for key in unknown:
            errors[f"{path}.{key}"] = unknown_key_message(key, _ITEM_KEYS)
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


def _checked_turns(values: Sequence[object], path: str, errors: dict[str, str]) -> list[Turn]:
    turns = [_checked_turn(v, f"{path}[{i}]", errors) for i, v in enumerate(values)]
    return [t for t in turns if t is not None]


def _checked_supporting(
    values: Mapping[str, Sequence[object]], errors: dict[str, str]
) -> dict[str, list[SupportingItem]]:
    supporting: dict[str, list[SupportingItem]] = {}
    for section, items in values.items():
        path = f"supporting.{section}"
        if section not in KNOWN_SECTIONS:
            errors[path] = unknown_key_message(section, KNOWN_SECTIONS, "section")
            continue
        checked = [_checked_item(v, section, f"{path}[{i}]", errors) for i, v in enumerate(items)]
        supporting[section] = [item for item in checked if item is not None]
    return supporting


def check_request(request: LayoutRequest) -> LayoutRequest:
    """``request`` checked, with its turns and items built into dataclasses (see the module).

    The numbers are checked as resolved against the config (a None takes the config's), so a
    directly built config that is itself invalid is named under ``config.`` and wherever it
    was used. Raises ``LayoutRequestError``.
    """
    errors = {
        f"config.{path.removeprefix('memory.')}": message
        for path, message in layout_config_errors(request.config).items()
    }
    numbers = {
        "context_window": check_count(request.resolved_context_window),
        "output_buffer": check_count(request.resolved_output_buffer),
        "system_prompt_tokens": check_count(request.system_prompt_tokens),
        "tool_schema_tokens": check_count(request.tool_schema_tokens),
        "budget_ratio": check_ratio(request.resolved_budget_ratio),
    }
    errors.update({name: problem for name, (_, problem) in numbers.items() if problem})
    if not isinstance(request.query, str):
        errors["query"] = "must be a string"
    history = _checked_turns(request.history, "history", errors)
    prior = _checked_turns(request.prior_session_history, "prior_session_history", errors)
    supporting = _checked_supporting(request.supporting, errors)
    if errors:
        raise LayoutRequestError(errors)
    return replace(
        request,
        history=tuple(history),
        prior_session_history=tuple(prior),
        supporting={name: tuple(items) for name, items in supporting.items()},
    )
