from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from audit.api.serializers import AuditEventSerializer, ChainVerdictSerializer
from audit.filtersets import AuditEventFilterSet
from audit.selectors import audit_events
from audit.services import audit_chain_verify
from portal.access import workspace_for
from portal.api.views import WORKSPACE_PARAM, ApiView, filter_parameters
from portal.errors import NotFoundError

FILTER_PARAMS = filter_parameters(
    AuditEventFilterSet,
    {
        "type": "Events of any of these types: repeat the parameter (type=a&type=b) or list "
        "them with commas (type=a,b). An unknown type is a 400 naming the event types.",
        "memory": "A memory's history: the context.assembled events that carried it and the "
        "events that changed it (memory.changed, memory.erased, the maintenance runs that "
        "changed it and their reverts that put it back).",
    },
)


class AuditEventListView(ApiView):
    @extend_schema(
        parameters=[WORKSPACE_PARAM, *FILTER_PARAMS],
        responses=AuditEventSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        workspace = workspace_for(self.caller(request), request.query_params.get("workspace"))
        events = audit_events(workspace=workspace, filters=request.query_params)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(AuditEventSerializer(page, many=True).data)


class AuditEventDetailView(ApiView):
    @extend_schema(parameters=[WORKSPACE_PARAM], responses=AuditEventSerializer)
    def get(self, request: Request, event_id: int) -> Response:
        workspace = workspace_for(self.caller(request), request.query_params.get("workspace"))
        event = (
            workspace.audit_events.select_related("workspace", "stored_query")
            .filter(pk=event_id)
            .first()
        )
        if event is None:
            raise NotFoundError(f"No audit event {event_id}.")
        return Response(AuditEventSerializer(event).data)


class AuditVerifyView(ApiView):
    @extend_schema(parameters=[WORKSPACE_PARAM], responses=ChainVerdictSerializer)
    def get(self, request: Request) -> Response:
        workspace = workspace_for(self.caller(request), request.query_params.get("workspace"))
        verdict = audit_chain_verify(workspace=workspace)
        return Response(
            {
                "ok": verdict.ok,
                "checked": verdict.checked,
                "firstBrokenId": verdict.first_broken_id,
                "reason": verdict.reason,
            }
        )
