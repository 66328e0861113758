"""A workload's stored ``memory:`` layout configuration: validate, version, audit, read.

The rules live in ``recall.layout`` (pure); this module only persists what it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from django.db import transaction
from django.db.models import QuerySet

from audit.models import EventType
from audit.services import audit_event_record
from policies.models import Workload
from policies.services import change_comment, workload_check_live
from portal.errors import ValidationFailed
from portal.versioning import NO_VERSION, base_version_check
from recall import runtime
from recall.budget_monitor import CompactionDecision, ContextBudgetMonitor
from recall.layout import (
    LayoutConfig,
    LayoutConfigError,
    LayoutRequest,
    LayoutResult,
    layout_config_to_dict,
    parse_memory_config,
    plan_layout,
)
from recall.models import WorkloadLayoutConfigVersion

# The planner does float arithmetic on these; an absurd integer (10**400) would overflow it.
# A billion tokens is far above any real model's window.
MAX_TOKENS = 1_000_000_000
# YAML pasted into a form or a request body; a config fragment is a few hundred bytes.
YAML_MAX_CHARS = 64_000
_BOUNDED_TOKEN_KEYS = ("context_window", "output_buffer")


def _load_yaml(text: str) -> Any:
    """Safe YAML without anchors/aliases.

    Aliases let a few lines expand into an exponentially large value (and error message), and a
    config fragment never needs them.
    """
    if len(text) > YAML_MAX_CHARS:
        raise LayoutConfigError({"memory": f"YAML text over {YAML_MAX_CHARS} characters"})
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, yaml.AliasToken | yaml.AnchorToken):
                raise LayoutConfigError({"memory": "YAML anchors and aliases are not supported"})
        return yaml.safe_load(text)
    except LayoutConfigError:
        raise
    except yaml.YAMLError as exc:
        raise LayoutConfigError({"memory": f"invalid YAML: {exc}"}) from exc
    except RecursionError as exc:
        raise LayoutConfigError({"memory": "the YAML is nested too deeply to be a config"}) from exc
    except (ValueError, OverflowError) as exc:
        # A scalar YAML resolves to a value Python cannot build (a 5,000-digit integer,
        # 2024-13-45): the text is not a usable config.
        raise LayoutConfigError({"memory": f"invalid YAML: {exc}"}) from exc


def layout_config_parse(document: Any) -> LayoutConfig:
    """A ``memory:`` config (mapping or YAML text, with or without the ``memory:`` root).

    Raises ``LayoutConfigError`` whose ``errors`` are keyed by dotted path (``memory.…``).
    """
    if isinstance(document, str):
        document = _load_yaml(document)
    elif document is not None and not isinstance(document, Mapping):
        raise LayoutConfigError(
            {"memory": f"must be a mapping or YAML text, got {type(document).__name__}"}
        )
    config = parse_memory_config(document)
    too_large = {
        f"memory.{key}": f"must be at most {MAX_TOKENS}"
        for key in _BOUNDED_TOKEN_KEYS
        if getattr(config, key) > MAX_TOKENS
    }
    if too_large:
        raise LayoutConfigError(too_large)
    return config


def layout_config_validate(document: Any) -> LayoutConfig:
    """``layout_config_parse`` with its errors as the API/form ``ValidationFailed``."""
    try:
        return layout_config_parse(document)
    except LayoutConfigError as exc:
        raise ValidationFailed(
            exc.errors, "The layout configuration is not valid; nothing was saved."
        ) from exc


def _changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """Dotted paths whose value differs; both documents are normalised, so keys line up."""
    if isinstance(before, dict) and isinstance(after, dict):
        changed: list[str] = []
        for key in sorted(set(before) | set(after)):
            sub = f"{path}.{key}" if path else key
            changed += _changed_paths(before.get(key), after.get(key), sub)
        return changed
    return [] if before == after else [path]


@transaction.atomic
def layout_config_save(
    *,
    workload: Workload,
    document: Any,
    author: str,
    comment: Any = "",
    base_version: int | None = None,
) -> WorkloadLayoutConfigVersion:
    """Validate ``document`` and store it, normalised, as the workload's next version.

    As the policy saves: a stale ``base_version`` (0: still on the defaults) raises
    ``VersionConflict``; a document identical to the latest version records nothing and
    returns it.
    """
    comment = change_comment(comment)
    normalized = layout_config_to_dict(layout_config_validate(document))
    # Lock the workload row so two concurrent saves cannot both become version n+1, and two
    # saves from the same base cannot both pass the version check.
    locked = Workload.objects.select_for_update(no_key=True).filter(pk=workload.pk).first()
    if locked is not None:
        workload_check_live(locked)
    previous = layout_config_latest(workload=workload)
    base_version_check(
        what=f"{workload.name}'s layout configuration",
        current=previous.version if previous else NO_VERSION,
        base=base_version,
    )
    if previous is not None and not _changed_paths(previous.document, normalized):
        return previous
    before = previous.document if previous else None
    version = WorkloadLayoutConfigVersion.objects.create(
        workload=workload,
        version=(previous.version + 1) if previous else 1,
        document=normalized,
        author=author,
        comment=comment,
    )
    audit_event_record(
        workspace=workload.workspace,
        type=EventType.LAYOUT_CONFIG_SET,
        author=author,
        workload_id=workload.id,
        payload={
            "version": version.version,
            "before": before,
            "after": normalized,
            "changed": _changed_paths(
                before if before is not None else layout_config_to_dict(LayoutConfig()),
                normalized,
            ),
            "comment": comment,
        },
    )
    return version


def layout_config_latest(*, workload: Workload) -> WorkloadLayoutConfigVersion | None:
    return workload.layout_config_versions.order_by("-version").first()


@dataclass(frozen=True)
class CurrentLayoutConfig:
    """The config the planner uses for a workload; ``version`` is None for the defaults."""

    config: LayoutConfig
    version: WorkloadLayoutConfigVersion | None


def layout_config_current(*, workload: Workload) -> CurrentLayoutConfig:
    """The workload's latest saved config, or the planner's defaults when none is saved."""
    latest = layout_config_latest(workload=workload)
    if latest is None:
        return CurrentLayoutConfig(config=LayoutConfig(), version=None)
    # Stored documents were validated on save; re-parsing gives the typed config back.
    return CurrentLayoutConfig(config=parse_memory_config(latest.document), version=latest)


def layout_config_versions(*, workload: Workload) -> QuerySet[WorkloadLayoutConfigVersion]:
    return workload.layout_config_versions.order_by("-version")


@dataclass(frozen=True)
class LayoutPreview:
    """A planned layout and what the compaction monitor would decide after this one turn."""

    result: LayoutResult
    compaction: CompactionDecision
    compaction_enabled: bool


def layout_preview(*, request: LayoutRequest) -> LayoutPreview:
    """Plan ``request`` and feed the result to a fresh monitor as its only recorded turn.

    Nothing is stored: the sandbox shows what the live coordinator would decide if this
    were the conversation's first recorded turn (so the rising-trend rule cannot fire yet).
    Raises ``LayoutRequestError`` for invalid input.
    """
    result = plan_layout(request, estimator=runtime.token_estimator())
    monitor = ContextBudgetMonitor(request.config.compaction)
    monitor.record_turn(result.budget_status(turn_index=0))
    return LayoutPreview(
        result=result,
        compaction=monitor.compaction_decision(),
        compaction_enabled=request.config.compaction.enabled,
    )


class _ConfigDumper(yaml.SafeDumper):
    """Block-style mappings with one-line lists, as the seed writes its fragments."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_ConfigDumper.add_representer(list, _represent_list)


def layout_config_yaml(config: LayoutConfig) -> str:
    """The config as the ``memory:`` YAML a person would write; ``layout_config_parse`` inverts it.

    Key order follows the config's fields (the seed's order), not the alphabet, so a stored
    config reads like the fragment it came from.
    """
    return yaml.dump(
        layout_config_to_dict(config), Dumper=_ConfigDumper, sort_keys=False, width=100
    )
