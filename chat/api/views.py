"""Sessions over HTTP: start one, post its turns (the context assembled for the user's),
read it, its turns' diagnostics and (operators) their prompts, compact it, end it; read a
compaction run.

Roles are ``chat.access``'s: viewers read, editors and up write, operators read prompts;
agent tokens read and write within their scopes and binding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from chat import services
from chat.access import (
    Action,
    compaction_run_for,
    session_for,
    session_locked_for,
    sessions_workspace,
)
from chat.api.serializers import (
    CompactionRunSerializer,
    SessionCreateSerializer,
    SessionSerializer,
    TurnAnswerSerializer,
    TurnDetailSerializer,
    TurnPromptSerializer,
    TurnsRequestSerializer,
    compaction_run_data,
    turn_detail,
    turn_prompt,
    turns_answer,
)
from chat.filtersets import SessionFilterSet
from chat.models import Session
from chat.selectors import session_list, session_turn
from chat.services import Posted
from portal.access import Caller, binding_check
from portal.api.errors import ErrorSerializer
from portal.api.renderers import FastJSONRenderer
from portal.api.views import (
    WORKSPACE_PARAM,
    ApiView,
    RememberedTokenView,
    filter_parameters,
    json_object,
    json_object_or_empty,
    reject_unknown,
)
from portal.errors import NotFoundError
from portal.tokens import TokenCheck

SESSION_FILTER_PARAMS = filter_parameters(
    SessionFilterSet,
    {
        "actor": "actor id (kind:name)",
        "workload": "workload id",
        "environment": "environment slug",
        "status": "active or ended",
    },
)
TURN_PARAM = OpenApiParameter(
    "turn", int, OpenApiParameter.PATH, description="The turn's index (from 1)."
)
TURNS_DESCRIPTION = """\
Append the messages in order (typically the assistant's previous reply, tool results, then
the new user message). When the last one is the user's, the context for it is assembled and
returned: the recall (the workload's effective policy for the session's environment, the
user's message as the query, one `context.assembled` event naming the session and the turn)
with its token budget capped at the turn's supporting-context budget, laid out under the
workload's stored layout configuration (seed 000's accounting, sections and pruning
cascade), rendered as chat-completions `messages`. More history than the configuration keeps
does not fail: it is pruned. Nothing is appended when the call is refused.
"""


def session_start(caller: Caller, slug: str | None, body: Callable[[], dict[str, Any]]) -> Session:
    """Start the session a request's body describes (``body()``, read once the caller is
    checked), as ``POST /v1/sessions`` does (``session.use``, the token's binding); the MCP
    server's ``assemble_context`` starts its sessions through it too."""
    workspace = sessions_workspace(caller, slug, Action.WRITE)
    serializer = SessionCreateSerializer(data=body())
    serializer.is_valid(raise_exception=True)
    valid = serializer.validated_data
    binding_check(caller, workload_id=valid["workloadId"], environment=valid["environment"])
    return services.session_create(
        workspace=workspace,
        actor_id=valid["actorId"],
        workload_id=valid["workloadId"],
        environment=valid["environment"],
        author=caller.label,
        external_id=valid.get("externalId", ""),
        system_prompt=valid.get("systemPrompt", ""),
        system_prompt_tokens=valid.get("systemPromptTokens"),
        tool_schema_tokens=valid["toolSchemaTokens"],
    )


def session_turns_add(
    caller: Caller,
    session_id: str,
    body: Callable[[], dict[str, Any]],
    token_check: TokenCheck | None = None,
) -> Posted:
    """Append a request body's messages (``body()``, read once the caller is checked) to a
    session, as ``POST .../turns`` does (``session.use``, the token's binding for the
    session's workload); the MCP server's ``assemble_context`` posts through it too.
    ``token_check``: the caller's token was taken as remembered (``RememberedTokenView``)."""

    def messages() -> Any:
        data = body()
        reject_unknown(data, {"messages"})
        return data.get("messages")

    return services.turns_post(
        locate=lambda: session_locked_for(caller, session_id, token_check),
        messages=messages,
        author=caller.label,
    )


class SessionsView(ApiView):
    """``POST /v1/sessions`` starts a session, ``GET /v1/sessions/`` lists them; each path
    answers the other method too (the schema shows each under the path the API map gives)."""

    @extend_schema(
        parameters=[WORKSPACE_PARAM],
        request=SessionCreateSerializer,
        responses={
            201: SessionSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="SESSION_EXISTS: a session has this externalId (details.sessionId);"
                " WORKLOAD_ARCHIVED; ACTOR_ERASED.",
            ),
        },
        summary="Start a session of an actor with a workload in an environment",
    )
    def post(self, request: Request) -> Response:
        slug = request.query_params.get("workspace")
        session = session_start(self.caller(request), slug, lambda: json_object(request))
        body = SessionSerializer(session).data
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Location"] = body["links"]["self"]
        return response

    @extend_schema(
        parameters=[WORKSPACE_PARAM, *SESSION_FILTER_PARAMS],
        responses=SessionSerializer(many=True),
        summary="The workspace's sessions, newest first",
    )
    def get(self, request: Request) -> Response:
        workspace = sessions_workspace(
            self.caller(request), request.query_params.get("workspace"), Action.READ
        )
        sessions = session_list(workspace=workspace, filters=request.query_params)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(sessions, request, view=self)
        return paginator.get_paginated_response(SessionSerializer(page, many=True).data)


class SessionCreateView(SessionsView):
    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        return super().get(request)


class SessionListView(SessionsView):
    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response:
        return super().post(request)


class SessionDetailView(ApiView):
    @extend_schema(responses=SessionSerializer, summary="A session: status, turns, last budget")
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(self.caller(request), session_id, Action.READ)
        return Response(SessionSerializer(session).data)


class SessionEndView(ApiView):
    @extend_schema(
        request=None,
        responses=SessionSerializer,
        summary="End a session (no turn can be added; its retention starts)",
    )
    def post(self, request: Request, session_id: str) -> Response:
        caller = self.caller(request)
        session = session_for(caller, session_id, Action.WRITE)
        json_object_or_empty(request)
        ended = services.session_end(session=session, author=caller.label)
        return Response(SessionSerializer(ended).data)


class SessionTurnsView(RememberedTokenView):
    # An agent's every turn: its token taken as remembered and checked by the statement that
    # locks the session, its prompt (every kept memory and turn) rendered by orjson.
    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        request=TurnsRequestSerializer,
        responses={
            201: TurnAnswerSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="SESSION_ENDED: the session has ended; WORKLOAD_ARCHIVED.",
            ),
            413: OpenApiResponse(
                ErrorSerializer,
                description="MESSAGE_TOO_LARGE: a message over the size limit (details: "
                "index, size, limit).",
            ),
        },
        summary="Append turns; for a user message, assemble its context",
        description=TURNS_DESCRIPTION,
    )
    def post(self, request: Request, session_id: str) -> Response:
        return self.remembered(request, lambda check: self._turns(request, session_id, check))

    def _turns(self, request: Request, session_id: str, check: TokenCheck | None) -> Response:
        caller = self.caller(request)
        posted = session_turns_add(caller, session_id, lambda: json_object(request), check)
        return Response(turns_answer(posted), status=status.HTTP_201_CREATED)


class SessionTurnView(ApiView):
    @extend_schema(
        parameters=[TURN_PARAM],
        responses=TurnDetailSerializer,
        summary="A turn and, for an assembled one, its diagnostics (what was kept, pruned "
        "and why; its recall; its budget status)",
    )
    def get(self, request: Request, session_id: str, turn: int) -> Response:
        session = session_for(self.caller(request), session_id, Action.READ)
        row, context = session_turn(session=session, index=turn)
        return Response(turn_detail(row, context))


class SessionTurnPromptView(ApiView):
    @extend_schema(
        parameters=[TURN_PARAM],
        responses=TurnPromptSerializer,
        summary="The formatted prompt of an assembled turn, as it was returned (operators "
        "only: private content)",
    )
    def get(self, request: Request, session_id: str, turn: int) -> Response:
        session = session_for(self.caller(request), session_id, Action.PROMPT)
        row, context = session_turn(session=session, index=turn)
        if context is None:
            raise NotFoundError(
                f"No context was assembled for turn {row.index} (a {row.role} message), so it "
                "has no prompt.",
                {"role": row.role},
            )
        response = Response(turn_prompt(context))
        response["Cache-Control"] = "no-store, private"
        return response


COMPACT_DESCRIPTION = """\
Seed 000's `/compact`: a compaction run of the session, now, whatever the monitor would
decide (its cooldown included; the run starts a new one). The run summarises the session's
oldest turns outside `compaction_recency_window` (at least `min_turns_to_summarize`, at most
`max_turns_per_summary` per summary) into `summary` memories of the actor until the estimate
is at or below `target_utilization` or the time budget runs out, supersedes the actor's
duplicate insights (`insight_dedup_enabled`) and promotes the memories the promotion rule
finds due when the workspace's schedule executes promotion. Without a task queue the run has
finished when this answers (200); with one it is queued (202): follow `links.self`.
"""


class SessionCompactView(ApiView):
    @extend_schema(
        request=None,
        responses={
            200: OpenApiResponse(
                CompactionRunSerializer, description="The run, finished (no task queue)."
            ),
            202: OpenApiResponse(CompactionRunSerializer, description="The run, queued."),
            409: OpenApiResponse(
                ErrorSerializer,
                description="COMPACTION_IN_PROGRESS (details.runId); SESSION_ENDED; "
                "COMPACTION_NO_HISTORY: no turn assembled yet.",
            ),
            422: OpenApiResponse(
                ErrorSerializer,
                description="COMPACTION_DISABLED: the workload's layout configuration does "
                "not enable compaction (memory.compaction.enabled), which disables this too.",
            ),
        },
        summary="Compact a session now (editors and operators)",
        description=COMPACT_DESCRIPTION,
    )
    def post(self, request: Request, session_id: str) -> Response:
        caller = self.caller(request)
        session = session_for(caller, session_id, Action.WRITE)
        json_object_or_empty(request)
        run = services.compaction_request(session=session, author=caller.label)
        body = compaction_run_data(run)
        response = Response(
            body, status=status.HTTP_200_OK if run.finished else status.HTTP_202_ACCEPTED
        )
        response["Location"] = body["links"]["self"]
        return response


class CompactionRunView(ApiView):
    @extend_schema(
        responses=CompactionRunSerializer,
        summary="A compaction run: its outcome, tokens before and after, turns summarised",
    )
    def get(self, request: Request, compaction_run_id: int) -> Response:
        run = compaction_run_for(self.caller(request), compaction_run_id)
        return Response(compaction_run_data(run))
