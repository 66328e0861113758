"""The chat layout planner over HTTP (SPEC section 6) and workloads' stored layout configs."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from policies.api.schemas import COMMENT_SCHEMA
from policies.models import Workload
from policies.selectors import workload_for
from portal.access import workspace_for
from portal.api.versioning import (
    BASE_VERSION_DOC,
    BASE_VERSION_SCHEMA,
    ETAG_HEADER,
    IF_MATCH_PARAM,
    VERSION_CONFLICT_RESPONSE,
    base_version_of,
    with_etag,
    with_mismatch,
)
from portal.api.views import WORKSPACE_PARAM, ApiView, json_object, reject_unknown
from portal.errors import NotFoundError, ValidationFailed
from portal.models import Role, Workspace
from recall.api.layout_schemas import layout_config_save_schema
from recall.api.layout_serializers import (
    LayoutConfigVersionSerializer,
    LayoutRequestSerializer,
    LayoutResultSerializer,
)
from recall.layout import services as layout_services
from recall.layout.config import LayoutConfig, layout_config_to_dict
from recall.models import WorkloadLayoutConfigVersion

LAYOUT_DESCRIPTION = """\
Budget a chat prompt and prune it with seed 000's nine-stage cascade. Nothing is stored.

`fixedCosts = systemPromptTokens + toolSchemaTokens + outputBuffer`,
`dynamicBudget = max(0, contextWindow - fixedCosts)`,
`supportingContextBudget = floor(dynamicBudget * budgetRatio)`.
Supporting sections are filled in `section_priority` order within that budget and `max_items`;
if the estimate still exceeds the dynamic budget, the stages run in order and stop at the first
that fits (`stages`). `emergencyOverage` is true when even stage 9's minimum does not fit.
`compaction` is the compaction monitor's decision with this layout recorded as its only turn.

The configuration is `config` (the `memory:` fragment, object or YAML text) if given, else the
stored config of `workloadId`, else the defaults; `contextWindow`, `outputBuffer` and
`budgetRatio` given here override it. Token figures are estimates, not provider tokenization.
"""
CONFIG_BODY_DOC = (
    "The `memory:` configuration as a JSON object (with or without the `memory` key, optionally "
    'with a `comment`), or `{"config": <object or YAML text>, "comment": "..."}`. GET\'s '
    "response is accepted too (its read-only fields are ignored). Unknown or misspelled keys "
    "are rejected by dotted path and nothing is saved."
)
# GET's read-only fields, tolerated in a PUT so that GET -> edit -> PUT works.
READ_ONLY_KEYS = {"workloadId", "version", "isDefault", "author", "createdAt"}


# --- POST /v1/context/layout ------------------------------------------------------------------


def _layout_config(
    workspace: Workspace, data: dict[str, Any]
) -> tuple[LayoutConfig, dict[str, Any]]:
    """The config to plan with and where it came from: request, else workload, else default."""
    workload = None
    if "workloadId" in data:
        workload = workspace.workloads.filter(pk=data["workloadId"]).first()
        if workload is None:
            raise NotFoundError(f"No workload {data['workloadId']}.")
    if "config" in data:
        source = {"source": "request", "workloadId": None, "version": None}
        return data["config"], source
    if workload is None:
        return LayoutConfig(), {"source": "default", "workloadId": None, "version": None}
    current = layout_services.layout_config_current(workload=workload)
    version = current.version.version if current.version else None
    kind = "workload" if current.version else "default"
    return current.config, {"source": kind, "workloadId": workload.id, "version": version}


class ContextLayoutView(ApiView):
    @extend_schema(
        parameters=[WORKSPACE_PARAM],
        request=LayoutRequestSerializer,
        responses=LayoutResultSerializer,
        summary="Plan a chat prompt's layout within its context budget",
        description=LAYOUT_DESCRIPTION,
    )
    def post(self, request: Request) -> Response:
        workspace = workspace_for(self.caller(request), request.query_params.get("workspace"))
        serializer = LayoutRequestSerializer(data=json_object(request))
        serializer.is_valid(raise_exception=True)
        config, source = _layout_config(workspace, serializer.validated_data)
        preview = layout_services.layout_preview(request=serializer.layout_request(config))
        body = LayoutResultSerializer(preview, context={"config_source": source}).data
        return Response(body)


# --- /v1/workloads/{id}/layout-config ---------------------------------------------------------


def _version_body(workload: Workload, row: WorkloadLayoutConfigVersion | None) -> dict[str, Any]:
    if row is None:
        return {
            "workloadId": workload.id,
            "version": None,
            "isDefault": True,
            "config": layout_config_to_dict(LayoutConfig()),
            "author": None,
            "comment": "",
            "createdAt": None,
        }
    return {
        "workloadId": row.workload_id,
        "version": row.version,
        "isDefault": False,
        "config": row.document,
        "author": row.author,
        "comment": row.comment,
        "createdAt": row.created_at,
    }


def _split_config_body(data: dict[str, Any]) -> tuple[Any, Any, bool]:
    """(document, comment, wrapped) from the bare or the ``{"config": ...}`` form."""
    data = dict(data)
    comment = data.pop("comment", "")
    if "config" not in data:
        return data, comment, False
    reject_unknown({k: v for k, v in data.items() if k not in READ_ONLY_KEYS}, {"config"})
    if not isinstance(data["config"], dict | str):
        raise ValidationFailed({"config": "Send the configuration as an object or YAML text."})
    return data["config"], comment, True


class WorkloadLayoutConfigView(ApiView):
    @extend_schema(
        parameters=[ETAG_HEADER],
        responses=LayoutConfigVersionSerializer,
        summary="The workload's current layout configuration (the defaults if none is saved)",
        description='The ETag is the version, `"0"` while the defaults apply.',
    )
    def get(self, request: Request, workload_id: str) -> Response:
        workload = workload_for(self.caller(request), workload_id)
        current = layout_services.layout_config_current(workload=workload)
        body = LayoutConfigVersionSerializer(_version_body(workload, current.version)).data
        return with_etag(Response(body), current.version.version if current.version else None)

    @extend_schema(
        parameters=[IF_MATCH_PARAM, ETAG_HEADER],
        request={
            "application/json": layout_config_save_schema(
                comment=COMMENT_SCHEMA,
                base_version=BASE_VERSION_SCHEMA,
                read_only=sorted(READ_ONLY_KEYS),
            )
        },
        responses={
            200: LayoutConfigVersionSerializer,
            409: VERSION_CONFLICT_RESPONSE,
            422: with_mismatch(),
        },
        summary="Save the workload's layout configuration (a new version)",
        description=CONFIG_BODY_DOC + BASE_VERSION_DOC,
    )
    def put(self, request: Request, workload_id: str) -> Response:
        caller = self.caller(request)
        workload = workload_for(caller, workload_id, required=Role.EDITOR)
        base_version, data = base_version_of(request, json_object(request))
        document, comment, wrapped = _split_config_body(data)
        try:
            version = layout_services.layout_config_save(
                workload=workload,
                document=document,
                author=caller.label,
                comment=comment,
                base_version=base_version,
            )
        except ValidationFailed as exc:
            if not wrapped:
                raise
            # Name the field where the caller put it: config.memory.supporting_context...
            fields = {
                key if key == "comment" else f"config.{key}": message
                for key, message in exc.details.get("fields", {}).items()
            }
            raise ValidationFailed(fields, exc.message) from exc
        body = LayoutConfigVersionSerializer(_version_body(workload, version)).data
        return with_etag(Response(body), version.version)


class WorkloadLayoutConfigVersionListView(ApiView):
    @extend_schema(responses=LayoutConfigVersionSerializer(many=True))
    def get(self, request: Request, workload_id: str) -> Response:
        workload = workload_for(self.caller(request), workload_id)
        versions = layout_services.layout_config_versions(workload=workload)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(versions, request, view=self)
        return paginator.get_paginated_response(
            LayoutConfigVersionSerializer(
                [_version_body(workload, row) for row in page or []], many=True
            ).data
        )
