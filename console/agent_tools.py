"""What the MCP server's tools do (``console.mcp_server`` serves them), done as the API does
it: the same token lookup, rate limits, role checks, bindings, services and audit events.

Each tool is one or two API calls made in-process, not a path of its own: the token is looked
up as ``BearerTokenAuthentication`` looks it up (a revoked, expired or rotated-out secret is
refused with the API's 401), counted under its limits as ``TokenRateThrottle`` counts a call
(429), and the work goes through the functions the API's views call, which check the role and
the binding: ``recall_target`` and ``recall_recorded`` (``POST .../recall``),
``memories_write`` (``POST .../memories``), ``session_start`` and ``session_turns_add``
(``POST /v1/sessions``, ``POST .../turns``). A refusal is the API's error body, mapped by its
one exception handler (``ToolRefused``).

- ``recall``: the envelope, in short, with its ``envelopeId``, ``digest`` and the
  ``context.assembled`` event's id (``eventId``), which the audit trail links.
- ``remember``: one new memory of the actor (``POST .../memories``).
- ``assemble_context``: a user message posted as a session's turn (the session started first
  when none is named): the prompt to send, and the turn's recall with its ids and digest.

``workload`` and ``environment`` may be left out when the token is bound to exactly one of
each: the binding names them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections
from rest_framework import exceptions

from chat.api.serializers import turns_answer
from chat.api.views import session_start, session_turns_add
from portal.access import Caller
from portal.api.errors import error_body, exception_handler
from portal.authentication import BearerTokenAuthentication, bearer_key_hash
from portal.errors import ValidationFailed
from portal.throttling import api_call_counted, token_ident
from recall.api.serializers import MemorySerializer, RecallRequestSerializer
from recall.api.views import memories_write, recall_recorded, recall_target
from recall.assembly import Recorded

logger = logging.getLogger(__name__)

NO_TOKEN = (
    "No API token: start the MCP server with --token crp_... (or CRP_TOKEN), or send "
    "`Authorization: Bearer crp_...` to its HTTP endpoint."
)


class ToolRefused(Exception):
    """A tool call the API would have refused: its HTTP ``status`` and the API's error body
    (``{"error": {"code", "message", "details"}}``), with ``retryAfter`` (seconds) on a 429
    or 503 and, when a session was started before the refusal, its ``sessionId``."""

    def __init__(self, status: int, body: dict[str, Any]):
        super().__init__(body["error"]["message"])
        self.status = status
        self.body = body


def token_caller(secret: str | None, *, recall: bool = False) -> Caller:
    """The caller of one API call made with ``secret``: looked up (which scopes the
    connection to its workspace) and counted as the API looks up and counts a call."""
    caller = token_looked_up(secret)
    wait = api_call_counted(ident=token_ident(caller.token), token=caller.token, recall=recall)
    if wait is not None:
        raise exceptions.Throttled(wait)
    return caller


def token_looked_up(secret: str | None) -> Caller:
    """The caller ``secret`` is, looked up as ``BearerTokenAuthentication`` looks it up (a
    revoked, expired or rotated-out secret refused with the API's 401), not counted."""
    if not secret:
        raise exceptions.NotAuthenticated(NO_TOKEN)
    key_hash = bearer_key_hash(f"Bearer {secret.strip()}")
    assert key_hash is not None  # a bearer header, always
    user, token = BearerTokenAuthentication.looked_up(key_hash)
    return Caller(user=user, token=token)


def token_label(secret: str) -> str:
    """Who ``secret`` is, to say so when the server starts; ``ToolRefused`` (401) if the API
    would refuse it."""
    return answered(lambda: _label(token_looked_up(secret)))["token"]


def _label(caller: Caller) -> dict[str, Any]:
    token = caller.token
    assert token is not None
    return {"token": f"{token.label} ({token.role} in workspace {token.workspace.slug!r})"}


def answered(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one tool call as a request runs: on a connection checked before and after (as
    ``request_started`` and ``request_finished`` do), its refusal mapped by the API's
    exception handler into ``ToolRefused``."""
    close_old_connections()
    try:
        return work()
    except ToolRefused:
        raise
    except Exception as exc:  # every refusal is answered, as the API answers it
        raise refusal(exc) from None
    finally:
        close_old_connections()


def refusal(exc: Exception) -> ToolRefused:
    response = exception_handler(exc, {})
    if response is None:
        # What the API would answer with a 500: logged (no content, no token), answered plainly.
        logger.exception("An MCP tool call failed (%s).", type(exc).__name__)
        return ToolRefused(500, error_body("SERVER_ERROR", "The server failed this call."))
    body = dict(response.data)
    retry = response.headers.get("Retry-After")
    if retry is not None:
        body["retryAfter"] = int(retry)
    return ToolRefused(response.status_code, body)


def _bound(caller: Caller, workload: str | None, environment: str | None) -> tuple[str, str]:
    """The workload and environment a call names, or the token's binding where it names
    exactly one (400 naming the argument otherwise)."""
    token = caller.token
    assert token is not None
    missing = {}
    if workload is None:
        if len(token.bound_workloads) == 1:
            workload = str(token.bound_workloads[0])
        else:
            missing["workload"] = "Name the workload (its id): the token is not bound to one."
    if environment is None:
        if len(token.bound_environments) == 1:
            environment = str(token.bound_environments[0])
        else:
            missing["environment"] = "Name the environment: the token is not bound to one."
    if missing:
        raise ValidationFailed(missing)
    assert workload is not None and environment is not None
    return workload, environment


# --- the tools --------------------------------------------------------------------------------


def recall(
    secret: str | None,
    *,
    actor: str,
    query: str,
    workload: str | None = None,
    environment: str | None = None,
    top_k: int | None = None,
    override: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``POST /v1/memory/actors/{actor}/recall``: the memories that may enter the context."""

    def work() -> dict[str, Any]:
        caller = token_caller(secret, recall=True)
        workspace, actor_id = recall_target(caller, None, actor)
        workload_id, env = _bound(caller, workload, environment)
        body: dict[str, Any] = {"workloadId": workload_id, "environment": env, "query": query}
        if top_k is not None:
            body["topK"] = top_k
        if override is not None:
            body["policyOverride"] = override
        serializer = RecallRequestSerializer(data=body)
        serializer.is_valid(raise_exception=True)
        recorded = recall_recorded(caller, workspace, actor_id, serializer.validated_data, None)
        return recall_answer(recorded)

    return answered(work)


def recall_answer(recorded: Recorded) -> dict[str, Any]:
    """The envelope in short: its ids, digest and event, each memory that entered (in rank
    order) and the ids of those that did not fit whole."""
    envelope = recorded.envelope
    diagnostics: Any = envelope["diagnostics"]
    return {
        "envelopeId": envelope["envelopeId"],
        "eventId": recorded.event.pk,
        "digest": envelope["digest"],
        "effectivePolicyHash": envelope["effectivePolicyHash"],
        "memories": [
            {
                "id": entry["id"],
                "content": entry["content"],
                "memoryType": entry["memoryType"],
                "sourceKind": entry["sourceKind"],
                "confirmationStatus": entry["confirmationStatus"],
                "segmentKind": entry["segmentKind"],
                "score": entry["score"],
            }
            for entry in envelope["entries"]
        ],
        "truncatedIds": [ref["id"] for ref in envelope["truncatedRefs"]],
        "counts": diagnostics["counts"],
        "usedTokens": envelope["budget"]["usedTokens"],
        "totalTokenBudget": envelope["budget"]["totalTokenBudget"],
        "warnings": list(diagnostics.get("warnings", [])),
    }


def remember(
    secret: str | None,
    *,
    actor: str,
    content: str,
    memory_type: str,
    source_kind: str,
    confirmation_status: str | None = None,
    confidence: float | None = None,
    sensitivity: str | None = None,
    expires_at: str | None = None,
) -> dict[str, Any]:
    """``POST /v1/memory/actors/{actor}/memories`` with one new memory."""
    body: dict[str, Any] = {
        "content": content,
        "memoryType": memory_type,
        "sourceKind": source_kind,
    }
    optional = {
        "confirmationStatus": confirmation_status,
        "confidence": confidence,
        "sensitivity": sensitivity,
        "expiresAt": expires_at,
    }
    body.update({key: value for key, value in optional.items() if value is not None})

    def work() -> dict[str, Any]:
        rows = memories_write(token_caller(secret), None, actor, lambda: body)
        return {"memory": MemorySerializer(rows[0]).data}

    return answered(work)


def assemble_context(
    secret: str | None,
    *,
    message: str,
    session: str | None = None,
    actor: str | None = None,
    workload: str | None = None,
    environment: str | None = None,
    system_prompt: str | None = None,
    external_id: str | None = None,
    before: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``POST /v1/sessions/{session}/turns`` with ``before`` (the assistant's last reply, tool
    results) and the user's ``message``; without ``session``, ``POST /v1/sessions`` first,
    for ``actor`` with the workload in the environment. Two calls then, each counted."""
    started: dict[str, str] = {}

    def start() -> str:
        caller = token_caller(secret)

        def body() -> dict[str, Any]:  # read after the role check, as the endpoint reads it
            workload_id, env = _bound(caller, workload, environment)
            if actor is None:
                raise ValidationFailed({"actor": "Name the actor (kind:name), or a session."})
            fields = {"actorId": actor, "workloadId": workload_id, "environment": env}
            if system_prompt is not None:
                fields["systemPrompt"] = system_prompt
            if external_id is not None:
                fields["externalId"] = external_id
            return fields

        started["sessionId"] = str(session_start(caller, None, body).pk)
        return started["sessionId"]

    def post() -> dict[str, Any]:
        session_id = session if session is not None else start()
        messages = [*(before or []), {"role": "user", "content": message}]
        posted = session_turns_add(token_caller(secret), session_id, lambda: {"messages": messages})
        answer = turns_answer(posted)
        return {
            "sessionId": answer["sessionId"],
            "sessionStarted": bool(started),
            "turn": answer["turn"],
            "messages": answer["prompt"]["messages"],
            "recall": answer["recall"],
            "budgetStatus": answer["budgetStatus"],
        }

    try:
        return answered(post)
    except ToolRefused as refused:
        if started:
            refused.body["sessionId"] = started["sessionId"]
        raise
