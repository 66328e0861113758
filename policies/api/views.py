from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from policies import algebra, services
from policies.api.schemas import (
    BUDGET_NOT_HONOURABLE,
    policy_save_schema,
)
from policies.api.serializers import (
    EffectivePolicySerializer,
    WorkloadPolicySerializer,
    WorkloadSerializer,
    WorkloadWriteSerializer,
    WorkspaceCreateSerializer,
    WorkspacePolicySerializer,
    WorkspaceSerializer,
    WorkspaceUpdateSerializer,
)
from policies.axes import AXES
from policies.models import Workload, WorkloadPolicyVersion
from policies.selectors import (
    effective_policy_for,
    environment_check,
    workload_for,
    workload_policy_current,
    workspace_policy_current,
)
from portal.access import require_reader, workspace_for, workspaces_for
from portal.api.versioning import (
    BASE_VERSION_DOC,
    ETAG_HEADER,
    IF_MATCH_PARAM,
    VERSION_CONFLICT_RESPONSE,
    base_version_of,
    with_etag,
    with_mismatch,
)
from portal.api.views import ApiView, json_object, reject_unknown
from portal.errors import ForbiddenError, NotFoundError, ValidationFailed
from portal.models import Environment, Role

ENVIRONMENT_PARAM = OpenApiParameter(
    "environment",
    str,
    description="Environment slug (dev, staging, prod, ...). "
    "Omit it for the all-environments default.",
)
POLICY_BODY_DOC = (
    "A flat policy document (axis -> value) with `comment` (the change comment: required for "
    "the workspace floor, a 400 `INVALID_REQUEST` naming `comment` otherwise; optional for a "
    "workload policy); the workspace floor also takes `relaxableAxes`. The envelope form "
    'returned by GET (`{"policy": {...}, "relaxableAxes": [...], "comment": "..."}`) is '
    "accepted too."
)


# Read-only keys of GET's envelope, ignored when a client sends the envelope back.
ENVELOPE_READ_ONLY = {"version", "author", "createdAt"}
WORKLOAD_ENVELOPE_READ_ONLY = ENVELOPE_READ_ONLY | {"workloadId", "environment"}


FLOOR_AXES_REQUIRED = (
    " Every axis is required, except "
    + ", ".join(f"`{name}`" for name, axis in AXES.items() if axis.optional)
    + ": left out, it is null (no bound)."
)


def _split_policy_body(data: dict[str, Any], *, floor: bool) -> tuple[dict[str, Any], Any]:
    """Accept the flat document or GET's envelope; return (document, comment)."""
    data = dict(data)
    comment = data.pop("comment", "")
    if "policy" in data:
        allowed = {"policy", "relaxableAxes"} if floor else {"policy"}
        read_only = ENVELOPE_READ_ONLY if floor else WORKLOAD_ENVELOPE_READ_ONLY
        reject_unknown({k: v for k, v in data.items() if k not in read_only}, allowed)
        if not isinstance(data["policy"], dict):
            raise ValidationFailed({"policy": "Send the policy as a JSON object."})
        document = dict(data["policy"])
        if floor and "relaxableAxes" in data:
            document["relaxableAxes"] = data["relaxableAxes"]
        return document, comment
    return data, comment


def _check_envelope_target(
    data: dict[str, Any], *, workload: Workload, environment: str | None
) -> None:
    """An envelope sent back from GET must name this workload and environment, not another."""
    if "policy" not in data:
        return
    fields: dict[str, str] = {}
    if "workloadId" in data and str(data["workloadId"]) != str(workload.id):
        fields["workloadId"] = "Does not match the workload in the URL."
    if "environment" in data and (data["environment"] or "") != (environment or ""):
        fields["environment"] = "Does not match ?environment= in the URL."
    if fields:
        raise ValidationFailed(fields)


class WorkspaceListView(ApiView):
    @extend_schema(responses=WorkspaceSerializer(many=True), summary="Workspaces you can see")
    def get(self, request: Request) -> Response:
        caller = self.caller(request)
        require_reader(caller)
        workspaces = workspaces_for(caller).prefetch_related(
            Prefetch("environments", queryset=Environment.objects.order_by("slug"))
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(workspaces.order_by("slug"), request, view=self)
        return paginator.get_paginated_response(WorkspaceSerializer(page, many=True).data)

    @extend_schema(
        request=WorkspaceCreateSerializer,
        responses={201: WorkspaceSerializer},
        summary="Create a workspace (superusers; anyone signed in with WORKSPACE_SELF_SERVICE)",
        description="Superusers create workspaces. With the WORKSPACE_SELF_SERVICE setting on, "
        "any signed-in user may, and becomes the new workspace's operator; otherwise a "
        "non-superuser gets 403 WORKSPACE_CREATION_RESTRICTED. API tokens never may.",
    )
    def post(self, request: Request) -> Response:
        caller = self.caller(request)
        if caller.token is not None:
            raise ForbiddenError("API tokens belong to one workspace and cannot create workspaces.")
        if not caller.is_superuser and not settings.WORKSPACE_SELF_SERVICE:
            raise ForbiddenError(
                "Only a superuser can create a workspace here; ask an administrator.",
                {"selfService": False},
                code="WORKSPACE_CREATION_RESTRICTED",
            )
        data = json_object(request)
        serializer = WorkspaceCreateSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        workspace = services.workspace_create(
            slug=serializer.validated_data["slug"],
            name=serializer.validated_data["name"],
            author=caller.label,
            operator=None if caller.is_superuser else caller.user,
        )
        return Response(WorkspaceSerializer(workspace).data, status=status.HTTP_201_CREATED)


class WorkspaceDetailView(ApiView):
    @extend_schema(responses=WorkspaceSerializer)
    def get(self, request: Request, slug: str) -> Response:
        return Response(WorkspaceSerializer(workspace_for(self.caller(request), slug)).data)

    @extend_schema(request=WorkspaceUpdateSerializer, responses=WorkspaceSerializer)
    def patch(self, request: Request, slug: str) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(caller, slug, required=Role.OPERATOR)
        data = json_object(request)
        serializer = WorkspaceUpdateSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        changes = serializer.validated_data
        if not changes:
            raise ValidationFailed(
                {"name": "Send a new name, storeQueries or recallRatePerMinute to change."}
            )
        with transaction.atomic():
            if "name" in changes:
                workspace = services.workspace_rename(
                    workspace=workspace, name=changes["name"], author=caller.label
                )
            for name in services.WORKSPACE_SETTINGS:
                if name in changes:
                    workspace = services.workspace_setting_set(
                        workspace=workspace, name=name, value=changes[name], author=caller.label
                    )
        return Response(WorkspaceSerializer(workspace).data)


class WorkspacePolicyView(ApiView):
    @extend_schema(
        parameters=[ETAG_HEADER],
        responses=WorkspacePolicySerializer,
        summary="The operator floor",
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        current = workspace_policy_current(workspace=workspace)
        return with_etag(Response(WorkspacePolicySerializer(current).data), current.version)

    @extend_schema(
        parameters=[IF_MATCH_PARAM, ETAG_HEADER],
        request={"application/json": policy_save_schema(floor=True)},
        responses={
            200: WorkspacePolicySerializer,
            409: VERSION_CONFLICT_RESPONSE,
            422: with_mismatch(f"{BUDGET_NOT_HONOURABLE}; nothing was saved."),
        },
        summary="Replace the operator floor (a new version)",
        description=POLICY_BODY_DOC + FLOOR_AXES_REQUIRED + BASE_VERSION_DOC,
    )
    def put(self, request: Request, slug: str) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(caller, slug, required=Role.OPERATOR)
        base_version, data = base_version_of(request, json_object(request))
        document, comment = _split_policy_body(data, floor=True)
        version = services.workspace_policy_save(
            workspace=workspace,
            document=document,
            author=caller.label,
            comment=comment,
            base_version=base_version,
        )
        return with_etag(Response(WorkspacePolicySerializer(version).data), version.version)


class WorkspacePolicyVersionListView(ApiView):
    @extend_schema(responses=WorkspacePolicySerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        versions = workspace.policy_versions.order_by("-version")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(versions, request, view=self)
        return paginator.get_paginated_response(WorkspacePolicySerializer(page, many=True).data)


class WorkspacePolicyVersionDetailView(ApiView):
    @extend_schema(responses=WorkspacePolicySerializer)
    def get(self, request: Request, slug: str, version: int) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        row = workspace.policy_versions.filter(version=version).first()
        if row is None:
            raise NotFoundError(f"Workspace {slug!r} has no policy version {version}.")
        return Response(WorkspacePolicySerializer(row).data)


class WorkloadListView(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("archived", str, description='"true" lists archived workloads too.')
        ],
        responses=WorkloadSerializer(many=True),
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        workloads = workspace.workloads.select_related("workspace").order_by("name")
        if request.query_params.get("archived") != "true":
            workloads = workloads.filter(archived_at__isnull=True)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(workloads, request, view=self)
        return paginator.get_paginated_response(WorkloadSerializer(page, many=True).data)

    @extend_schema(request=WorkloadWriteSerializer, responses={201: WorkloadSerializer})
    def post(self, request: Request, slug: str) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(caller, slug, required=Role.EDITOR)
        data = json_object(request)
        serializer = WorkloadWriteSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        workload = services.workload_create(
            workspace=workspace, author=caller.label, **serializer.validated_data
        )
        return Response(WorkloadSerializer(workload).data, status=status.HTTP_201_CREATED)


class WorkloadDetailView(ApiView):
    @extend_schema(responses=WorkloadSerializer)
    def get(self, request: Request, workload_id: str) -> Response:
        return Response(WorkloadSerializer(workload_for(self.caller(request), workload_id)).data)

    @extend_schema(request=WorkloadWriteSerializer(partial=True), responses=WorkloadSerializer)
    def patch(self, request: Request, workload_id: str) -> Response:
        caller = self.caller(request)
        workload = workload_for(caller, workload_id, required=Role.EDITOR)
        services.workload_check_live(workload)
        data = json_object(request)
        serializer = WorkloadWriteSerializer(data=data, partial=True)
        serializer.is_valid(raise_exception=True)
        workload = services.workload_update(
            workload=workload, author=caller.label, **serializer.validated_data
        )
        return Response(WorkloadSerializer(workload).data)

    @extend_schema(
        responses={204: None},
        summary="Archive the workload (it is not deleted: its policy versions stay readable, "
        "recall for it is refused with 409 WORKLOAD_ARCHIVED)",
    )
    def delete(self, request: Request, workload_id: str) -> Response:
        caller = self.caller(request)
        workload = workload_for(caller, workload_id, required=Role.OPERATOR)
        # Archived, not deleted: its policy versions stay readable for the trail and replays.
        services.workload_archive(workload=workload, author=caller.label)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkloadPolicyView(ApiView):
    @extend_schema(parameters=[ENVIRONMENT_PARAM, ETAG_HEADER], responses=WorkloadPolicySerializer)
    def get(self, request: Request, workload_id: str) -> Response:
        workload = workload_for(self.caller(request), workload_id)
        environment = environment_check(
            workspace=workload.workspace, environment=request.query_params.get("environment")
        )
        version = workload_policy_current(workload=workload, environment=environment)
        if version is None:
            where = f"environment {environment!r}" if environment else "all environments"
            raise NotFoundError(
                f"Workload {workload.name!r} has no policy for {where}; the floor applies."
            )
        return with_etag(Response(WorkloadPolicySerializer(version).data), version.version)

    @extend_schema(
        parameters=[ENVIRONMENT_PARAM, IF_MATCH_PARAM, ETAG_HEADER],
        request={"application/json": policy_save_schema(floor=False)},
        responses={
            200: WorkloadPolicySerializer,
            409: VERSION_CONFLICT_RESPONSE,
            422: with_mismatch(
                "WORKLOAD_RELAXES_OPERATOR_FLOOR: `details` lists the axes wider "
                f"than the floor; or {BUDGET_NOT_HONOURABLE}. Nothing was saved.",
            ),
        },
        summary="Save the workload's policy for an environment (a new version)",
        description=POLICY_BODY_DOC
        + " Any subset of axes; each must be narrower than or equal to the floor, else 422 "
        "WORKLOAD_RELAXES_OPERATOR_FLOOR lists the axes."
        + BASE_VERSION_DOC
        + ' Where no policy is saved yet (GET is 404), base it on version 0 (`If-Match: "0"`).',
    )
    def put(self, request: Request, workload_id: str) -> Response:
        caller = self.caller(request)
        workload = workload_for(caller, workload_id, required=Role.EDITOR)
        base_version, data = base_version_of(request, json_object(request))
        environment = request.query_params.get("environment")
        _check_envelope_target(data, workload=workload, environment=environment)
        document, comment = _split_policy_body(data, floor=False)
        version = services.workload_policy_save(
            workload=workload,
            environment=environment,
            document=document,
            author=caller.label,
            comment=comment,
            base_version=base_version,
        )
        return with_etag(Response(WorkloadPolicySerializer(version).data), version.version)


class WorkloadPolicyVersionListView(ApiView):
    @extend_schema(parameters=[ENVIRONMENT_PARAM], responses=WorkloadPolicySerializer(many=True))
    def get(self, request: Request, workload_id: str) -> Response:
        workload = workload_for(self.caller(request), workload_id)
        environment = environment_check(
            workspace=workload.workspace, environment=request.query_params.get("environment")
        )
        versions = WorkloadPolicyVersion.objects.filter(
            workload=workload, environment=environment
        ).order_by("-version")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(versions, request, view=self)
        return paginator.get_paginated_response(WorkloadPolicySerializer(page, many=True).data)


class EffectivePolicyView(ApiView):
    @extend_schema(
        parameters=[ENVIRONMENT_PARAM],
        responses=EffectivePolicySerializer,
        summary="The policy recall applies for a workload in an environment",
        description="The floor narrowed by the most specific workload policy. An axis that "
        "relaxes the floor is clamped to it (`relaxingAxes`); where the workload policy and a "
        "later floor disagree otherwise (a forbidden kind pinned, reservations past a ceiling "
        "or the total), the floor wins and each disagreement is listed in `conflicts`. "
        "`compliant` is true only when the workload policy applies as written.",
    )
    def get(self, request: Request, workload_id: str) -> Response:
        workload = workload_for(self.caller(request), workload_id)
        # effective_policy_for checks the environment in its one query.
        environment = request.query_params.get("environment") or ""
        effective = effective_policy_for(
            workload=workload, environment=environment, allow_archived=True
        )
        return Response(
            {
                "workloadId": str(workload.id),
                "environment": environment or None,
                "policy": effective.policy,
                "relaxableAxes": effective.relaxable_axes,
                "effectivePolicyHash": effective.policy_hash,
                "effectiveBudgetHash": effective.budget_hash,
                "compliant": effective.compliant,
                "relaxingAxes": effective.relaxing_axes,
                "conflicts": [conflict.as_json() for conflict in effective.conflicts],
                "floorVersion": effective.floor_version,
                "workloadPolicyVersion": effective.workload_version,
            }
        )


class PolicyAxesView(ApiView):
    """The axis registry, so clients can build forms without hard-coding it."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        require_reader(self.caller(request))
        return Response(
            {
                "axes": [
                    {
                        "name": axis.name,
                        "group": axis.group,
                        "kind": axis.kind,
                        "vocabulary": list(algebra.VOCABULARIES[axis.vocabulary])
                        if axis.vocabulary
                        else None,
                        "description": axis.description,
                    }
                    for axis in AXES.values()
                ]
            }
        )
