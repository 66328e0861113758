"""The Python client (clients/python) against the real server, started by the test suite
(pytest-django's ``live_server``): an agent writes memories, recalls and posts turns; a
save on a stale ``If-Match`` is a ``VersionConflictError``; a 429 is retried after the
server's ``Retry-After``; each error family raises its class. The retries of a 503, which
the server answers only while its database is down, are shown on a stand-in transport."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from context_recall import (
    ApiError,
    AsyncClient,
    AuthError,
    Client,
    ConflictError,
    NotFoundError,
    OutsideBindingError,
    PermissionDeniedError,
    RateLimitedError,
    Retry,
    ServerError,
    ValidationError,
    VersionConflictError,
)
from context_recall.models import TurnRecall

from audit.models import AuditEvent
from policies.services import workload_create
from portal import throttling
from portal.models import Role
from team.services import api_token_create
from tests.chat.helpers import layout
from tests.helpers import run_async

MEMORY = {"content": "Ada prefers release summaries in bullet points", "memoryType": "preference",
          "sourceKind": "user"}  # fmt: skip
QUERY = "release summary preferences"


@pytest.fixture
def bound_agent(workspace_a: Any, workload_a: Any) -> str:
    """The secret of an agent token bound to workload A in prod."""
    _, raw = api_token_create(
        workspace=workspace_a, name="support-agent", role=Role.AGENT,
        workloads=[workload_a.id], environments=["prod"],
    )  # fmt: skip
    return raw


class PythonClientTests:
    def test_an_agent_writes_a_memory_and_recalls_it(self, live_server, bound_agent, workload_a):
        with Client(live_server.url, token=bound_agent) as client:
            written = client.write_memory("user:ada", MEMORY)
            envelope = client.recall(
                "user:ada", workload_id=workload_a.id, environment="prod", query=QUERY, top_k=5
            )

        assert [entry["id"] for entry in envelope["entries"]] == [written["id"]]
        assert envelope["entries"][0]["content"] == MEMORY["content"]
        event = AuditEvent.objects.get(type="context.assembled")
        assert event.payload["envelopeId"] == envelope["envelopeId"]
        assert event.payload["digest"] == envelope["digest"]
        assert event.author == "token:support-agent"

    def test_a_batch_of_memories_is_written_in_one_call(self, live_server, agent, editor):
        with Client(live_server.url, token=agent.token) as client:
            batch = client.write_memories("user:ada", [MEMORY, {**MEMORY, "content": "Tea"}])
        with Client(live_server.url, token=editor.token) as client:
            listed = client.list_memories("user:ada", page_size=1)

        assert batch["count"] == 2
        assert listed["count"] == 2 and len(listed["results"]) == 1

    def test_a_save_on_a_stale_if_match_is_a_version_conflict(self, live_server, operator):
        with Client(live_server.url, token=operator.token) as client:
            floor = client.get_workspace_policy("team-a")
            saved = client.put_workspace_policy(
                "team-a",
                {**floor["policy"], "totalTokenBudget": 3000},
                comment="Trim the budget",
                relaxable_axes=floor["relaxableAxes"],
                if_match=floor["version"],
            )
            with pytest.raises(VersionConflictError) as raised:
                client.put_workspace_policy(
                    "team-a",
                    {**floor["policy"], "totalTokenBudget": 2500},
                    comment="Trim it more",
                    relaxable_axes=floor["relaxableAxes"],
                    if_match=floor["version"],
                )

        assert saved["version"] == floor["version"] + 1
        conflict = raised.value
        assert (conflict.status, conflict.code) == (409, "VERSION_CONFLICT")
        assert conflict.current_version == saved["version"]
        assert isinstance(conflict, ConflictError) and isinstance(conflict, ApiError)

    def test_a_429_is_sent_again_after_the_server_s_retry_after(
        self, live_server, workspace_a, workload_a
    ):
        _, raw = api_token_create(
            workspace=workspace_a, name="slow-agent", role=Role.AGENT, api_rate_per_minute=1
        )
        waited: list[float] = []

        def sleep(seconds: float) -> None:
            # The server's window ends (its counts, kept in this process, start afresh)
            # instead of the test waiting up to a minute for it.
            waited.append(seconds)
            throttling.reset()

        with Client(live_server.url, token=raw, sleep=sleep) as client:
            client.write_memory("user:ada", MEMORY)
            client.write_memory("user:ada", MEMORY)

        assert len(waited) == 1 and 1 <= waited[0] <= 60

    def test_a_429_past_the_retries_raises_rate_limited_with_retry_after(
        self, live_server, workspace_a
    ):
        _, raw = api_token_create(
            workspace=workspace_a, name="slow-agent", role=Role.AGENT, api_rate_per_minute=1
        )

        with Client(live_server.url, token=raw, retry=Retry(attempts=0)) as client:
            client.write_memory("user:ada", MEMORY)
            with pytest.raises(RateLimitedError) as raised:
                client.write_memory("user:ada", MEMORY)

        assert (raised.value.status, raised.value.code) == (429, "THROTTLED")
        assert raised.value.retry_after is not None and raised.value.retry_after >= 1

    def test_an_agent_keeps_a_session_through_the_async_client(
        self, live_server, bound_agent, workload_a
    ):
        async def converse() -> tuple[Any, Any, Any, ConflictError]:
            async with AsyncClient(live_server.url, token=bound_agent) as client:
                await client.write_memory("user:ada", MEMORY)
                session = await client.start_session(
                    actor_id="user:ada", workload_id=workload_a.id, environment="prod",
                    system_prompt="You are a support assistant.",
                )  # fmt: skip
                answer = await client.post_turns(
                    session["id"], [{"role": "user", "content": QUERY}]
                )
                ended = await client.end_session(session["id"])
                try:
                    await client.post_turns(session["id"], [{"role": "user", "content": "hi"}])
                except ConflictError as refused:
                    return session, answer, ended, refused
                raise AssertionError("a turn of an ended session was accepted")

        session, answer, ended, refused = run_async(converse())

        assert answer["turn"] == 1 and answer["prompt"] is not None
        assert answer["prompt"]["messages"][-1] == {"role": "user", "content": QUERY}
        recall = answer["recall"]
        assert recall is not None and set(TurnRecall.__annotations__) <= set(recall)
        event = AuditEvent.objects.get(pk=recall["eventId"])
        assert event.payload["envelopeId"] == recall["envelopeId"]
        assert (ended["status"], ended["turnCount"]) == ("ended", 1)
        assert refused.code == "SESSION_ENDED"
        assert session["workloadId"] == str(workload_a.id)

    def test_an_editor_compacts_a_session_and_reads_the_run(self, live_server, editor, workload_a):
        with Client(live_server.url, token=editor.token) as client:
            session = client.start_session(
                actor_id="user:ada", workload_id=workload_a.id, environment="prod"
            )
            client.post_turns(session["id"], [{"role": "user", "content": QUERY}])
            with pytest.raises(ValidationError) as disabled:
                client.compact_session(session["id"])
            layout(workload_a, {"compaction": {"enabled": True}})
            run = client.compact_session(session["id"])
            read = client.get_compaction_run(run["id"])

        assert disabled.value.code == "COMPACTION_DISABLED"
        assert (run["trigger"], run["status"], run["sessionId"]) == (
            "manual", "succeeded", session["id"],
        )  # fmt: skip
        assert read == run

    def test_each_error_family_raises_its_class(
        self, live_server, bound_agent, workspace_a, workload_a
    ):
        other = workload_create(workspace=workspace_a, name="other-bot", author="system:test")
        with Client(live_server.url, token=bound_agent) as client:
            with pytest.raises(OutsideBindingError) as outside:
                client.recall("user:ada", workload_id=other.id, environment="prod", query=QUERY)
            with pytest.raises(PermissionDeniedError) as denied:
                client.get_workspace_policy("team-a")
            with pytest.raises(ValidationError) as invalid:
                client.recall("user:ada", workload_id=workload_a.id, environment="prod", query="")
            with pytest.raises(NotFoundError):
                client.get_session(10**12)
        with Client(live_server.url, token="crp_" + "x" * 40) as stranger:
            with pytest.raises(AuthError) as unknown:
                stranger.recall(
                    "user:ada", workload_id=workload_a.id, environment="prod", query=QUERY
                )

        assert outside.value.status == 403 and outside.value.details["outside"] == ["workload"]
        assert denied.value.code == "PERMISSION_DENIED"
        assert invalid.value.status == 400 and "query" in invalid.value.details["fields"]
        assert unknown.value.status == 401
        assert not AuditEvent.objects.filter(type="context.assembled").exists()

    def test_the_audit_trail_is_filtered_by_several_types_given_as_a_list(
        self, live_server, editor, workload_a
    ):
        with Client(live_server.url, token=editor.token) as client:
            client.write_memory("user:ada", MEMORY)
            client.start_session(actor_id="user:ada", workload_id=workload_a.id, environment="prod")
            client.recall("user:ada", workload_id=workload_a.id, environment="prod", query=QUERY)
            both = client.list_audit_events(type=["context.assembled", "session.started"])
            one = client.list_audit_events(type=["session.started"])

        assert sorted(e["type"] for e in both["results"]) == [
            "context.assembled", "session.started"
        ]  # fmt: skip
        assert [e["type"] for e in one["results"]] == ["session.started"]

    def test_each_walks_every_page(self, live_server, editor):
        with Client(live_server.url, token=editor.token) as client:
            client.write_memories("user:ada", [{**MEMORY, "content": f"m{i}"} for i in range(5)])
            contents = [
                m["content"] for m in client.each(client.list_memories, "user:ada", page_size=2)
            ]

        assert sorted(contents) == [f"m{i}" for i in range(5)]


def answers(*responses: httpx.Response) -> httpx.MockTransport:
    """A stand-in server answering ``responses`` in turn."""
    queue = list(responses)
    return httpx.MockTransport(lambda request: queue.pop(0))


class PythonClientRetryTests:
    def test_a_503_is_sent_again_after_its_retry_after(self):
        unavailable = {"error": {"code": "DATABASE_UNAVAILABLE", "message": "Down.", "details": {}}}
        transport = answers(
            httpx.Response(503, json=unavailable, headers={"Retry-After": "5"}),
            httpx.Response(200, json={"ok": True, "checked": 3, "firstBrokenId": None,
                                      "reason": ""}),
        )  # fmt: skip
        waited: list[float] = []
        http = httpx.Client(base_url="http://server", transport=transport)

        with Client(http=http, token="crp_t", sleep=waited.append) as client:
            verdict = client.verify_audit_chain()

        assert verdict["ok"] and waited == [5.0]

    def test_without_retry_after_it_backs_off_exponentially_then_raises(self):
        transport = answers(*[httpx.Response(503, text="<html>proxy</html>")] * 4)
        waited: list[float] = []
        http = httpx.Client(base_url="http://server", transport=transport)

        with Client(http=http, sleep=waited.append, retry=Retry(attempts=3, backoff=1)) as client:
            with pytest.raises(ServerError) as raised:
                client.get_workspace("team-a")

        assert [int(w) for w in waited] == [1, 2, 4]
        assert (raised.value.status, raised.value.code) == (503, "HTTP_503")

    def test_a_retry_after_over_the_longest_wait_is_raised_at_once(self):
        throttled = {"error": {"code": "THROTTLED", "message": "Slow down.", "details": {}}}
        transport = answers(httpx.Response(429, json=throttled, headers={"Retry-After": "600"}))
        http = httpx.Client(base_url="http://server", transport=transport)

        with Client(http=http, sleep=pytest.fail) as client:
            with pytest.raises(RateLimitedError) as raised:
                client.get_workspace("team-a")

        assert raised.value.retry_after == 600

    def test_the_async_client_retries_too(self):
        transport = answers(
            httpx.Response(429, headers={"Retry-After": "2"}),
            httpx.Response(204),
        )
        waited: list[float] = []

        async def sleep(seconds: float) -> None:
            waited.append(seconds)

        async def call() -> None:
            http = httpx.AsyncClient(base_url="http://server", transport=transport)
            async with AsyncClient(http=http, sleep=sleep) as client:
                assert await client.delete_memory(1) is None

        run_async(call())

        assert waited == [2.0]
