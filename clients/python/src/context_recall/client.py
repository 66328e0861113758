"""``Client`` (sync) and ``AsyncClient``: one method per call function of ``agent_calls``
and ``platform_calls``, sent with the token, retried on 429 and 503, errors raised as
``errors``' classes.

Retries: a 429 (``THROTTLED``) or a 503 (``DATABASE_UNAVAILABLE``: nothing was read or
saved) is sent again, up to ``Retry.attempts`` times, after the ``Retry-After`` the server
gave, or else after an exponential backoff with jitter. A wait longer than
``Retry.max_wait`` is not waited for: the error is raised with its ``retry_after``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from context_recall import agent_calls as agent
from context_recall import platform_calls as platform
from context_recall.errors import error_from, retry_after
from context_recall.models import Page
from context_recall.operations import Call

P = ParamSpec("P")
T = TypeVar("T")
Item = TypeVar("Item")

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
RETRIED = frozenset({429, 503})


@dataclass(frozen=True)
class Retry:
    """When a 429 or 503 is sent again: at most ``attempts`` more times; after the server's
    ``Retry-After`` if it gave one, else ``backoff * 2**n`` seconds (n = 0, 1, ...) with up
    to a quarter more of jitter, never more than ``max_backoff``. A ``Retry-After`` over
    ``max_wait`` is raised at once rather than waited for."""

    attempts: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_wait: float = 60.0

    def delay(self, attempt: int, response: httpx.Response) -> float | None:
        """Seconds to wait before sending again after ``response`` (the ``attempt``-th
        retry, from 0); None: do not send it again."""
        if response.status_code not in RETRIED or attempt >= self.attempts:
            return None
        asked = retry_after(response)
        if asked is not None:
            return asked if asked <= self.max_wait else None
        wait = min(self.max_backoff, self.backoff * 2.0**attempt)
        return wait * (1 + random.random() / 4)


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get("CRP_TOKEN")
    headers = {"Accept": "application/json", "User-Agent": "context-recall-client/0.1"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _base_url(base_url: str | None) -> str:
    return base_url or os.environ.get("CRP_BASE_URL") or DEFAULT_BASE_URL


def _request(call: Call[Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"params": call.params, "headers": call.headers}
    if call.body is not None:
        kwargs["json"] = call.body
    return {"method": call.operation.method, "url": call.path, **kwargs}


def _answer(response: httpx.Response) -> Any:
    if response.is_error:
        raise error_from(response)
    if response.status_code == 204 or not response.content:
        return None
    return response.json()


# --- the sync client ---------------------------------------------------------------------------


def _sync(build: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))

    functools.update_wrapper(method, build)
    return method


class Client:
    """The API over HTTP, one call at a time.

    ``Client(base_url="https://recall.example.org", token="crp_...")``; without them, the
    environment's ``CRP_BASE_URL`` and ``CRP_TOKEN``. Use it as a context manager, or
    ``close()`` it. ``http`` replaces the ``httpx.Client`` it would make (its own base URL,
    transport or timeouts); ``sleep`` how it waits between retries.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: Retry | None = None,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.retry = retry or Retry()
        self._sleep = sleep
        self.http = http or httpx.Client(base_url=_base_url(base_url), timeout=timeout)
        self.http.headers.update(_headers(token))

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def send(self, call: Call[T]) -> T:
        """Send a call built by a call function, retrying a 429 or 503 (``Retry``)."""
        attempt = 0
        while True:
            response = self.http.request(**_request(call))
            wait = self.retry.delay(attempt, response)
            if wait is None:
                answer: T = _answer(response)
                return answer
            attempt += 1
            self._sleep(wait)

    def each(
        self, method: Callable[P, Page[Item]], *args: P.args, **kwargs: P.kwargs
    ) -> Iterator[Item]:
        """Every item of a list method's pages, in order: ``for event in
        client.each(client.list_audit_events, type="context.assembled")``."""
        page = 1
        while True:
            answer = method(*args, **{**kwargs, "page": page})  # type: ignore[arg-type]
            yield from answer["results"]
            if not answer["next"]:
                return
            page += 1

    # What an agent does.
    recall = _sync(agent.recall)
    write_memory = _sync(agent.write_memory)
    write_memories = _sync(agent.write_memories)
    list_memories = _sync(agent.list_memories)
    get_memory = _sync(agent.get_memory)
    update_memory = _sync(agent.update_memory)
    delete_memory = _sync(agent.delete_memory)
    suppress_memory = _sync(agent.suppress_memory)
    restore_memory = _sync(agent.restore_memory)
    reactivate_memory = _sync(agent.reactivate_memory)
    memory_injections = _sync(agent.memory_injections)
    memory_lifecycle = _sync(agent.memory_lifecycle)
    erase_actor = _sync(agent.erase_actor)
    start_session = _sync(agent.start_session)
    list_sessions = _sync(agent.list_sessions)
    get_session = _sync(agent.get_session)
    end_session = _sync(agent.end_session)
    post_turns = _sync(agent.post_turns)
    get_turn = _sync(agent.get_turn)
    get_turn_prompt = _sync(agent.get_turn_prompt)
    compact_session = _sync(agent.compact_session)
    get_compaction_run = _sync(agent.get_compaction_run)
    # What a platform does.
    list_workspaces = _sync(platform.list_workspaces)
    create_workspace = _sync(platform.create_workspace)
    get_workspace = _sync(platform.get_workspace)
    update_workspace = _sync(platform.update_workspace)
    list_workloads = _sync(platform.list_workloads)
    create_workload = _sync(platform.create_workload)
    get_workload = _sync(platform.get_workload)
    update_workload = _sync(platform.update_workload)
    delete_workload = _sync(platform.delete_workload)
    get_workspace_policy = _sync(platform.get_workspace_policy)
    put_workspace_policy = _sync(platform.put_workspace_policy)
    list_workspace_policy_versions = _sync(platform.list_workspace_policy_versions)
    get_workspace_policy_version = _sync(platform.get_workspace_policy_version)
    get_workload_policy = _sync(platform.get_workload_policy)
    put_workload_policy = _sync(platform.put_workload_policy)
    list_workload_policy_versions = _sync(platform.list_workload_policy_versions)
    get_effective_policy = _sync(platform.get_effective_policy)
    get_policy_axes = _sync(platform.get_policy_axes)
    get_layout_config = _sync(platform.get_layout_config)
    put_layout_config = _sync(platform.put_layout_config)
    list_layout_config_versions = _sync(platform.list_layout_config_versions)
    list_audit_events = _sync(platform.list_audit_events)
    get_audit_event = _sync(platform.get_audit_event)
    verify_audit_chain = _sync(platform.verify_audit_chain)
    replay_event = _sync(platform.replay_event)
    start_sweep = _sync(platform.start_sweep)
    list_runs = _sync(platform.list_runs)
    get_run = _sync(platform.get_run)
    list_run_items = _sync(platform.list_run_items)
    cancel_run = _sync(platform.cancel_run)
    revert_run = _sync(platform.revert_run)
    restore_run = _sync(platform.restore_run)
    get_run_manifest = _sync(platform.get_run_manifest)
    get_lifecycle_settings = _sync(platform.get_lifecycle_settings)
    put_lifecycle_settings = _sync(platform.put_lifecycle_settings)
    update_lifecycle_settings = _sync(platform.update_lifecycle_settings)
    list_lifecycle_settings_versions = _sync(platform.list_lifecycle_settings_versions)
    list_tokens = _sync(platform.list_tokens)
    issue_token = _sync(platform.issue_token)
    get_token = _sync(platform.get_token)
    rotate_token = _sync(platform.rotate_token)
    revoke_token = _sync(platform.revoke_token)
    list_members = _sync(platform.list_members)
    add_member = _sync(platform.add_member)
    change_member_role = _sync(platform.change_member_role)
    remove_member = _sync(platform.remove_member)


# --- the async client --------------------------------------------------------------------------


def _async(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))

    functools.update_wrapper(method, build)
    return method


class AsyncClient:
    """``Client``'s twin for asyncio: the same methods, each awaited; ``async with``."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: Retry | None = None,
        http: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.retry = retry or Retry()
        self._sleep = sleep
        self.http = http or httpx.AsyncClient(base_url=_base_url(base_url), timeout=timeout)
        self.http.headers.update(_headers(token))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send a call built by a call function, retrying a 429 or 503 (``Retry``)."""
        attempt = 0
        while True:
            response = await self.http.request(**_request(call))
            wait = self.retry.delay(attempt, response)
            if wait is None:
                answer: T = _answer(response)
                return answer
            attempt += 1
            await self._sleep(wait)

    async def each(
        self, method: Callable[P, Awaitable[Page[Item]]], *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[Item]:
        """Every item of a list method's pages, in order (``async for``)."""
        page = 1
        while True:
            answer = await method(*args, **{**kwargs, "page": page})  # type: ignore[arg-type]
            for item in answer["results"]:
                yield item
            if not answer["next"]:
                return
            page += 1

    recall = _async(agent.recall)
    write_memory = _async(agent.write_memory)
    write_memories = _async(agent.write_memories)
    list_memories = _async(agent.list_memories)
    get_memory = _async(agent.get_memory)
    update_memory = _async(agent.update_memory)
    delete_memory = _async(agent.delete_memory)
    suppress_memory = _async(agent.suppress_memory)
    restore_memory = _async(agent.restore_memory)
    reactivate_memory = _async(agent.reactivate_memory)
    memory_injections = _async(agent.memory_injections)
    memory_lifecycle = _async(agent.memory_lifecycle)
    erase_actor = _async(agent.erase_actor)
    start_session = _async(agent.start_session)
    list_sessions = _async(agent.list_sessions)
    get_session = _async(agent.get_session)
    end_session = _async(agent.end_session)
    post_turns = _async(agent.post_turns)
    get_turn = _async(agent.get_turn)
    get_turn_prompt = _async(agent.get_turn_prompt)
    compact_session = _async(agent.compact_session)
    get_compaction_run = _async(agent.get_compaction_run)
    list_workspaces = _async(platform.list_workspaces)
    create_workspace = _async(platform.create_workspace)
    get_workspace = _async(platform.get_workspace)
    update_workspace = _async(platform.update_workspace)
    list_workloads = _async(platform.list_workloads)
    create_workload = _async(platform.create_workload)
    get_workload = _async(platform.get_workload)
    update_workload = _async(platform.update_workload)
    delete_workload = _async(platform.delete_workload)
    get_workspace_policy = _async(platform.get_workspace_policy)
    put_workspace_policy = _async(platform.put_workspace_policy)
    list_workspace_policy_versions = _async(platform.list_workspace_policy_versions)
    get_workspace_policy_version = _async(platform.get_workspace_policy_version)
    get_workload_policy = _async(platform.get_workload_policy)
    put_workload_policy = _async(platform.put_workload_policy)
    list_workload_policy_versions = _async(platform.list_workload_policy_versions)
    get_effective_policy = _async(platform.get_effective_policy)
    get_policy_axes = _async(platform.get_policy_axes)
    get_layout_config = _async(platform.get_layout_config)
    put_layout_config = _async(platform.put_layout_config)
    list_layout_config_versions = _async(platform.list_layout_config_versions)
    list_audit_events = _async(platform.list_audit_events)
    get_audit_event = _async(platform.get_audit_event)
    verify_audit_chain = _async(platform.verify_audit_chain)
    replay_event = _async(platform.replay_event)
    start_sweep = _async(platform.start_sweep)
    list_runs = _async(platform.list_runs)
    get_run = _async(platform.get_run)
    list_run_items = _async(platform.list_run_items)
    cancel_run = _async(platform.cancel_run)
    revert_run = _async(platform.revert_run)
    restore_run = _async(platform.restore_run)
    get_run_manifest = _async(platform.get_run_manifest)
    get_lifecycle_settings = _async(platform.get_lifecycle_settings)
    put_lifecycle_settings = _async(platform.put_lifecycle_settings)
    update_lifecycle_settings = _async(platform.update_lifecycle_settings)
    list_lifecycle_settings_versions = _async(platform.list_lifecycle_settings_versions)
    list_tokens = _async(platform.list_tokens)
    issue_token = _async(platform.issue_token)
    get_token = _async(platform.get_token)
    rotate_token = _async(platform.rotate_token)
    revoke_token = _async(platform.revoke_token)
    list_members = _async(platform.list_members)
    add_member = _async(platform.add_member)
    change_member_role = _async(platform.change_member_role)
    remove_member = _async(platform.remove_member)
