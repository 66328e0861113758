"""The ``memory:`` layout configuration (seed 000): its dataclasses, parsing and YAML.

Plain Python, no Django import.

Parsing, for a mapping or YAML text, with or without the top-level ``memory:`` key:

1. YAML text is read by ``load_yaml``, the one loader: at most ``YAML_MAX_CHARS`` characters,
   no anchors or aliases, and whatever PyYAML cannot build (a 5,000-digit integer, a 13th
   month, nesting thousands deep) is an error, not a crash;
2. each level is a mapping whose keys are checked against a table of checkers (a scalar) and
   nested parsers (a list or a mapping); unknown keys are rejected with a suggestion
   (``vocabulary.suggested_name``) and missing keys take the seed's Chat defaults;
3. every problem, at every level, is collected and raised together as one
   ``LayoutConfigError`` keyed by dotted path (always rooted at ``memory``);
4. a key nothing reads yet (``NO_EFFECT``) set away from its default is refused, saying so;
   a save of a workload's configuration also refuses a key no session reads
   (``SESSION_NO_EFFECT``).

The tables (``MEMORY_SCALARS`` ...) are public so that the OpenAPI schema is read off them
(``recall.api.layout_schemas``) instead of restating them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from recall.layout.monitor import CompactionConfig
from recall.layout.plain import plain_data
from recall.layout.vocabulary import KNOWN_SECTIONS, MAX_COUNT, suggested_name

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

# YAML pasted into a form or a request body; a config fragment is a few hundred bytes.
YAML_MAX_CHARS = 64_000


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


# --- checkers: one per kind of scalar ----------------------------------------------------------

# A checker returns (normalised value, None) or (None, error message).
Checked = tuple[Any, str | None]
Checker = Callable[[Any], Checked]
# A nested parser returns (parsed value, errors by dotted path).
Parsed = tuple[Any, dict[str, str]]
NestedParser = Callable[[Any, str], Parsed]


def is_number(value: Any) -> bool:
    # bool is an int subclass; `true` is never a valid number in a config.
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_bool(value: Any) -> Checked:
    if isinstance(value, bool):
        return value, None
    return None, f"must be true or false, got {value!r}"


def check_count(value: Any) -> Checked:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value, None
    return None, f"must be a whole number from 0 to {MAX_COUNT}, got {value!r}"


def check_ratio(value: Any) -> Checked:
    if is_number(value) and math.isfinite(value) and 0 <= value <= 1:
        return float(value), None
    return None, f"must be a number from 0 to 1, got {value!r}"


def check_text(value: Any) -> Checked:
    if isinstance(value, str) and value.strip():
        return value, None
    return None, f"must be a non-empty string, got {value!r}"


def unknown_key_message(key: Any, known: Iterable[str], what: str = "key") -> str:
    known = list(known)
    message = f"unknown {what} {key!r}"
    suggestion = suggested_name(key, known)
    if suggestion is None:
        return f"{message}; expected one of: {', '.join(known)}"
    if suggestion.legacy:
        return (
            f"{message}; use {suggestion.name!r} ({key!r} is an earlier guide's name "
            "and this layout does not read it)"
        )
    return f"{message}; did you mean {suggestion.name!r}?"


# --- parsers: one per level --------------------------------------------------------------------


def _parse_object(
    value: Any,
    path: str,
    cls: type,
    scalars: Mapping[str, Checker],
    nested: Mapping[str, NestedParser] | None = None,
) -> Parsed:
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
            checked, sub_errors = None, {sub: unknown_key_message(key, known)}
        errors.update(sub_errors)
        if not sub_errors:
            kwargs[key] = checked
    return cls(**kwargs), errors


def parse_section_priority(value: Any, path: str) -> Parsed:
    if not isinstance(value, list | tuple):
        return None, {path: f"must be a list of section names, got {value!r}"}
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for index, name in enumerate(value):
        sub = f"{path}[{index}]"
        if name not in KNOWN_SECTIONS:
            errors[sub] = unknown_key_message(name, KNOWN_SECTIONS, "section")
        elif name in seen:
            errors[sub] = f"section {name!r} is listed twice"
        else:
            seen.add(name)  # a known name: an unknown one may not be hashable ({})
    return tuple(value), errors


def parse_max_items(value: Any, path: str) -> Parsed:
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
            errors[sub] = unknown_key_message(name, KNOWN_SECTIONS, "section")
            continue
        checked, problem = (None, None) if cap is None else check_count(cap)
        if problem:
            errors[sub] = problem
        else:
            merged[name] = checked
    return merged, errors


SUPPORTING_SCALARS: dict[str, Checker] = {
    "budget_ratio": check_ratio,
    "min_query_relevance": check_ratio,
    "exclude_redundant_summaries": check_bool,
}
SUPPORTING_NESTED: dict[str, NestedParser] = {
    "section_priority": parse_section_priority,
    "max_items": parse_max_items,
}
PRIMING_SCALARS: dict[str, Checker] = {
    "enabled": check_bool,
    "token_budget": check_count,
    "top_entities": check_count,
    "max_insights": check_count,
    "max_summaries": check_count,
    "max_known_facts": check_count,
    "previous_sessions": check_count,
    "previous_session_turns": check_count,
}
COMPACTION_SCALARS: dict[str, Checker] = {
    "enabled": check_bool,
    "llm_service": check_text,
    "compaction_threshold": check_ratio,
    "critical_threshold": check_ratio,
    "target_utilization": check_ratio,
    "cooldown_turns": check_count,
    "max_duration_ms": check_count,
    "critical_max_duration_ms": check_count,
    "min_turns_to_summarize": check_count,
    "max_turns_per_summary": check_count,
    "compaction_recency_window": check_count,
    "insight_dedup_enabled": check_bool,
    "insight_similarity_threshold": check_ratio,
    "max_insights_to_check": check_count,
    "trend_window": check_count,
}
MEMORY_SCALARS: dict[str, Checker] = {
    "context_window": check_count,
    "output_buffer": check_count,
    "max_history_turns": check_count,
}


def _parse_supporting(value: Any, path: str) -> Parsed:
    return _parse_object(
        value, path, SupportingContextConfig, SUPPORTING_SCALARS, SUPPORTING_NESTED
    )


def _parse_priming(value: Any, path: str) -> Parsed:
    return _parse_object(value, path, PrimingConfig, PRIMING_SCALARS)


def _parse_compaction(value: Any, path: str) -> Parsed:
    return _parse_object(value, path, CompactionConfig, COMPACTION_SCALARS)


MEMORY_NESTED: dict[str, NestedParser] = {
    "supporting_context": _parse_supporting,
    "priming": _parse_priming,
    "compaction": _parse_compaction,
}


# --- YAML and the whole document ---------------------------------------------------------------


# Collections inside collections a config may have: it needs five or six.
YAML_MAX_DEPTH = 64
_TOO_DEEP = "the YAML is nested too deeply to be a config"
_OPENS = (
    yaml.BlockMappingStartToken,
    yaml.BlockSequenceStartToken,
    yaml.FlowMappingStartToken,
    yaml.FlowSequenceStartToken,
)
_CLOSES = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)


def load_yaml(text: str) -> Any:
    """Safe YAML, bounded in size and without anchors/aliases.

    Aliases let a few lines expand into an exponentially large value (and error message), and a
    config fragment never needs them. Every failure is a ``LayoutConfigError`` at ``memory``.
    """
    if len(text) > YAML_MAX_CHARS:
        raise LayoutConfigError({"memory": f"YAML text over {YAML_MAX_CHARS} characters"})
    try:
        depth = 0
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, yaml.AliasToken | yaml.AnchorToken):
                raise LayoutConfigError({"memory": "YAML anchors and aliases are not supported"})
            if isinstance(token, _OPENS):
                depth += 1
                if depth > YAML_MAX_DEPTH:
                    # Stopped here: PyYAML's scanner slows quadratically with the nesting
                    # (seconds for 5,000 brackets) and its composer recurses once a level.
                    raise LayoutConfigError({"memory": _TOO_DEEP})
            elif isinstance(token, _CLOSES):
                depth -= 1
        return yaml.safe_load(text)
    except LayoutConfigError:
        raise
    except yaml.YAMLError as exc:
        raise LayoutConfigError({"memory": f"invalid YAML: {exc}"}) from exc
    except RecursionError as exc:
        raise LayoutConfigError({"memory": _TOO_DEEP}) from exc
    except (ValueError, OverflowError) as exc:
        # A scalar YAML resolves to a value Python cannot build (a 5,000-digit integer,
        # 2024-13-45): the text is not a usable config.
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


# Keys the seed names, which the parser accepts, but which nothing reads: set to anything but
# its default, each is refused with the reason (seed 000: "a flexible dict accepting a
# misspelled key does not mean the formatter uses it"). Every other key changes what a session
# turn, its compaction run or the Layout tab gives (tests/chat/test_config_keys.py walks them
# all).
NO_EFFECT: dict[str, str] = {
    # Seed 000: "critical_threshold is an accepted config field but does not replace that
    # fixed classifier in the current monitor."
    "compaction.critical_threshold": (
        "has no effect: the severity classes are fixed (critical above 95 %, overage above "
        "100 %), as in seed 000"
    ),
}


# Keys a layout request uses (``POST /v1/context/layout`` with items flagged ``redundant``) but
# a session never does. A workload's stored configuration is what its sessions run under, so
# saving one of these away from its default is refused with the reason
# (``recall.layout.services.layout_config_validate``); a layout request still takes it.
SESSION_NO_EFFECT: dict[str, str] = {
    "supporting_context.exclude_redundant_summaries": (
        "has no effect on a session: no summary a session recalls repeats a turn of its"
        " prompt (a compaction takes the turns it summarises out of the history), so none is"
        " flagged redundant; it acts only on summaries flagged redundant in a"
        " POST /v1/context/layout request"
    ),
}


def no_effect_errors(config: LayoutConfig, table: Mapping[str, str] = NO_EFFECT) -> dict[str, str]:
    """A problem for each key of ``table`` set to another value than its default."""
    errors: dict[str, str] = {}
    defaults = LayoutConfig()
    for key, reason in table.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        default = getattr(getattr(defaults, section), name)
        if value != default:
            errors[f"memory.{key}"] = f"{reason}; leave it out or at its default ({default!r})"
    return errors


def parse_memory_config(data: Any, *, accept_no_effect: bool = False) -> LayoutConfig:
    """Parse a ``memory:`` config (a mapping, YAML text or None) into a ``LayoutConfig``.

    See the module docstring; raises ``LayoutConfigError`` keyed by dotted path. A key of
    ``NO_EFFECT`` away from its default is refused, unless ``accept_no_effect`` (a document
    stored before it was found to have no effect, read back as it was saved).
    """
    if isinstance(data, str):
        data = load_yaml(data)
    elif data is not None and not isinstance(data, Mapping):
        raise LayoutConfigError(
            {"memory": f"must be a mapping or YAML text, got {type(data).__name__}"}
        )
    config, errors = _parse_object(
        _memory_section(data), "memory", LayoutConfig, MEMORY_SCALARS, MEMORY_NESTED
    )
    if not errors and not accept_no_effect:
        errors = no_effect_errors(config)
    if errors:
        raise LayoutConfigError(errors)
    return config


def layout_config_to_dict(config: LayoutConfig) -> dict[str, Any]:
    """``{"memory": {...}}`` with plain lists/dicts; ``parse_memory_config`` inverts it."""
    return {"memory": plain_data(config)}


def layout_config_errors(config: LayoutConfig) -> dict[str, str]:
    """Validate a directly constructed config with the same rules as the parser."""
    try:
        parse_memory_config(layout_config_to_dict(config))
    except LayoutConfigError as exc:
        return exc.errors
    return {}


class _ConfigDumper(yaml.SafeDumper):
    """Block-style mappings with one-line lists, as the seed writes its fragments."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_ConfigDumper.add_representer(list, _represent_list)


def layout_config_yaml(config: LayoutConfig) -> str:
    """The config as the ``memory:`` YAML a person would write; ``parse_memory_config`` inverts it.

    Key order follows the config's fields (the seed's order), not the alphabet, so a stored
    config reads like the fragment it came from.
    """
    return yaml.dump(
        layout_config_to_dict(config), Dumper=_ConfigDumper, sort_keys=False, width=100
    )
