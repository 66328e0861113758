"""A workload's stored ``memory:`` layout configuration (validate, version, audit, read) and
the sandbox's preview of a planned layout.

The rules live in the pure modules of ``recall.layout``; this module persists what they
accept and runs the planner with the project's token estimator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Field, QuerySet

from audit.models import EventType
from audit.services import audit_event_record
from policies.models import Workload
from policies.services import change_comment, workload_check_live
from portal.errors import ValidationFailed
from portal.versioning import versioned_save
from recall import runtime
from recall.layout.config import (
    SESSION_NO_EFFECT,
    LayoutConfig,
    LayoutConfigError,
    layout_config_to_dict,
    no_effect_errors,
    parse_memory_config,
)
from recall.layout.monitor import CompactionDecision, ContextBudgetMonitor
from recall.layout.planner import LayoutResult, plan_checked_layout
from recall.layout.request import LayoutRequest
from recall.models import WorkloadLayoutConfigVersion


def layout_config_validate(document: Any) -> LayoutConfig:
    """``parse_memory_config`` with its errors as the API/form ``ValidationFailed``; a key no
    session reads (``SESSION_NO_EFFECT``) must be left at its default, since a workload's
    configuration is what its sessions run under; and the compaction service it names must
    be one of ``COMPACTION_SERVICES`` (the settings')."""
    try:
        config = parse_memory_config(document)
    except LayoutConfigError as exc:
        raise ValidationFailed(
            exc.errors, "The layout configuration is not valid; nothing was saved."
        ) from exc
    unused = no_effect_errors(config, SESSION_NO_EFFECT)
    if unused:
        raise ValidationFailed(unused, "The layout configuration is not valid; nothing was saved.")
    service = config.compaction.llm_service
    if service not in settings.COMPACTION_SERVICES:
        names = ", ".join(sorted(settings.COMPACTION_SERVICES))
        raise ValidationFailed(
            {
                "memory.compaction.llm_service": f"unknown compaction service {service!r}; "
                f"the services are: {names} (COMPACTION_SERVICES)"
            },
            "The layout configuration is not valid; nothing was saved.",
        )
    return config


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

    As the policy saves (``portal.versioning.versioned_save``): a stale ``base_version``
    (0: still on the defaults) raises ``VersionConflict``; a document identical to the latest
    version records nothing and returns it.
    """
    comment = change_comment(comment)
    normalized = layout_config_to_dict(layout_config_validate(document))

    def locked_document() -> dict[str, Any]:
        # The workload row serialises its layout saves (FOR NO KEY UPDATE, as the policy
        # saves: a recall's audit append must still insert through it).
        locked = Workload.objects.select_for_update(no_key=True).filter(pk=workload.pk).first()
        if locked is not None:
            workload_check_live(locked)
        return normalized

    def insert(after: dict[str, Any], number: int) -> WorkloadLayoutConfigVersion:
        return WorkloadLayoutConfigVersion.objects.create(
            workload=workload, version=number, document=after, author=author, comment=comment
        )

    def record(
        after: dict[str, Any],
        previous: WorkloadLayoutConfigVersion | None,
        version: WorkloadLayoutConfigVersion,
    ) -> None:
        before = previous.document if previous else None
        audit_event_record(
            workspace=workload.workspace,
            type=EventType.LAYOUT_CONFIG_SET,
            author=author,
            workload_id=workload.id,
            payload={
                "version": version.version,
                "before": before,
                "after": after,
                "changed": _changed_paths(
                    before if before is not None else layout_config_to_dict(LayoutConfig()),
                    after,
                ),
                "comment": comment,
            },
        )

    return versioned_save(
        what=f"{workload.name}'s layout configuration",
        base_version=base_version,
        locked_document=locked_document,
        latest=lambda: layout_config_latest(workload=workload),
        unchanged=lambda previous, after: not _changed_paths(previous.document, after),
        insert=insert,
        record=record,
    )


def layout_config_latest(*, workload: Workload) -> WorkloadLayoutConfigVersion | None:
    return workload.layout_config_versions.order_by("-version").first()


def layout_config_latest_sql(workload_column: str) -> str:
    """An SQL expression: the latest saved config of the workload ``workload_column`` names, as
    one jsonb value (null when none is saved), for a statement that reads it beside a row of
    its own (a session's turn reads it with the session it locks).
    ``layout_config_current_of`` reads the value."""
    columns = ", ".join(f"'{field.attname}', v.{field.column}" for field in _version_fields())
    return (
        f"(SELECT jsonb_build_object({columns})"
        f" FROM {WorkloadLayoutConfigVersion._meta.db_table} v"
        f" WHERE v.workload_id = {workload_column} ORDER BY v.version DESC LIMIT 1)"
    )


def _version_fields() -> list[Field[Any, Any]]:
    return list(WorkloadLayoutConfigVersion._meta.concrete_fields)


def layout_config_current_of(value: dict[str, Any] | None) -> CurrentLayoutConfig:
    """``layout_config_current`` of a ``layout_config_latest_sql`` value, as decoded."""
    if value is None:
        return CurrentLayoutConfig(config=LayoutConfig(), version=None)
    latest = WorkloadLayoutConfigVersion(
        **{field.attname: field.to_python(value[field.attname]) for field in _version_fields()}
    )
    latest._state.adding, latest._state.db = False, DEFAULT_DB_ALIAS
    return _current(latest)


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
    return _current(latest)


def _current(latest: WorkloadLayoutConfigVersion) -> CurrentLayoutConfig:
    # Stored documents were validated on save; re-parsing gives the typed config back (one
    # saved before a key was found to have no effect is read as it was saved).
    config = parse_memory_config(latest.document, accept_no_effect=True)
    return CurrentLayoutConfig(config=config, version=latest)


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

    ``request`` was checked by ``LayoutRequestSerializer`` (the API and the sandbox page), so
    it is planned as it is. Nothing is stored: the sandbox shows what the live coordinator
    would decide if this were the conversation's first recorded turn (so the rising-trend rule
    cannot fire yet).
    """
    result = plan_checked_layout(request, estimator=runtime.token_estimator())
    monitor = ContextBudgetMonitor(request.config.compaction)
    monitor.record_turn(result.budget_status(turn_index=0))
    return LayoutPreview(
        result=result,
        compaction=monitor.compaction_decision(),
        compaction_enabled=request.config.compaction.enabled,
    )
