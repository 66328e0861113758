"""The MCP server (``manage.py mcp``) through the MCP SDK's own client, over stdio and over
streamable HTTP, on the test database: it lists its tools; ``recall`` answers the envelope's
ids, digest and event, and the event is recorded as the API records it; ``remember`` writes
a memory; ``assemble_context`` starts a session and posts the turn; a bound agent token is
refused outside its binding, and a revoked one on its next call, with nothing recorded."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from audit.models import AuditEvent
from chat.models import Session
from policies.services import workload_create
from portal.models import ApiToken, Role
from recall.models import MemoryRecord
from team.services import api_token_create, api_token_revoke
from tests.helpers import run_async
from tests.recall import factories
from tests.worker_support import _database_url, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"recall", "remember", "assemble_context"}


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a server process: the test database, as the application role."""
    env = {k: v for k, v in os.environ.items() if k not in ("CRP_TOKEN",)}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return {**env, "DATABASE_URL": _database_url(), "DATABASE_OWNER_URL": "", **extra}


Talk = Callable[[ClientSession], Awaitable[Any]]


def over_stdio(token: str, talk: Talk) -> Any:
    """``talk`` to ``manage.py mcp`` started over stdio with ``token``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "manage.py"), "mcp"],
        env=server_env(CRP_TOKEN=token),
        cwd=str(ROOT),
    )

    async def run() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await talk(session)

    return run_async(run())


@pytest.fixture
def http_server(workspace_a: Any) -> Iterator[str]:
    """``manage.py mcp --http PORT`` with no token of its own: its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "mcp", "--http", str(port)],
        env=server_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip

    def up() -> bool:
        if process.poll() is not None:
            pytest.fail(f"manage.py mcp --http exited: {process.stderr.read().decode()}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(up, timeout=60, what="the MCP server to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)


def over_http(url: str, token: str, talk: Talk) -> Any:
    async def run() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = create_mcp_http_client(headers=headers)
        async with (
            http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await talk(session)

    return run_async(run())


@pytest.fixture
def bound(workspace_a: Any, workload_a: Any) -> str:
    """An agent token bound to workload A in prod, and a memory of user:ada to recall."""
    factories.memories(workspace_a, {"content": "Ada prefers release summaries as bullets"})
    _, raw = api_token_create(
        workspace=workspace_a, name="support-agent", role=Role.AGENT,
        workloads=[workload_a.id], environments=["prod"],
    )  # fmt: skip
    return raw


def recall_args(**extra: Any) -> dict[str, Any]:
    return {"actor": "user:ada", "query": "release summary preferences", **extra}


class McpServerTests:
    def test_over_stdio_it_lists_its_tools_and_recall_is_recorded(self, bound, workload_a):
        async def talk(session: ClientSession) -> Any:
            tools = await session.list_tools()
            return tools, await session.call_tool("recall", recall_args())

        tools, result = over_stdio(bound, talk)

        assert {tool.name for tool in tools.tools} == TOOLS
        assert not result.isError, result.content
        answer = result.structuredContent
        assert [m["content"] for m in answer["memories"]] == [
            "Ada prefers release summaries as bullets"
        ]
        event = AuditEvent.objects.get(pk=answer["eventId"])
        assert event.type == "context.assembled" and event.author == "token:support-agent"
        assert event.payload["envelopeId"] == answer["envelopeId"]
        assert event.payload["digest"] == answer["digest"]
        assert event.workload_id == workload_a.id and event.environment == "prod"

    def test_over_stdio_a_bound_token_is_refused_outside_its_binding(
        self, bound, workspace_a, workload_a
    ):
        other = workload_create(workspace=workspace_a, name="other-bot", author="system:test")

        async def talk(session: ClientSession) -> Any:
            elsewhere = await session.call_tool("recall", recall_args(workload=str(other.id)))
            staging = await session.call_tool("recall", recall_args(environment="staging"))
            return elsewhere, staging

        elsewhere, staging = over_stdio(bound, talk)

        assert elsewhere.isError and staging.isError
        assert elsewhere.structuredContent["error"]["code"] == "OUTSIDE_TOKEN_BINDING"
        assert elsewhere.structuredContent["error"]["details"]["outside"] == ["workload"]
        assert staging.structuredContent["error"]["details"]["outside"] == ["environment"]
        assert not AuditEvent.objects.filter(type="context.assembled").exists()

    def test_over_stdio_remember_writes_a_memory_the_agent_may_recall(self, bound):
        async def talk(session: ClientSession) -> Any:
            written = await session.call_tool(
                "remember",
                {"actor": "user:bob", "content": "Bob works in Lisbon", "memory_type": "fact",
                 "source_kind": "user"},
            )  # fmt: skip
            recalled = await session.call_tool("recall", recall_args(actor="user:bob"))
            return written, recalled

        written, recalled = over_stdio(bound, talk)

        assert not written.isError, written.content
        memory = MemoryRecord.objects.get(pk=written.structuredContent["memory"]["id"])
        assert (memory.content, memory.actor.external_id) == ("Bob works in Lisbon", "user:bob")
        assert [m["id"] for m in recalled.structuredContent["memories"]] == [str(memory.pk)]

    def test_it_refuses_to_start_with_a_revoked_token(self, bound):
        token = ApiToken.objects.get(name="support-agent")
        api_token_revoke(token=token, author="user:olga")

        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "mcp"],
            env=server_env(CRP_TOKEN=bound), cwd=ROOT, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip

        assert done.returncode != 0
        assert "Invalid or revoked API token." in done.stderr
        assert done.stdout == ""

    def test_over_http_assemble_context_starts_a_session_and_posts_the_turn(
        self, http_server, bound, workload_a
    ):
        async def talk(session: ClientSession) -> Any:
            first = await session.call_tool(
                "assemble_context",
                {"message": "release summary please", "actor": "user:ada",
                 "system_prompt": "You are a support assistant."},
            )  # fmt: skip
            second = await session.call_tool(
                "assemble_context",
                {"message": "and the next one?", "session": first.structuredContent["sessionId"],
                 "before": [{"role": "assistant", "content": "Here it is."}]},
            )  # fmt: skip
            return first, second

        first, second = over_http(http_server, bound, talk)

        assert not first.isError, first.content
        answer = first.structuredContent
        assert answer["sessionStarted"] and answer["turn"] == 1
        assert answer["messages"][-1] == {"role": "user", "content": "release summary please"}
        event = AuditEvent.objects.get(pk=answer["recall"]["eventId"])
        assert event.payload["envelopeId"] == answer["recall"]["envelopeId"]
        assert event.payload["digest"] == answer["recall"]["digest"]
        assert not second.structuredContent["sessionStarted"]
        assert second.structuredContent["turn"] == 3  # the assistant's reply was turn 2
        session = Session.objects.get(pk=answer["sessionId"])
        assert (session.turn_count, session.workload_id, session.environment) == (
            3, workload_a.id, "prod"
        )  # fmt: skip

    def test_over_http_each_request_acts_with_its_own_token(self, http_server, bound, workspace_a):
        token = ApiToken.objects.get(name="support-agent")

        async def talk(session: ClientSession) -> Any:
            tools = await session.list_tools()
            before = await session.call_tool("recall", recall_args())
            await asyncio.to_thread(api_token_revoke, token=token, author="user:olga")
            after = await session.call_tool("recall", recall_args())
            return tools, before, after

        tools, before, after = over_http(http_server, bound, talk)

        assert {tool.name for tool in tools.tools} == TOOLS
        assert not before.isError
        assert after.isError
        assert after.structuredContent["error"]["code"] == "AUTHENTICATION_FAILED"
        assert AuditEvent.objects.filter(type="context.assembled").count() == 1

    def test_over_http_a_call_without_a_token_is_refused(self, http_server):
        async def talk(session: ClientSession) -> Any:
            return await session.call_tool("recall", recall_args(workload="x", environment="prod"))

        result = over_http(http_server, "", talk)

        assert result.isError
        assert result.structuredContent["error"]["code"] == "NOT_AUTHENTICATED"
