"""What a platform calls: workspaces and workloads, policies (``If-Match``), layout
configurations, the audit trail, maintenance runs and lifecycle settings, tokens and
members (``operations`` registers each; ``Client`` and ``AsyncClient`` send them).

A versioned document's save takes ``if_match``: the version it is based on (``3``, or the
read's ETag ``'"3"'``); a save based on a stale version raises ``VersionConflictError`` and
saves nothing. Without it the save is not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NotRequired, TypedDict

from context_recall import models as m
from context_recall.operations import PAGE, Call, Id
from context_recall.operations import call as _call
from context_recall.operations import operation as _operation
from context_recall.operations import pages as _pages

# --- workspaces and workloads -----------------------------------------------------------------


class WorkspaceCreate(TypedDict):
    slug: str
    name: str


class WorkloadCreate(TypedDict):
    name: str
    description: NotRequired[str]


class WorkloadWrite(TypedDict, total=False):
    name: str
    description: str


LIST_WORKSPACES = _operation(
    "workspaces_list", "GET", "/v1/workspaces/", response=m.Page[m.Workspace], query=PAGE
)
CREATE_WORKSPACE = _operation(
    "workspaces_create",
    "POST",
    "/v1/workspaces/",
    request=WorkspaceCreate,
    response=m.Workspace,
)
GET_WORKSPACE = _operation(
    "workspaces_retrieve", "GET", "/v1/workspaces/{slug}/", response=m.Workspace
)
UPDATE_WORKSPACE = _operation(
    "workspaces_partial_update",
    "PATCH",
    "/v1/workspaces/{slug}/",
    request=m.WorkspaceChanges,
    response=m.Workspace,
)
LIST_WORKLOADS = _operation(
    "workspaces_workloads_list",
    "GET",
    "/v1/workspaces/{slug}/workloads/",
    response=m.Page[m.Workload],
    query=("archived", *PAGE),
)
CREATE_WORKLOAD = _operation(
    "workspaces_workloads_create",
    "POST",
    "/v1/workspaces/{slug}/workloads/",
    request=WorkloadCreate,
    response=m.Workload,
)
GET_WORKLOAD = _operation(
    "workloads_retrieve", "GET", "/v1/workloads/{workload_id}/", response=m.Workload
)
UPDATE_WORKLOAD = _operation(
    "workloads_partial_update",
    "PATCH",
    "/v1/workloads/{workload_id}/",
    request=WorkloadWrite,
    response=m.Workload,
)
DELETE_WORKLOAD = _operation("workloads_destroy", "DELETE", "/v1/workloads/{workload_id}/")


def list_workspaces(
    *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.Workspace]]:
    """The workspaces the caller may see (a token: its own)."""
    return _call(LIST_WORKSPACES, params=_pages(page, page_size))


def create_workspace(*, slug: str, name: str) -> Call[m.Workspace]:
    """Create a workspace (a signed-in superuser only)."""
    return _call(CREATE_WORKSPACE, body=WorkspaceCreate(slug=slug, name=name))


def get_workspace(slug: str) -> Call[m.Workspace]:
    """A workspace: its name, environments and settings."""
    return _call(GET_WORKSPACE, {"slug": slug})


def update_workspace(slug: str, changes: m.WorkspaceChanges) -> Call[m.Workspace]:
    """Rename a workspace or change its settings (operators)."""
    return _call(UPDATE_WORKSPACE, {"slug": slug}, body=changes)


def list_workloads(
    slug: str,
    *,
    archived: bool | None = None,
    page: int | None = None,
    page_size: int | None = None,
) -> Call[m.Page[m.Workload]]:
    """The workspace's workloads (``archived=True``: the archived ones)."""
    return _call(
        LIST_WORKLOADS, {"slug": slug}, params={"archived": archived, **_pages(page, page_size)}
    )


def create_workload(slug: str, *, name: str, description: str | None = None) -> Call[m.Workload]:
    """Create a workload (editors)."""
    body: WorkloadCreate = {"name": name}
    if description is not None:
        body["description"] = description
    return _call(CREATE_WORKLOAD, {"slug": slug}, body=body)


def get_workload(workload_id: Id) -> Call[m.Workload]:
    """A workload."""
    return _call(GET_WORKLOAD, {"workload_id": workload_id})


def update_workload(workload_id: Id, changes: WorkloadWrite) -> Call[m.Workload]:
    """Rename a workload or change its description (editors)."""
    return _call(UPDATE_WORKLOAD, {"workload_id": workload_id}, body=changes)


def delete_workload(workload_id: Id) -> Call[None]:
    """Delete a workload (operators); one that was ever recalled is archived instead."""
    return _call(DELETE_WORKLOAD, {"workload_id": workload_id})


# --- policies -------------------------------------------------------------------------------


class FloorSave(TypedDict):
    policy: m.PolicyDocument
    comment: str
    relaxableAxes: NotRequired[list[str]]


class WorkloadPolicySave(TypedDict, total=False):
    policy: m.PolicyDocument
    comment: str


GET_FLOOR = _operation(
    "workspaces_policy_retrieve", "GET", "/v1/workspaces/{slug}/policy", response=m.WorkspacePolicy
)
PUT_FLOOR = _operation(
    "workspaces_policy_update",
    "PUT",
    "/v1/workspaces/{slug}/policy",
    request=FloorSave,
    response=m.WorkspacePolicy,
    headers=("If-Match",),
)
LIST_FLOOR_VERSIONS = _operation(
    "workspaces_policy_versions_list",
    "GET",
    "/v1/workspaces/{slug}/policy/versions/",
    response=m.Page[m.WorkspacePolicy],
    query=PAGE,
)
GET_FLOOR_VERSION = _operation(
    "workspaces_policy_versions_retrieve",
    "GET",
    "/v1/workspaces/{slug}/policy/versions/{version}",
    response=m.WorkspacePolicy,
)
GET_WORKLOAD_POLICY = _operation(
    "workloads_policy_retrieve",
    "GET",
    "/v1/workloads/{workload_id}/policy",
    response=m.WorkloadPolicy,
    query=("environment",),
)
PUT_WORKLOAD_POLICY = _operation(
    "workloads_policy_update",
    "PUT",
    "/v1/workloads/{workload_id}/policy",
    request=WorkloadPolicySave,
    response=m.WorkloadPolicy,
    query=("environment",),
    headers=("If-Match",),
)
LIST_WORKLOAD_POLICY_VERSIONS = _operation(
    "workloads_policy_versions_list",
    "GET",
    "/v1/workloads/{workload_id}/policy/versions/",
    response=m.Page[m.WorkloadPolicy],
    query=("environment", *PAGE),
)
GET_EFFECTIVE_POLICY = _operation(
    "workloads_effective_policy_retrieve",
    "GET",
    "/v1/workloads/{workload_id}/effective-policy",
    response=m.EffectivePolicy,
    query=("environment",),
)
GET_POLICY_AXES = _operation("policy_axes_retrieve", "GET", "/v1/policy/axes")


def get_workspace_policy(slug: str) -> Call[m.WorkspacePolicy]:
    """The workspace's floor at its current version (``version``: send it back as
    ``if_match`` when saving)."""
    return _call(GET_FLOOR, {"slug": slug})


def put_workspace_policy(
    slug: str,
    policy: m.PolicyDocument,
    *,
    comment: str,
    relaxable_axes: Sequence[str] | None = None,
    if_match: int | str | None = None,
) -> Call[m.WorkspacePolicy]:
    """Save the floor as a new version (operators): every axis (``similarityMin`` may be
    left out) and why it changes (``comment``, required: kept with the version and in the
    audit trail). ``if_match``: the version it is based on."""
    body: FloorSave = {"policy": policy, "comment": comment}
    if relaxable_axes is not None:
        body["relaxableAxes"] = list(relaxable_axes)
    return _call(PUT_FLOOR, {"slug": slug}, body=body, if_match=if_match)


def list_workspace_policy_versions(
    slug: str, *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.WorkspacePolicy]]:
    """The floor's versions, newest first."""
    return _call(LIST_FLOOR_VERSIONS, {"slug": slug}, params=_pages(page, page_size))


def get_workspace_policy_version(slug: str, version: int) -> Call[m.WorkspacePolicy]:
    """One version of the floor."""
    return _call(GET_FLOOR_VERSION, {"slug": slug, "version": version})


def get_workload_policy(
    workload_id: Id, *, environment: str | None = None
) -> Call[m.WorkloadPolicy]:
    """A workload's policy for ``environment`` (None: for all environments)."""
    return _call(
        GET_WORKLOAD_POLICY, {"workload_id": workload_id}, params={"environment": environment}
    )


def put_workload_policy(
    workload_id: Id,
    policy: m.PolicyDocument,
    *,
    environment: str | None = None,
    comment: str | None = None,
    if_match: int | str | None = None,
) -> Call[m.WorkloadPolicy]:
    """Save a workload's policy as a new version (editors): the axes it narrows, each no
    wider than the floor (else 422 ``WORKLOAD_RELAXES_OPERATOR_FLOOR``). ``if_match``: the
    version it is based on."""
    body: WorkloadPolicySave = {"policy": policy}
    if comment is not None:
        body["comment"] = comment
    return _call(
        PUT_WORKLOAD_POLICY,
        {"workload_id": workload_id},
        params={"environment": environment},
        body=body,
        if_match=if_match,
    )


def list_workload_policy_versions(
    workload_id: Id,
    *,
    environment: str | None = None,
    page: int | None = None,
    page_size: int | None = None,
) -> Call[m.Page[m.WorkloadPolicy]]:
    """A workload policy's versions, newest first."""
    params = {"environment": environment, **_pages(page, page_size)}
    return _call(LIST_WORKLOAD_POLICY_VERSIONS, {"workload_id": workload_id}, params=params)


def get_effective_policy(workload_id: Id, *, environment: str) -> Call[m.EffectivePolicy]:
    """The policy a recall of the workload in ``environment`` runs under, with its hashes and
    any conflict with the floor."""
    return _call(
        GET_EFFECTIVE_POLICY, {"workload_id": workload_id}, params={"environment": environment}
    )


def get_policy_axes() -> Call[dict[str, Any]]:
    """The policy axes: each one's type, vocabulary and what narrows it."""
    return _call(GET_POLICY_AXES)


class LayoutConfigSave(TypedDict, total=False):
    config: dict[str, Any]
    comment: str


GET_LAYOUT_CONFIG = _operation(
    "workloads_layout_config_retrieve",
    "GET",
    "/v1/workloads/{workload_id}/layout-config",
    response=m.LayoutConfigVersion,
)
PUT_LAYOUT_CONFIG = _operation(
    "workloads_layout_config_update",
    "PUT",
    "/v1/workloads/{workload_id}/layout-config",
    request=LayoutConfigSave,
    response=m.LayoutConfigVersion,
    headers=("If-Match",),
)
LIST_LAYOUT_CONFIG_VERSIONS = _operation(
    "workloads_layout_config_versions_list",
    "GET",
    "/v1/workloads/{workload_id}/layout-config/versions/",
    response=m.Page[m.LayoutConfigVersion],
    query=PAGE,
)


def get_layout_config(workload_id: Id) -> Call[m.LayoutConfigVersion]:
    """The workload's layout configuration for its sessions' turns (the defaults while none
    is saved: version null)."""
    return _call(GET_LAYOUT_CONFIG, {"workload_id": workload_id})


def put_layout_config(
    workload_id: Id,
    config: dict[str, Any],
    *,
    comment: str | None = None,
    if_match: int | str | None = None,
) -> Call[m.LayoutConfigVersion]:
    """Save the workload's layout configuration as a new version (editors)."""
    body: LayoutConfigSave = {"config": config}
    if comment is not None:
        body["comment"] = comment
    return _call(PUT_LAYOUT_CONFIG, {"workload_id": workload_id}, body=body, if_match=if_match)


def list_layout_config_versions(
    workload_id: Id, *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.LayoutConfigVersion]]:
    """The layout configuration's versions, newest first."""
    return _call(
        LIST_LAYOUT_CONFIG_VERSIONS, {"workload_id": workload_id}, params=_pages(page, page_size)
    )


# --- the audit trail --------------------------------------------------------------------------


class ReplayRequest(TypedDict, total=False):
    query: str


LIST_AUDIT_EVENTS = _operation(
    "audit_events_list",
    "GET",
    "/v1/audit/events/",
    response=m.Page[m.AuditEvent],
    query=(
        "workspace", "type", "workload", "actor", "environment", "author", "since", "until",
        "memory", *PAGE,
    ),
)  # fmt: skip
GET_AUDIT_EVENT = _operation(
    "audit_events_retrieve",
    "GET",
    "/v1/audit/events/{event_id}",
    response=m.AuditEvent,
    query=("workspace",),
)
VERIFY_AUDIT_CHAIN = _operation(
    "audit_verify_retrieve",
    "GET",
    "/v1/audit/verify",
    response=m.ChainVerdict,
    query=("workspace",),
)
REPLAY_EVENT = _operation(
    "audit_events_replay_create",
    "POST",
    "/v1/audit/events/{event_id}/replay",
    request=ReplayRequest,
    response=m.Replay,
    query=("workspace",),
)


def list_audit_events(
    *,
    type: str | Sequence[str] | None = None,
    workload: Id | None = None,
    actor: str | None = None,
    environment: str | None = None,
    author: str | None = None,
    since: str | None = None,
    until: str | None = None,
    memory: int | str | None = None,
    page: int | None = None,
    page_size: int | None = None,
    workspace: str | None = None,
) -> Call[m.Page[m.AuditEvent]]:
    """One page of the audit trail, newest first, filtered (``since``/``until``: ISO 8601;
    ``type``: one event type, or several, as a list or separated by commas; ``memory``: its
    history, the recalls that carried it and the events that changed it)."""
    params = {
        "workspace": workspace,
        "type": type if type is None or isinstance(type, str) else ",".join(type),
        "workload": workload,
        "actor": actor,
        "environment": environment,
        "author": author,
        "since": since,
        "until": until,
        "memory": memory,
        **_pages(page, page_size),
    }
    return _call(LIST_AUDIT_EVENTS, params=params)


def get_audit_event(event_id: int, *, workspace: str | None = None) -> Call[m.AuditEvent]:
    """One audit event."""
    return _call(GET_AUDIT_EVENT, {"event_id": event_id}, params={"workspace": workspace})


def verify_audit_chain(*, workspace: str | None = None) -> Call[m.ChainVerdict]:
    """Walk the workspace's hash chain: ``ok``, or the first broken event and why."""
    return _call(VERIFY_AUDIT_CHAIN, params={"workspace": workspace})


def replay_event(
    event_id: int, *, query: str | None = None, workspace: str | None = None
) -> Call[m.Replay]:
    """Run a recorded recall again under today's state (recording nothing) and compare
    (editors). ``query``: the recall's query, when the workspace does not store queries."""
    body: ReplayRequest = {} if query is None else {"query": query}
    return _call(REPLAY_EVENT, {"event_id": event_id}, params={"workspace": workspace}, body=body)


# --- maintenance ------------------------------------------------------------------------------

Mode = Literal["preview", "execute"]

START_SWEEP = _operation(
    "workspaces_maintenance_create",
    "POST",
    "/v1/workspaces/{slug}/maintenance/{sweep}",
    response=m.Run,
    query=("mode", "preview", "confirm"),
)
LIST_RUNS = _operation(
    "workspaces_maintenance_runs_list",
    "GET",
    "/v1/workspaces/{slug}/maintenance/runs/",
    response=m.Page[m.Run],
    query=("sweep", "mode", "status", *PAGE),
)
GET_RUN = _operation(
    "maintenance_runs_retrieve", "GET", "/v1/maintenance/runs/{run_id}", response=m.Run
)
LIST_RUN_ITEMS = _operation(
    "maintenance_runs_items_list",
    "GET",
    "/v1/maintenance/runs/{run_id}/items",
    response=m.Page[m.RunItem],
    query=("outcome", *PAGE),
)
CANCEL_RUN = _operation(
    "maintenance_runs_cancel_create", "POST", "/v1/maintenance/runs/{run_id}/cancel", response=m.Run
)
REVERT_RUN = _operation(
    "maintenance_runs_revert_create",
    "POST",
    "/v1/maintenance/runs/{run_id}/revert",
    response=m.Revert,
    query=("mode", "confirm"),
)
RESTORE_RUN = _operation(
    "maintenance_runs_restore_create",
    "POST",
    "/v1/maintenance/runs/{run_id}/restore",
    response=m.Restore,
)
GET_RUN_MANIFEST = _operation(
    "maintenance_runs_archive_manifest_retrieve",
    "GET",
    "/v1/maintenance/runs/{run_id}/archive/manifest",
)


def start_sweep(
    slug: str,
    sweep: m.Sweep,
    *,
    mode: Mode = "preview",
    preview: int | None = None,
    confirm: int | None = None,
) -> Call[m.Run]:
    """Preview a sweep (editors) or execute it (operators): ``preview``, the preview run to
    carry out; ``confirm``, the number of memories you expect it to change. Answers the run,
    finished (200) or queued for a worker (202: poll ``get_run``)."""
    params = {"mode": mode, "preview": preview, "confirm": confirm}
    return _call(START_SWEEP, {"slug": slug, "sweep": sweep}, params=params)


def list_runs(
    slug: str,
    *,
    sweep: str | None = None,
    mode: Mode | None = None,
    status: str | None = None,
    page: int | None = None,
    page_size: int | None = None,
) -> Call[m.Page[m.Run]]:
    """The workspace's maintenance runs, newest first."""
    params = {"sweep": sweep, "mode": mode, "status": status, **_pages(page, page_size)}
    return _call(LIST_RUNS, {"slug": slug}, params=params)


def get_run(run_id: int) -> Call[m.Run]:
    """A maintenance run: its status, progress and counts."""
    return _call(GET_RUN, {"run_id": run_id})


def list_run_items(
    run_id: int,
    *,
    outcome: str | None = None,
    page: int | None = None,
    page_size: int | None = None,
) -> Call[m.Page[m.RunItem]]:
    """What a run found or changed, memory by memory."""
    params = {"outcome": outcome, **_pages(page, page_size)}
    return _call(LIST_RUN_ITEMS, {"run_id": run_id}, params=params)


def cancel_run(run_id: int) -> Call[m.Run]:
    """Cancel a queued or running run."""
    return _call(CANCEL_RUN, {"run_id": run_id})


def revert_run(
    run_id: int, *, mode: Mode = "preview", confirm: int | None = None
) -> Call[m.Revert]:
    """Preview or execute undoing an executed run (operators)."""
    return _call(REVERT_RUN, {"run_id": run_id}, params={"mode": mode, "confirm": confirm})


def restore_run(run_id: int) -> Call[m.Restore]:
    """Restore the memories a retention run archived (operators)."""
    return _call(RESTORE_RUN, {"run_id": run_id})


def get_run_manifest(run_id: int) -> Call[dict[str, Any]]:
    """What a retention run's archive holds (its download is not covered by this client)."""
    return _call(GET_RUN_MANIFEST, {"run_id": run_id})


class LifecycleSave(TypedDict, total=False):
    settings: dict[str, Any]
    comment: str


GET_LIFECYCLE = _operation(
    "workspaces_lifecycle_retrieve",
    "GET",
    "/v1/workspaces/{slug}/lifecycle",
    response=m.LifecycleSettings,
)
PUT_LIFECYCLE = _operation(
    "workspaces_lifecycle_update",
    "PUT",
    "/v1/workspaces/{slug}/lifecycle",
    request=LifecycleSave,
    response=m.LifecycleSettings,
)
PATCH_LIFECYCLE = _operation(
    "workspaces_lifecycle_partial_update",
    "PATCH",
    "/v1/workspaces/{slug}/lifecycle",
    request=LifecycleSave,
    response=m.LifecycleSettings,
)
LIST_LIFECYCLE_VERSIONS = _operation(
    "workspaces_lifecycle_versions_list",
    "GET",
    "/v1/workspaces/{slug}/lifecycle/versions/",
    response=m.Page[m.LifecycleSettings],
    query=PAGE,
)


def get_lifecycle_settings(slug: str) -> Call[m.LifecycleSettings]:
    """The workspace's lifecycle settings (the sweeps' rules)."""
    return _call(GET_LIFECYCLE, {"slug": slug})


def put_lifecycle_settings(
    slug: str, settings: dict[str, Any], *, comment: str | None = None
) -> Call[m.LifecycleSettings]:
    """Replace the lifecycle settings (operators; keys left out take their defaults)."""
    body: LifecycleSave = {"settings": settings}
    if comment is not None:
        body["comment"] = comment
    return _call(PUT_LIFECYCLE, {"slug": slug}, body=body)


def update_lifecycle_settings(
    slug: str, changes: dict[str, Any], *, comment: str | None = None
) -> Call[m.LifecycleSettings]:
    """Change some lifecycle settings (operators)."""
    body: LifecycleSave = {"settings": changes}
    if comment is not None:
        body["comment"] = comment
    return _call(PATCH_LIFECYCLE, {"slug": slug}, body=body)


def list_lifecycle_settings_versions(
    slug: str, *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.LifecycleSettings]]:
    """The lifecycle settings' versions, newest first."""
    return _call(LIST_LIFECYCLE_VERSIONS, {"slug": slug}, params=_pages(page, page_size))


# --- tokens and members -----------------------------------------------------------------------


class TokenIssue(TypedDict):
    name: str
    role: m.TokenRole
    scopes: NotRequired[list[str]]
    boundWorkloads: NotRequired[list[str]]
    boundEnvironments: NotRequired[list[str]]
    expiresAt: NotRequired[str | None]
    apiRatePerMinute: NotRequired[int | None]
    recallRatePerMinute: NotRequired[int | None]


class TokenRotate(TypedDict, total=False):
    graceSeconds: int


class MemberAdd(TypedDict):
    username: str
    role: m.MemberRole


class MemberRole(TypedDict):
    role: m.MemberRole


LIST_TOKENS = _operation(
    "workspaces_tokens_list",
    "GET",
    "/v1/workspaces/{slug}/tokens/",
    response=m.Page[m.Token],
    query=PAGE,
)
ISSUE_TOKEN = _operation(
    "workspaces_tokens_create",
    "POST",
    "/v1/workspaces/{slug}/tokens/",
    request=TokenIssue,
    response=m.TokenSecret,
)
GET_TOKEN = _operation(
    "workspaces_tokens_retrieve", "GET", "/v1/workspaces/{slug}/tokens/{token_id}", response=m.Token
)
ROTATE_TOKEN = _operation(
    "workspaces_tokens_rotate_create",
    "POST",
    "/v1/workspaces/{slug}/tokens/{token_id}/rotate",
    request=TokenRotate,
    response=m.TokenSecret,
)
REVOKE_TOKEN = _operation(
    "workspaces_tokens_revoke_create",
    "POST",
    "/v1/workspaces/{slug}/tokens/{token_id}/revoke",
    response=m.Token,
)
LIST_MEMBERS = _operation(
    "workspaces_members_list",
    "GET",
    "/v1/workspaces/{slug}/members/",
    response=m.Page[m.Member],
    query=PAGE,
)
ADD_MEMBER = _operation(
    "workspaces_members_create",
    "POST",
    "/v1/workspaces/{slug}/members/",
    request=MemberAdd,
    response=m.Member,
)
CHANGE_MEMBER_ROLE = _operation(
    "workspaces_members_partial_update",
    "PATCH",
    "/v1/workspaces/{slug}/members/{username}",
    request=MemberRole,
    response=m.Member,
)
REMOVE_MEMBER = _operation(
    "workspaces_members_destroy", "DELETE", "/v1/workspaces/{slug}/members/{username}"
)


def list_tokens(
    slug: str, *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.Token]]:
    """The workspace's API tokens (operators); never a secret."""
    return _call(LIST_TOKENS, {"slug": slug}, params=_pages(page, page_size))


def issue_token(
    slug: str,
    *,
    name: str,
    role: m.TokenRole,
    scopes: Sequence[str] | None = None,
    bound_workloads: Sequence[Id] | None = None,
    bound_environments: Sequence[str] | None = None,
    expires_at: str | None = None,
    api_rate_per_minute: int | None = None,
    recall_rate_per_minute: int | None = None,
) -> Call[m.TokenSecret]:
    """Issue an API token (operators); its ``secret`` is in this answer only. An agent token
    may be given fewer ``scopes`` and bound to workloads and environments."""
    body: TokenIssue = {"name": name, "role": role}
    if scopes is not None:
        body["scopes"] = list(scopes)
    if bound_workloads is not None:
        body["boundWorkloads"] = [str(w) for w in bound_workloads]
    if bound_environments is not None:
        body["boundEnvironments"] = list(bound_environments)
    if expires_at is not None:
        body["expiresAt"] = expires_at
    if api_rate_per_minute is not None:
        body["apiRatePerMinute"] = api_rate_per_minute
    if recall_rate_per_minute is not None:
        body["recallRatePerMinute"] = recall_rate_per_minute
    return _call(ISSUE_TOKEN, {"slug": slug}, body=body)


def get_token(slug: str, token_id: int) -> Call[m.Token]:
    """One API token (operators)."""
    return _call(GET_TOKEN, {"slug": slug, "token_id": token_id})


def rotate_token(
    slug: str, token_id: int, *, grace_seconds: int | None = None
) -> Call[m.TokenSecret]:
    """A new secret for a token (operators); the old one keeps working for
    ``grace_seconds``."""
    body: TokenRotate = {} if grace_seconds is None else {"graceSeconds": grace_seconds}
    return _call(ROTATE_TOKEN, {"slug": slug, "token_id": token_id}, body=body)


def revoke_token(slug: str, token_id: int) -> Call[m.Token]:
    """Revoke a token (operators): refused from its next call on."""
    return _call(REVOKE_TOKEN, {"slug": slug, "token_id": token_id})


def list_members(
    slug: str, *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.Member]]:
    """The workspace's members and their roles (operators)."""
    return _call(LIST_MEMBERS, {"slug": slug}, params=_pages(page, page_size))


def add_member(slug: str, *, username: str, role: m.MemberRole) -> Call[m.Member]:
    """Give an existing user a role in the workspace (operators)."""
    return _call(ADD_MEMBER, {"slug": slug}, body=MemberAdd(username=username, role=role))


def change_member_role(slug: str, username: str, *, role: m.MemberRole) -> Call[m.Member]:
    """Change a member's role (operators; the last operator keeps theirs)."""
    return _call(CHANGE_MEMBER_ROLE, {"slug": slug, "username": username}, body={"role": role})


def remove_member(slug: str, username: str) -> Call[None]:
    """Remove a member (operators; never the last operator)."""
    return _call(REMOVE_MEMBER, {"slug": slug, "username": username})
