from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from policies import algebra
from policies.models import Workload, WorkloadPolicyVersion, WorkspacePolicyVersion
from policies.selectors import environment_check, workload_policy_current, workspace_policy_current
from portal.db.scope import scope_include
from portal.errors import ConflictError, ValidationFailed
from portal.models import DEFAULT_ENVIRONMENTS, Environment, Membership, Role, Workspace
from portal.versioning import versioned_save

COMMENT_MAX = 500


def change_comment(comment: Any) -> str:
    """A save's change comment, validated (shared by every versioned document)."""
    if comment is None:
        return ""
    if not isinstance(comment, str):
        raise ValidationFailed({"comment": "The change comment must be a string."})
    if len(comment) > COMMENT_MAX:
        raise ValidationFailed({"comment": f"Keep the comment under {COMMENT_MAX} characters."})
    return comment.strip()


FLOOR_COMMENT_REQUIRED = (
    "Say why the operator floor changes: a change comment (comment) is required, kept with the "
    "version and in the audit trail."
)


def floor_change_comment(comment: Any) -> str:
    """The floor's change comment, validated and required: every agent's recall follows the
    floor, so each of its versions says why it was made."""
    text = change_comment(comment)
    if not text:
        raise ValidationFailed({"comment": FLOOR_COMMENT_REQUIRED}, FLOOR_COMMENT_REQUIRED)
    return text


@transaction.atomic
def workspace_create(
    *, slug: str, name: str, author: str, operator: Any | None = None
) -> Workspace:
    """A new workspace with the default environments and the default floor as version 1."""
    try:
        # A savepoint: a concurrent create of the same slug fails here, not as a 500.
        with transaction.atomic():
            workspace = Workspace.objects.create(slug=slug, name=name)
    except IntegrityError:
        raise ConflictError(
            f"A workspace {slug!r} already exists.", {"fields": {"slug": "Taken."}}
        ) from None
    # Its rows are written under row-level security: the caller's scope must include it.
    scope_include(workspace.pk)
    Environment.objects.bulk_create(
        [Environment(workspace=workspace, slug=env) for env in DEFAULT_ENVIRONMENTS]
    )
    if operator is not None:
        Membership.objects.create(user=operator, workspace=workspace, role=Role.OPERATOR)
    workspace_policy_save(
        workspace=workspace,
        document={**algebra.default_floor(), "relaxableAxes": []},
        author=author,
        comment="Initial operator floor",
    )
    return workspace


@transaction.atomic
def workspace_policy_save(
    *,
    workspace: Workspace,
    document: Any,
    author: str,
    comment: Any,
    base_version: int | None = None,
) -> WorkspacePolicyVersion:
    """Save the floor as the next version; return the current one if nothing changed. The
    change comment is required (``floor_change_comment``).

    ``base_version`` is the version the change was based on: a stale one raises
    ``VersionConflict`` (portal.versioning). A document identical to the current version
    records nothing (no version, no event), whatever its comment.
    """
    floor, relaxable = algebra.normalize_floor(document)
    comment = floor_change_comment(comment)

    def locked_document() -> dict[str, Any]:
        # FOR NO KEY UPDATE: it excludes other saves but not the KEY SHARE a recall's audit
        # append takes on this row (tests/policies/test_lock_order.py: no deadlock).
        Workspace.objects.select_for_update(no_key=True).filter(pk=workspace.pk).first()
        # relaxableAxes is versioned with the floor, so it is compared and diffed with it.
        return algebra.floor_document(floor, relaxable)

    def floor_of(version: WorkspacePolicyVersion) -> dict[str, Any]:
        return algebra.floor_document(version.document, version.relaxable_axes)

    def insert(_after: dict[str, Any], number: int) -> WorkspacePolicyVersion:
        return WorkspacePolicyVersion.objects.create(
            workspace=workspace,
            version=number,
            document=floor,
            relaxable_axes=relaxable,
            author=author,
            comment=comment,
        )

    def record(
        after: dict[str, Any],
        previous: WorkspacePolicyVersion | None,
        version: WorkspacePolicyVersion,
    ) -> None:
        before = (
            {"policy": previous.document, "relaxableAxes": previous.relaxable_axes}
            if previous
            else None
        )
        audit_event_record(
            workspace=workspace,
            type=EventType.WORKSPACE_POLICY_SET,
            author=author,
            payload={
                "version": version.version,
                "before": before,
                "after": {"policy": floor, "relaxableAxes": relaxable},
                "diff": algebra.diff_documents(floor_of(previous) if previous else None, after),
                "comment": comment,
            },
        )

    return versioned_save(
        what="The operator floor",
        base_version=base_version,
        locked_document=locked_document,
        latest=lambda: workspace.policy_versions.order_by("-version").first(),
        unchanged=lambda previous, after: not algebra.diff_documents(floor_of(previous), after),
        insert=insert,
        record=record,
    )


@transaction.atomic
def workload_create(
    *, workspace: Workspace, name: Any, author: str, description: str = ""
) -> Workload:
    name = _workload_name(name)
    try:
        with transaction.atomic():
            workload = Workload.objects.create(
                workspace=workspace, name=name, description=description
            )
    except IntegrityError:
        raise ConflictError(
            f"A workload named {name!r} already exists in this workspace.",
            {"fields": {"name": "Taken."}},
        ) from None
    audit_event_record(
        workspace=workspace,
        type=EventType.WORKLOAD_CREATED,
        author=author,
        workload_id=workload.id,
        payload={"name": name},
    )
    return workload


@transaction.atomic
def workspace_rename(*, workspace: Workspace, name: str, author: str) -> Workspace:
    before = workspace.name
    if name == before:
        return workspace
    workspace.name = name
    workspace.save(update_fields=["name"])
    audit_event_record(
        workspace=workspace,
        type=EventType.WORKSPACE_RENAMED,
        author=author,
        payload={"before": before, "after": name},
    )
    return workspace


# Workspace settings an operator switches, by their API name: the model field each sets.
WORKSPACE_SETTINGS = {
    # Whether assembled events keep the query text (replays then need no pasted query). Off
    # by default: a query may be personal data; switching it off keeps those already stored.
    "storeQueries": "store_queries",
    # Recalls a minute per API token of this workspace; None: the server's default.
    "recallRatePerMinute": "recall_rate_per_minute",
}


@transaction.atomic
def workspace_setting_set(*, workspace: Workspace, name: str, value: Any, author: str) -> Workspace:
    """Change one workspace setting (``WORKSPACE_SETTINGS``), audited with its before and
    after; setting it to what it is changes and records nothing."""
    field = WORKSPACE_SETTINGS[name]
    locked = Workspace.objects.select_for_update(no_key=True).get(pk=workspace.pk)
    before = getattr(locked, field)
    if before == value:
        return locked
    setattr(locked, field, value)
    locked.save(update_fields=[field])
    audit_event_record(
        workspace=locked,
        type=EventType.WORKSPACE_SETTINGS_SET,
        author=author,
        payload={name: {"before": before, "after": value}},
    )
    return locked


def workspace_store_queries_set(*, workspace: Workspace, enabled: bool, author: str) -> Workspace:
    """``workspace_setting_set`` for ``storeQueries`` (the audit page's switch)."""
    return workspace_setting_set(
        workspace=workspace, name="storeQueries", value=enabled, author=author
    )


@transaction.atomic
def workload_update(
    *, workload: Workload, author: str, name: Any = None, description: Any = None
) -> Workload:
    before = {"name": workload.name, "description": workload.description}
    if name is not None:
        workload.name = _workload_name(name)
    if description is not None:
        if not isinstance(description, str):
            raise ValidationFailed({"description": "Must be a string."})
        workload.description = description
    after = {"name": workload.name, "description": workload.description}
    changes = {
        key: {"before": before[key], "after": after[key]}
        for key in before
        if before[key] != after[key]
    }
    if not changes:
        return workload
    try:
        with transaction.atomic():
            workload.save(update_fields=list(changes))
    except IntegrityError:
        raise ConflictError(
            f"A workload named {workload.name!r} already exists in this workspace.",
            {"fields": {"name": "Taken."}},
        ) from None
    audit_event_record(
        workspace=workload.workspace,
        type=EventType.WORKLOAD_UPDATED,
        author=author,
        workload_id=workload.id,
        payload={"changes": changes},
    )
    return workload


@transaction.atomic
def workload_archive(*, workload: Workload, author: str) -> Workload:
    """Archive a workload: it leaves the lists and recall refuses it (409), but it and its
    policy versions stay, so the audit trail and replays can still read them. Archiving an
    archived workload changes nothing."""
    locked = Workload.objects.select_for_update(no_key=True).get(pk=workload.pk)
    if locked.archived_at is not None:
        return locked
    locked.archived_at = timezone.now()
    locked.save(update_fields=["archived_at"])
    audit_event_record(
        workspace=workload.workspace,
        type=EventType.WORKLOAD_ARCHIVED,
        author=author,
        workload_id=workload.id,
        payload={"name": workload.name},
    )
    return locked


def workload_check_live(workload: Workload) -> None:
    """Refuse changes to an archived workload."""
    if workload.archived_at is not None:
        raise ConflictError(
            f"Workload {workload.name!r} was archived on {workload.archived_at:%Y-%m-%d %H:%M} "
            "UTC: its policies can be read but not changed, and recall for it is refused.",
            {"workloadId": str(workload.pk), "archivedAt": workload.archived_at.isoformat()},
            code="WORKLOAD_ARCHIVED",
        )


def _workload_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationFailed({"name": "A workload needs a non-empty name."})
    if len(name) > 200:
        raise ValidationFailed({"name": "Keep the name under 200 characters."})
    return name.strip()


@transaction.atomic
def workload_policy_save(
    *,
    workload: Workload,
    environment: str | None,
    document: Any,
    author: str,
    comment: Any = "",
    base_version: int | None = None,
) -> WorkloadPolicyVersion:
    """Save the workload's policy for ``environment`` as the next version.

    As ``workspace_policy_save``: a stale ``base_version`` (0: none saved yet) raises
    ``VersionConflict``; a document identical to the current version records nothing and
    returns it.
    """
    environment = environment_check(workspace=workload.workspace, environment=environment)
    comment = change_comment(comment)

    def locked_document() -> tuple[dict[str, Any], WorkspacePolicyVersion]:
        # Lock the floor while validating against it, so a concurrent floor change cannot slip
        # in; the lock also serialises this workload's saves. FOR NO KEY UPDATE on both rows:
        # a recall's audit append must still insert through them (test_lock_order.py).
        Workspace.objects.select_for_update(no_key=True).filter(pk=workload.workspace_id).first()
        workload_check_live(Workload.objects.select_for_update(no_key=True).get(pk=workload.pk))
        floor_version = workspace_policy_current(workspace=workload.workspace)
        return algebra.validate_workload(floor_version.document, document), floor_version

    def insert(
        checked: tuple[dict[str, Any], WorkspacePolicyVersion], number: int
    ) -> WorkloadPolicyVersion:
        normalized, _floor_version = checked
        return WorkloadPolicyVersion.objects.create(
            workload=workload,
            environment=environment,
            version=number,
            document=normalized,
            author=author,
            comment=comment,
        )

    def record(
        checked: tuple[dict[str, Any], WorkspacePolicyVersion],
        previous: WorkloadPolicyVersion | None,
        version: WorkloadPolicyVersion,
    ) -> None:
        normalized, floor_version = checked
        audit_event_record(
            workspace=workload.workspace,
            type=EventType.WORKLOAD_POLICY_SET,
            author=author,
            workload_id=workload.id,
            environment=environment,
            payload={
                "version": version.version,
                "before": previous.document if previous else None,
                "after": normalized,
                "diff": algebra.diff_documents(previous.document if previous else None, normalized),
                "comment": comment,
                "floorVersion": floor_version.version,
            },
        )

    return versioned_save(
        what=f"{workload.name}'s policy for {environment or 'all environments'}",
        base_version=base_version,
        locked_document=locked_document,
        latest=lambda: workload_policy_current(workload=workload, environment=environment),
        unchanged=lambda previous, checked: (
            not algebra.diff_documents(previous.document, checked[0])
        ),
        insert=insert,
        record=record,
    )
