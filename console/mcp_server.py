"""The MCP server (the official Python SDK's FastMCP): the tools ``recall``, ``remember`` and
``assemble_context`` for an agent, each one done by ``console.agent_tools`` as the API does
it, with the agent's API token.

The token is the server's (``manage.py mcp --token``, or ``CRP_TOKEN``) or, over HTTP, the
one a request sends (``Authorization: Bearer crp_...``), which takes precedence: one HTTP
server may serve several agents, each under its own token. A tool's answer is JSON (as text
and as structured content); a refusal is the API's error body, ``isError`` set.

The tools run in one worker thread (``sync_to_async``, thread-sensitive), where Django's
database connection lives, never in the event loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from console import agent_tools

NAME = "context-recall"
INSTRUCTIONS = (
    "Governed long-term memory for this agent. Call `recall` (or `assemble_context` in a "
    "conversation) before answering, and use only the memories it returns: the workspace's "
    "policies decide what may enter your context. Call `remember` to keep a new fact, "
    "preference or decision about the actor. Each answer carries `envelopeId`, `digest` "
    "and `eventId`, which the audit trail records."
)

Actor = Annotated[str, Field(description='The actor whose memories these are, "kind:name", '
                              'such as "user:ada".')]  # fmt: skip
Workload = Annotated[
    str | None,
    Field(description="The workload's id (a UUID); omit it when the token is bound to one."),
]
Environment = Annotated[
    str | None,
    Field(description='The environment, such as "prod"; omit it when the token is bound to one.'),
]
MemoryType = Literal[
    "fact", "preference", "decision", "instruction", "episode", "summary", "insight", "entity"
]
SourceKind = Literal["user", "assistant", "tool", "retrieval", "operator", "system", "import"]


def bearer_token(ctx: Context[Any, Any, Any] | None, default: str | None) -> str | None:
    """The token of this call: the HTTP request's bearer token, else the server's."""
    request = getattr(ctx.request_context, "request", None) if ctx is not None else None
    headers = getattr(request, "headers", None)
    header = headers.get("authorization", "") if headers is not None else ""
    scheme, _, secret = header.partition(" ")
    if scheme.lower() == "bearer" and secret.strip():
        return secret.strip()
    return default


async def run_tool(
    tool: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any
) -> CallToolResult:
    """A tool of ``agent_tools``, run in Django's thread: its answer, or its refusal."""
    try:
        answer = await sync_to_async(tool, thread_sensitive=True)(*args, **kwargs)
    except agent_tools.ToolRefused as refused:
        text = json.dumps(refused.body, default=str)
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structuredContent=json.loads(text),
            isError=True,
        )
    text = json.dumps(answer, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structuredContent=json.loads(text)
    )


def build(*, token: str | None, host: str = "127.0.0.1", port: int = 8765) -> FastMCP[Any]:
    """The server, its tools acting with ``token`` (or, over HTTP, each request's)."""
    server = FastMCP(NAME, instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING")

    @server.tool(
        name="recall",
        description="The actor's memories that may enter your context for this query, ranked, "
        "within the token budget the workload's policy sets; recorded in the audit trail "
        "(envelopeId, digest, eventId).",
    )
    async def recall(
        actor: Actor,
        query: Annotated[str, Field(description="What the memories are for: the user's message.")],
        workload: Workload = None,
        environment: Environment = None,
        top_k: Annotated[
            int | None, Field(description="At most this many memories (default 10).")
        ] = None,
        override: Annotated[
            dict[str, Any] | None,
            Field(
                description="Policy axes this recall narrows, such as "
                '{"sensitivityCeiling": "internal"}.'
            ),
        ] = None,  # fmt: skip
        ctx: Context[Any, Any, Any] | None = None,
    ) -> CallToolResult:
        return await run_tool(
            agent_tools.recall,
            bearer_token(ctx, token),
            actor=actor,
            query=query,
            workload=workload,
            environment=environment,
            top_k=top_k,
            override=override,
        )

    @server.tool(
        name="remember",
        description="Keep a new memory of the actor: a fact, preference, decision, ... with "
        "where it came from (sourceKind). Recall returns it once the policies let it in.",
    )
    async def remember(
        actor: Actor,
        content: Annotated[str, Field(description="The memory, one self-contained sentence.")],
        memory_type: MemoryType,
        source_kind: Annotated[
            SourceKind, Field(description='Who said it: "user" for the user\'s own words.')
        ],
        confirmation_status: Annotated[
            str | None,
            Field(description='"user_confirmed", "observed", "inferred", ... (default unknown).'),
        ] = None,
        confidence: Annotated[float | None, Field(ge=0, le=1)] = None,
        sensitivity: Annotated[
            Literal["public", "internal", "confidential", "restricted"] | None,
            Field(description="Default internal."),
        ] = None,
        expires_at: Annotated[
            str | None, Field(description="When it stops being true (ISO 8601).")
        ] = None,
        ctx: Context[Any, Any, Any] | None = None,
    ) -> CallToolResult:
        return await run_tool(
            agent_tools.remember,
            bearer_token(ctx, token),
            actor=actor,
            content=content,
            memory_type=memory_type,
            source_kind=source_kind,
            confirmation_status=confirmation_status,
            confidence=confidence,
            sensitivity=sensitivity,
            expires_at=expires_at,
        )

    @server.tool(
        name="assemble_context",
        description="Post the user's message as a turn of a session (started first when no "
        "session is given) and get the prompt to send: the system message with the governed "
        "memories, the kept history, the message. Keep the sessionId for the next turn.",
    )
    async def assemble_context(
        message: Annotated[str, Field(description="The user's new message.")],
        session: Annotated[
            str | None, Field(description="The session's id, from an earlier answer.")
        ] = None,
        actor: Annotated[
            str | None, Field(description='To start a session: its actor, "kind:name".')
        ] = None,
        workload: Workload = None,
        environment: Environment = None,
        system_prompt: Annotated[
            str | None, Field(description="To start a session: the agent's system prompt.")
        ] = None,
        external_id: Annotated[
            str | None, Field(description="To start a session: your id for the conversation.")
        ] = None,
        before: Annotated[
            list[dict[str, str]] | None,
            Field(
                description="Messages to append first, in order: the assistant's last reply "
                'and tool results, as {"role": "assistant"|"tool", "content": "..."}.'
            ),
        ] = None,  # fmt: skip
        ctx: Context[Any, Any, Any] | None = None,
    ) -> CallToolResult:
        return await run_tool(
            agent_tools.assemble_context,
            bearer_token(ctx, token),
            message=message,
            session=session,
            actor=actor,
            workload=workload,
            environment=environment,
            system_prompt=system_prompt,
            external_id=external_id,
            before=before,
        )

    return server
