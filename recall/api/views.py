from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from audit.selectors import memory_injections, with_events
from policies.api.schemas import BUDGET_NOT_HONOURABLE_RESPONSE
from policies.models import Workload
from portal.access import Caller, binding_check, scoped_get, workspace_for
from portal.api.errors import ErrorSerializer
from portal.api.renderers import FastJSONRenderer
from portal.api.views import (
    WORKSPACE_PARAM,
    ApiView,
    RememberedTokenView,
    filter_parameters,
    json_object,
    json_object_or_empty,
)
from portal.errors import ForbiddenError, NotFoundError, ValidationFailed
from portal.ids import numeric_id
from portal.models import Role, Workspace
from portal.permissions import Permission
from portal.tokens import TokenCheck
from recall import assembly, erasure, replay, services
from recall.api.serializers import (
    MEMORY_BATCH_MAX,
    MEMORY_IMPORT_REQUEST,
    MEMORY_IMPORT_RESPONSE,
    ActorEraseSerializer,
    ErasureSerializer,
    InjectionSerializer,
    MemoryInputSerializer,
    MemoryPatchSerializer,
    MemoryReactivateSerializer,
    MemorySerializer,
    MemorySuppressSerializer,
    RecallRequestSerializer,
    ReplayRequestSerializer,
    ReplaySerializer,
    recall_request_plain,
)
from recall.filtersets import MemoryFilterSet
from recall.hits import with_hits
from recall.models import LifecycleStatus, MemoryRecord
from recall.selectors import actor_lookup, memory_list

MEMORY_FILTER_PARAMS = filter_parameters(
    MemoryFilterSet,
    {
        "type": "memoryType",
        "source": "sourceKind",
        "status": "lifecycleStatus",
        "sensitivity": "sensitivity label",
        "segment": "segmentKind",
        "q": "text the content contains (case-insensitive)",
        "createdAfter": "ISO 8601 datetime",
        "createdBefore": "ISO 8601 datetime",
    },
)


def memory_for(caller: Caller, memory_id: Any, *, required: str = Role.VIEWER) -> MemoryRecord:
    pk = numeric_id(memory_id)
    if pk is None:
        raise NotFoundError(f"No memory {memory_id!r}: memory ids are ASCII digits.")
    rows = with_hits(MemoryRecord.objects.select_related("actor")).defer("embedding")
    return scoped_get(caller, rows, pk, what="memory", required=required)


def _validate_batch(data: Any) -> list[dict[str, Any]]:
    """One object or {"memories": [...]}; every item is checked before anything is written."""
    if isinstance(data, dict) and set(data) == {"memories"}:
        items = data["memories"]
        if not isinstance(items, list) or not items:
            raise ValidationFailed({"memories": "Send a non-empty list of memory objects."})
        if len(items) > MEMORY_BATCH_MAX:
            raise ValidationFailed(
                {"memories": f"At most {MEMORY_BATCH_MAX} memories per call; got {len(items)}."}
            )
    elif isinstance(data, dict):
        items = [data]
    else:
        raise ValidationFailed({"body": 'Send one memory object or {"memories": [...]}.'})
    valid: list[dict[str, Any]] = []
    errors: dict[str, Any] = {}
    objects = [item for item in items if isinstance(item, dict)]
    checked = iter(MemoryInputSerializer.check_each(objects))
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors[str(index)] = {"item": "Each memory must be a JSON object."}
            continue
        fields, problems = next(checked)
        if fields is not None:
            valid.append(fields)
        else:
            errors[str(index)] = {k: " ".join(map(str, v)) for k, v in problems.items()}
    if errors:
        if len(items) == 1 and "memories" not in data:
            raise ValidationFailed(errors["0"], "The memory is not valid; nothing was saved.")
        raise ValidationFailed(
            {
                f"memories[{i}].{field}": msg
                for i, fields in errors.items()
                for field, msg in fields.items()
            },
            f"{len(errors)} of {len(items)} memories are not valid; nothing was saved.",
        )
    return valid


# What a memory restored from an archive line carries (its id, its history): a person's
# import, never an agent's write, which creates a new memory as of now.
_RESTORE_ONLY = ("id", "actorId", "createdAt", "lastAccessedAt", "hitCount", "staleSince")


def _agent_writes_new(data: dict[str, Any]) -> None:
    """Refuse an agent token's write (a body ``_validate_batch`` found valid) that restores
    rather than creates (``_RESTORE_ONLY``)."""
    items = data["memories"] if set(data) == {"memories"} else [data]
    given = [key for key in _RESTORE_ONLY if any(key in item for item in items)]
    if given:
        raise ForbiddenError(
            "An agent token writes new memories only; restoring one from an archive "
            f"({', '.join(given)}) needs the editor role.",
            {"fields": given, "role": Role.AGENT, "requiredRole": Role.EDITOR},
        )


def memories_write(
    caller: Caller, slug: str | None, actor_id: str, body: Callable[[], Any]
) -> list[MemoryRecord]:
    """Write the memories of a request's body (``body()``: one object or ``{"memories":
    [...]}``, read once the caller is checked) for ``actor_id``, as ``POST .../memories``
    does (the ``memory.create`` permission; an agent writes new memories only); the MCP
    server's ``remember`` writes through it too."""
    workspace = workspace_for(caller, slug, required=Permission.MEMORY_CREATE)
    actor_id = services.actor_normalize(actor_id)
    data = body()
    items = _validate_batch(data)
    if caller.token is not None and caller.token.is_agent:
        _agent_writes_new(data)
    return services.memory_import(
        workspace=workspace, actor_id=actor_id, items=items, author=caller.label
    )


class ActorMemoriesView(ApiView):
    @extend_schema(
        parameters=[WORKSPACE_PARAM, *MEMORY_FILTER_PARAMS], responses=MemorySerializer(many=True)
    )
    def get(self, request: Request, actor_id: str) -> Response:
        workspace = workspace_for(self.caller(request), request.query_params.get("workspace"))
        actor_id = services.actor_normalize(actor_id)
        actor = actor_lookup(workspace=workspace, actor_id=actor_id)
        if actor is None:
            raise NotFoundError(f"No actor {actor_id} in workspace {workspace.slug!r}.")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            memory_list(actor=actor, filters=request.query_params), request, view=self
        )
        return paginator.get_paginated_response(MemorySerializer(page, many=True).data)

    @extend_schema(
        parameters=[WORKSPACE_PARAM],
        request=MEMORY_IMPORT_REQUEST,
        responses={
            201: MEMORY_IMPORT_RESPONSE,
            409: OpenApiResponse(
                ErrorSerializer,
                description="MEMORY_ID_TAKEN: a memory restored under its `id` (an archive "
                "line) finds another memory holding it (`details.ids`); or the actor was "
                "erased (ACTOR_ERASED). Nothing was saved.",
            ),
            422: OpenApiResponse(
                ErrorSerializer,
                description="MEMORY_ID_NOT_ISSUED: a memory restored under an `id` this "
                "database never issued (`details.ids`); nothing was saved.",
            ),
        },
        summary='Add one memory, or up to 1,000 as {"memories": [...]} (all or nothing)',
    )
    def post(self, request: Request, actor_id: str) -> Response:
        slug = request.query_params.get("workspace")
        rows = memories_write(self.caller(request), slug, actor_id, lambda: request.data)
        body = MemorySerializer(rows, many=True).data
        data = request.data
        if isinstance(data, dict) and "memories" in data:
            return Response({"memories": body, "count": len(body)}, status=status.HTTP_201_CREATED)
        return Response(body[0], status=status.HTTP_201_CREATED)


class MemoryDetailView(ApiView):
    @extend_schema(responses=MemorySerializer)
    def get(self, request: Request, memory_id: int) -> Response:
        return Response(MemorySerializer(memory_for(self.caller(request), memory_id)).data)

    @extend_schema(request=MemoryPatchSerializer(partial=True), responses=MemorySerializer)
    def patch(self, request: Request, memory_id: int) -> Response:
        caller = self.caller(request)
        memory = memory_for(caller, memory_id, required=Role.EDITOR)
        serializer = MemoryPatchSerializer(data=json_object(request), partial=True)
        serializer.is_valid(raise_exception=True)
        memory = services.memory_update(
            memory=memory, changes=serializer.to_model_fields(), author=caller.label
        )
        return Response(MemorySerializer(memory).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, memory_id: int) -> Response:
        caller = self.caller(request)
        memory = memory_for(caller, memory_id, required=Role.EDITOR)
        services.memory_delete(memory=memory, author=caller.label)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryInjectionsView(ApiView):
    @extend_schema(
        responses=InjectionSerializer(many=True),
        summary="The envelopes that carried this memory, newest first (from the audit trail)",
    )
    def get(self, request: Request, memory_id: int) -> Response:
        memory = memory_for(self.caller(request), memory_id)
        paginator = self.pagination_class()
        rows = memory_injections(workspace=memory.workspace, memory_id=memory.pk)
        page = with_events(paginator.paginate_queryset(rows, request, view=self) or [])
        return paginator.get_paginated_response(InjectionSerializer(page, many=True).data)


class MemorySuppressView(ApiView):
    @extend_schema(
        request=MemorySuppressSerializer,
        responses=MemorySerializer,
        summary="Take a memory out of recall; the body (optional) gives the reason",
    )
    def post(self, request: Request, memory_id: int) -> Response:
        caller = self.caller(request)
        memory = memory_for(caller, memory_id, required=Role.EDITOR)
        serializer = MemorySuppressSerializer(data=json_object_or_empty(request))
        serializer.is_valid(raise_exception=True)
        memory = services.memory_set_status(
            memory=memory,
            status=LifecycleStatus.SUPPRESSED,
            author=caller.label,
            reason=serializer.validated_data.get("reason", ""),
        )
        return Response(MemorySerializer(memory).data)


class MemoryRestoreView(ApiView):
    @extend_schema(
        request=None,
        responses=MemorySerializer,
        summary="Undo a memory's suppression",
        description="The memory gets back the status it had when it was suppressed: active, "
        "or stale, expired or disabled as it was then (a stale one keeps its retention clock; "
        "an operator reactivates it). One `memory.changed` event, action `restored`, with "
        "`restoredTo` when that is not active. Only a suppressed memory can be restored (409).",
    )
    def post(self, request: Request, memory_id: int) -> Response:
        caller = self.caller(request)
        memory = memory_for(caller, memory_id, required=Role.EDITOR)
        memory = services.memory_set_status(
            memory=memory, status=LifecycleStatus.ACTIVE, author=caller.label
        )
        return Response(MemorySerializer(memory).data)


class MemoryReactivateView(ApiView):
    @extend_schema(
        request=MemoryReactivateSerializer,
        responses={
            200: MemorySerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="NOT_REACTIVATABLE: the memory is neither stale nor expired "
                "(`details.lifecycleStatus` says what it is); nothing was changed.",
            ),
            422: OpenApiResponse(
                ErrorSerializer,
                description="EXPIRY_PAST: `expiresAt` is not in the future; nothing was changed.",
            ),
        },
        summary="Make a stale or expired memory active again; operators only",
        description="Clears its `staleSince`. Without `expiresAt`, an expiry already past is "
        "cleared (left past, it would keep the memory out of recall and the next expiry sweep "
        "would expire it again) and one still ahead is kept; `expiresAt` sets a new one (in the "
        "future), `null` clears it. One `memory.changed` event, action `reactivated`. A "
        "reactivated memory not recalled for long is due again at the next decay sweep "
        "unless it is recalled or made long-term first.",
    )
    def post(self, request: Request, memory_id: int) -> Response:
        caller = self.caller(request)
        memory = memory_for(caller, memory_id, required=Role.OPERATOR)
        serializer = MemoryReactivateSerializer(data=json_object_or_empty(request))
        serializer.is_valid(raise_exception=True)
        given = serializer.validated_data
        memory = services.memory_reactivate(
            memory=memory,
            author=caller.label,
            expires_at=given.get("expiresAt"),
            clear_expiry="expiresAt" in given and given["expiresAt"] is None,
        )
        return Response(MemorySerializer(memory).data)


class RecallView(RememberedTokenView):
    throttle_scope = "recall"  # its own per-token limit (portal.throttling)
    # The hot path: its envelope rendered by orjson, its token taken as remembered and checked
    # by the recall's read (portal.tokens.TokenCheck).
    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        parameters=[WORKSPACE_PARAM],
        request=RecallRequestSerializer,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="The envelope, recorded as one context.assembled event. An actor "
                "id the workspace has no actor of (no memory was ever written for it) gets an "
                "empty envelope, every count 0, with the warning `actor_unknown` in "
                "`diagnostics.warnings` (left out, as every warning, at verbosity none).",
            ),
            422: BUDGET_NOT_HONOURABLE_RESPONSE,
            404: OpenApiResponse(
                ErrorSerializer,
                description="NOT_FOUND: no workload `workloadId` (or no workspace "
                "`workspace`) the caller can see. An unknown actor is not a 404 (see 200).",
            ),
        },
        summary="Recall: the governed context envelope for one actor (SPEC §5)",
    )
    def post(self, request: Request, actor_id: str) -> Response:
        return self.remembered(request, lambda check: self._recall(request, actor_id, check))

    def _recall(self, request: Request, actor_id: str, check: TokenCheck | None) -> Response:
        caller = self.caller(request)
        workspace, actor_id = recall_target(caller, request.query_params.get("workspace"), actor_id)
        data = recall_request_plain(request.data)
        if data is None:
            serializer = RecallRequestSerializer(data=json_object(request))
            serializer.is_valid(raise_exception=True)
            data = serializer.validated_data
        return Response(recall_recorded(caller, workspace, actor_id, data, check).envelope)


def recall_target(caller: Caller, slug: str | None, actor_id: str) -> tuple[Workspace, str]:
    """The workspace a recall acts on (the caller's, checked for the recall permission) and
    the actor id, normalized: checked before the request's body."""
    workspace = workspace_for(caller, slug, required=Permission.RECALL)
    return workspace, services.actor_normalize(actor_id)


def recall_recorded(
    caller: Caller,
    workspace: Workspace,
    actor_id: str,
    data: dict[str, Any],
    check: TokenCheck | None,
) -> assembly.Recorded:
    """The recall of ``actor_id`` (normalized) in ``workspace`` (the caller's, checked) for a
    request body already validated (``data``), recorded: the envelope the endpoint answers,
    with the ``context.assembled`` event that records it (the MCP server's ``recall`` answers
    both)."""
    # A stand-in: effective_policy_for checks, in its one query, that it is this
    # workspace's workload (404 otherwise).
    workload = Workload(id=data["workloadId"], workspace=workspace)
    environment = data["environment"]  # checked with the policy, in one query
    binding_check(caller, workload_id=workload.id, environment=environment)
    override = data.get("policyOverride")
    return assembly.recall_assemble(
        request=assembly.RecallRequest(
            workspace=workspace,
            workload=workload,
            environment=environment,
            actor_id=actor_id,
            query=data["query"],
            top_k=data["topK"],
            override=override or None,
            author=caller.label,
            token_check=check,
        )
    )


class ActorEraseView(ApiView):
    @extend_schema(
        parameters=[WORKSPACE_PARAM],
        request=ActorEraseSerializer,
        responses={200: ErasureSerializer},
        summary="Erase an actor (a data-subject request): every memory, its caches and archive "
        "lines; operators only",
    )
    def post(self, request: Request, actor_id: str) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(
            caller, request.query_params.get("workspace"), required=Role.OPERATOR
        )
        serializer = ActorEraseSerializer(data=json_object_or_empty(request))
        serializer.is_valid(raise_exception=True)
        done = erasure.actor_erase(
            workspace=workspace,
            actor_id=actor_id,
            author=caller.label,
            expected_count=serializer.validated_data.get("expectedCount"),
        )
        return Response(ErasureSerializer(done).data)


class EventReplayView(ApiView):
    @extend_schema(
        parameters=[WORKSPACE_PARAM],
        request=ReplayRequestSerializer,
        responses={
            200: ReplaySerializer,
            422: OpenApiResponse(
                ErrorSerializer,
                description="QUERY_MISMATCH: the query sent is not the one the event recorded; "
                "or QUERY_REQUIRED: no query sent, and the workspace did not store the event's.",
            ),
        },
        summary="Run a context.assembled event's recall again now (recording nothing) and "
        "compare: each memory entered, left or stayed, with the reason",
    )
    def post(self, request: Request, event_id: int) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(
            caller, request.query_params.get("workspace"), required=Role.EDITOR
        )
        serializer = ReplayRequestSerializer(data=json_object_or_empty(request))
        serializer.is_valid(raise_exception=True)
        result = replay.replay_event(
            workspace=workspace, event_id=event_id, query=serializer.validated_data.get("query")
        )
        return Response(ReplaySerializer(result).data)
