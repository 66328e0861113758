"""The maintenance API: lifecycle settings, starting sweeps, runs, items and archives.

Roles: every member reads; editors preview; operators execute, cancel, revert, restore,
download archives (they hold memory content) and change the settings.
"""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from maintenance import archives, reverts, services
from maintenance.api.schemas import lifecycle_settings_schema
from maintenance.api.serializers import (
    ItemSerializer,
    LifecycleSettingsSerializer,
    MemoryLifecycleSerializer,
    RestoreSerializer,
    RevertSerializer,
    RunSerializer,
    revert_data,
)
from maintenance.lifecycle import SWEEP_SUMMARY, SWEEPS
from maintenance.models import LifecycleSettingsVersion, MaintenanceRun, Mode, Outcome, Status
from maintenance.selectors import (
    archive_manifest,
    archive_text,
    lifecycle_settings_current,
    memory_lifecycle,
    runs_for,
)
from portal.access import Caller, scoped_get, workspace_for
from portal.api.errors import ErrorSerializer
from portal.api.views import ApiView, json_object, reject_unknown
from portal.errors import NotFoundError, ValidationFailed
from portal.ids import numeric_id
from portal.models import Role
from recall.api.views import memory_for

SWEEP_DOC = "; ".join(f"`{name}`: {text}" for name, text in SWEEP_SUMMARY.items())


def _run(caller: Caller, run_id: Any, *, required: str = Role.VIEWER) -> MaintenanceRun:
    pk = numeric_id(run_id)
    if pk is None:  # answered as a run that does not exist, like another workspace's
        raise NotFoundError(f"No maintenance run {run_id}.")
    rows = MaintenanceRun.objects.select_related("preview")
    return scoped_get(caller, rows, pk, what="maintenance run", required=required)


# A count of memories is at most 12 digits (the schema says so too).
COUNT_MAX = 10**12 - 1


def _count(raw: str | None, name: str) -> int | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw.lstrip("0")) > len(str(COUNT_MAX)):
        raise ValidationFailed({name: f"A whole number of memories, such as 12; got {raw!r}."})
    return int(raw)


def _choice(raw: str | None, name: str, allowed: list[str]) -> str | None:
    if raw is None or raw == "":
        return None
    if raw not in allowed:
        raise ValidationFailed({name: f"Use one of {', '.join(allowed)}; got {raw!r}."})
    return raw


WEIGHTS_UNBALANCED_RESPONSE = OpenApiResponse(
    ErrorSerializer,
    description="PROMOTION_WEIGHTS_UNBALANCED: the promotion weights, each well formed, do not "
    "add up to 1 (`details.fields.promotionWeights`); nothing was saved.",
)


class LifecycleSettingsView(ApiView):
    @extend_schema(
        responses=LifecycleSettingsSerializer, summary="The workspace's lifecycle settings"
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        version = lifecycle_settings_current(workspace=workspace)
        return Response(LifecycleSettingsSerializer(version).data)

    @extend_schema(
        request={"application/json": lifecycle_settings_schema()},
        responses={200: LifecycleSettingsSerializer, 422: WEIGHTS_UNBALANCED_RESPONSE},
        summary="Replace the lifecycle settings (a new version; missing keys take defaults)",
        description='`{"settings": {...}, "comment": "..."}` or the settings object itself.',
    )
    def put(self, request: Request, slug: str) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(caller, slug, required=Role.OPERATOR)
        document, comment = _settings_body(json_object(request))
        version = services.lifecycle_settings_save(
            workspace=workspace, document=document, author=caller.label, comment=comment
        )
        return Response(LifecycleSettingsSerializer(version).data)

    @extend_schema(
        request={"application/json": lifecycle_settings_schema()},
        responses={200: LifecycleSettingsSerializer, 422: WEIGHTS_UNBALANCED_RESPONSE},
        summary="Change some lifecycle settings (a new version)",
    )
    def patch(self, request: Request, slug: str) -> Response:
        caller = self.caller(request)
        workspace = workspace_for(caller, slug, required=Role.OPERATOR)
        document, comment = _settings_body(json_object(request))
        version = services.lifecycle_settings_patch(
            workspace=workspace, changes=document, author=caller.label, comment=comment
        )
        return Response(LifecycleSettingsSerializer(version).data)


def _settings_body(data: dict[str, Any]) -> tuple[Any, Any]:
    """The envelope ``{"settings", "comment"}`` (GET's read-only keys ignored) or the bare
    settings object with an optional ``comment``."""
    data = dict(data)
    comment = data.pop("comment", "")
    if "settings" in data:
        reject_unknown(
            {k: v for k, v in data.items() if k not in ("version", "author", "createdAt")},
            {"settings"},
        )
        return data["settings"], comment
    return data, comment


class LifecycleSettingsVersionListView(ApiView):
    @extend_schema(responses=LifecycleSettingsSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        versions = LifecycleSettingsVersion.objects.filter(workspace=workspace).order_by("-version")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(versions, request, view=self)
        return paginator.get_paginated_response(LifecycleSettingsSerializer(page, many=True).data)


class SweepStartView(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("sweep", str, OpenApiParameter.PATH, enum=list(SWEEPS)),
            OpenApiParameter("mode", str, enum=Mode.values, description="Default: preview."),
            OpenApiParameter(
                "preview", int, description="execute only: the preview run to carry out"
            ),
            OpenApiParameter(
                "confirm",
                {"type": "integer", "minimum": 0, "maximum": COUNT_MAX},
                description="execute only: the number of memories you expect it to change "
                "(required for a retention run over the workspace's retentionMaxShare)",
            ),
        ],
        request=None,
        responses={
            200: OpenApiResponse(RunSerializer, description="Finished (tasks run eagerly)"),
            202: OpenApiResponse(RunSerializer, description="Queued for a worker"),
        },
        summary="Preview or execute a maintenance sweep",
        description=SWEEP_DOC
        + ". A preview writes no memory; an execute changes exactly the memories its preview"
        " listed (rows that changed since are skipped), or previews and executes in one go.",
    )
    def post(self, request: Request, slug: str, sweep: str) -> Response:
        caller = self.caller(request)
        params = request.query_params
        mode = params.get("mode", Mode.PREVIEW)
        services.mode_check(mode)
        required = Role.OPERATOR if mode == Mode.EXECUTE else Role.EDITOR
        workspace = workspace_for(caller, slug, required=required)
        services.sweep_check(sweep)
        run = services.maintenance_start(
            workspace=workspace,
            sweep=sweep,
            mode=mode,
            author=caller.label,
            preview_id=params.get("preview") or None,
            confirm=_count(params.get("confirm"), "confirm"),
        )
        body = RunSerializer(run).data
        code = status.HTTP_200_OK if run.finished else status.HTTP_202_ACCEPTED
        response = Response(body, status=code)
        response["Location"] = body["links"]["self"]
        return response


class RunListView(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("sweep", str, enum=list(SWEEPS)),
            OpenApiParameter("mode", str, enum=Mode.values),
            OpenApiParameter("status", str, enum=Status.values),
        ],
        responses=RunSerializer(many=True),
        summary="The workspace's maintenance runs, newest first",
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = workspace_for(self.caller(request), slug)
        runs = runs_for(workspace=workspace).select_related("workspace")
        params = request.query_params
        for name, allowed in (("sweep", list(SWEEPS)), ("mode", Mode.values),
                              ("status", Status.values)):  # fmt: skip
            value = _choice(params.get(name), name, allowed)
            if value is not None:
                runs = runs.filter(**{name: value})
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(runs, request, view=self)
        return paginator.get_paginated_response(RunSerializer(page, many=True).data)


class RunDetailView(ApiView):
    @extend_schema(responses=RunSerializer, summary="One maintenance run")
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunSerializer(_run(self.caller(request), run_id)).data)


class RunItemsView(ApiView):
    @extend_schema(
        parameters=[OpenApiParameter("outcome", str, enum=Outcome.values)],
        responses=ItemSerializer(many=True),
        summary="The memories a run lists, with why and what happened to each",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = _run(self.caller(request), run_id)
        items = run.items.order_by("memory_id")
        outcome = _choice(request.query_params.get("outcome"), "outcome", Outcome.values)
        if outcome is not None:
            items = items.filter(outcome=outcome)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(items, request, view=self)
        items_data = ItemSerializer(page, many=True, context={"sweep": run.sweep}).data
        return paginator.get_paginated_response(items_data)


class RunCancelView(ApiView):
    @extend_schema(request=None, responses=RunSerializer, summary="Cancel a queued or running run")
    def post(self, request: Request, run_id: int) -> Response:
        caller = self.caller(request)
        run = _run(caller, run_id, required=Role.OPERATOR)
        return Response(
            RunSerializer(services.maintenance_cancel(run=run, author=caller.label)).data
        )


def _retention_execute(run: MaintenanceRun) -> None:
    if run.sweep != "retention" or run.mode != Mode.EXECUTE:
        raise NotFoundError(f"Run {run.pk} is not a retention execute: it has no archive.")


class RunArchiveView(ApiView):
    @extend_schema(
        responses={(200, "application/jsonl"): OpenApiTypes.STR},
        summary="A retention run's archive: the deleted memories as JSON Lines",
        description="Each line is a memory in the import's shape, with its id and actorId: "
        "the memory import (or POST .../restore) takes it back.",
    )
    def get(self, request: Request, run_id: int) -> StreamingHttpResponse:
        run = _run(self.caller(request), run_id, required=Role.OPERATOR)
        _retention_execute(run)
        response = StreamingHttpResponse(
            archive_text(run), content_type="application/jsonl; charset=utf-8"
        )
        response["Content-Disposition"] = (
            f'attachment; filename="{run.workspace.slug}-retention-run-{run.pk}.jsonl"'
        )
        response["Cache-Control"] = "no-store"
        return response


class RunManifestView(ApiView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT, summary="A retention archive's counts and SHA-256"
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = _run(self.caller(request), run_id)
        _retention_execute(run)
        return Response(archive_manifest(run))


class RunRestoreView(ApiView):
    @extend_schema(
        request=None,
        responses=RestoreSerializer,
        summary="Put a retention run's deleted memories back, under their own ids",
    )
    def post(self, request: Request, run_id: int) -> Response:
        caller = self.caller(request)
        run = _run(caller, run_id, required=Role.OPERATOR)
        _retention_execute(run)
        result = archives.maintenance_archive_restore(run=run, author=caller.label)
        return Response(RestoreSerializer(result).data)


class RunRevertView(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("mode", str, enum=Mode.values, description="Default: preview."),
            OpenApiParameter(
                "confirm",
                {"type": "integer", "minimum": 0, "maximum": COUNT_MAX},
                description="execute only: the number of memories you expect it to put back "
                "(the preview's counts.reverted); if that has changed, nothing is (409 "
                "CONFIRMATION_MISMATCH)",
            ),
        ],
        request=None,
        responses={
            200: RevertSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="NOT_REVERTIBLE (`details.reason`: preview, sweep — retention "
                "and reembed runs —, nothing_changed, or not_recorded — executed before runs "
                "recorded the values they change), RUN_NOT_FINISHED, ALREADY_REVERTED, "
                "NOTHING_TO_REVERT (every memory changed since or gone) or "
                "CONFIRMATION_MISMATCH; nothing was changed.",
            ),
        },
        summary="Preview or execute the revert of an executed run; operators only",
        description="Puts back the values an expiry, decay, promotion or dedup execute changed, "
        "on each memory that has not changed since; the others are skipped with why "
        "(deleted, erased, changed_since, not_recorded). A preview writes nothing; an execute "
        "does it in one transaction with one `maintenance.reverted` event. A run is reverted "
        "once; a retention run's deleted memories come back from its archive (`.../restore`).",
    )
    def post(self, request: Request, run_id: int) -> Response:
        caller = self.caller(request)
        params = request.query_params
        mode = params.get("mode", Mode.PREVIEW)
        services.mode_check(mode)
        confirm = _count(params.get("confirm"), "confirm")
        run = _run(caller, run_id, required=Role.OPERATOR)
        if mode == Mode.EXECUTE:
            plan = reverts.maintenance_revert(run=run, author=caller.label, confirm=confirm)
        else:
            plan = reverts.maintenance_revert_preview(run=run)
        return Response(RevertSerializer(revert_data(plan)).data)


class MemoryLifecycleView(ApiView):
    @extend_schema(
        responses=MemoryLifecycleSerializer,
        summary="Where a memory stands: tier, decay score, when it turns stale, promotion",
    )
    def get(self, request: Request, memory_id: int) -> Response:
        memory = memory_for(self.caller(request), memory_id)
        state = memory_lifecycle(memory=memory)
        return Response(
            MemoryLifecycleSerializer(
                {
                    "memoryId": str(memory.pk),
                    "tier": state.tier,
                    "decayScore": round(state.decay_score, 6),
                    "decays": state.decays,
                    "staleAt": state.stale_at,
                    "promotion": {
                        "score": round(state.promotion.score, 6),
                        "threshold": state.settings["promotionThreshold"],
                        "promotable": state.promotable,
                        "connections": state.connections,
                        "signals": {
                            "age": round(state.promotion.age, 6),
                            "access": round(state.promotion.access, 6),
                            "confidence": round(state.promotion.confidence, 6),
                            "connections": round(state.promotion.connections, 6),
                        },
                        "weights": state.settings["promotionWeights"],
                    },
                    "settingsVersion": state.settings_version,
                    "embedded": state.embedded,
                }
            ).data
        )
