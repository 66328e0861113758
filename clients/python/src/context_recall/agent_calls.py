"""What an agent calls: recall, memories, sessions and turns (``operations`` registers
each; ``Client`` and ``AsyncClient`` send them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from context_recall import models as m
from context_recall.operations import PAGE, Call, Id, Operation
from context_recall.operations import call as _call
from context_recall.operations import operation as _operation
from context_recall.operations import pages as _pages

# --- recall ---------------------------------------------------------------------------------


class RecallRequest(TypedDict):
    workloadId: str
    environment: str
    query: str
    topK: NotRequired[int]
    policyOverride: NotRequired[m.PolicyDocument]


RECALL = _operation(
    "memory_actors_recall_create",
    "POST",
    "/v1/memory/actors/{actor_id}/recall",
    request=RecallRequest,
    response=m.Envelope,
    query=("workspace",),
)


def recall(
    actor_id: str,
    *,
    workload_id: Id,
    environment: str,
    query: str,
    top_k: int | None = None,
    policy_override: m.PolicyDocument | None = None,
    workspace: str | None = None,
) -> Call[m.Envelope]:
    """The governed context for ``actor_id`` (``"user:ada"``): the memories the workload's
    effective policy in ``environment`` lets in, ranked by similarity to ``query``, within
    the token budget, recorded as one ``context.assembled`` event. ``policy_override``
    narrows the policy for this call (or relaxes the axes the floor lets a request relax).
    An actor with no memory yet gets an empty envelope (warning ``actor_unknown``)."""
    body: RecallRequest = {
        "workloadId": str(workload_id),
        "environment": environment,
        "query": query,
    }
    if top_k is not None:
        body["topK"] = top_k
    if policy_override is not None:
        body["policyOverride"] = policy_override
    return _call(RECALL, {"actor_id": actor_id}, params={"workspace": workspace}, body=body)


# --- memories -------------------------------------------------------------------------------


class MemoryBatchInput(TypedDict):
    memories: list[m.MemoryInput]


WRITE_MEMORY = _operation(
    "memory_actors_memories_create",
    "POST",
    "/v1/memory/actors/{actor_id}/memories",
    request=m.MemoryInput,
    response=m.Memory,
    query=("workspace",),
)
# The same operation with a batch: the schema's other form of its body and answer.
WRITE_MEMORIES = Operation(
    WRITE_MEMORY.id,
    "POST",
    WRITE_MEMORY.path,
    request=MemoryBatchInput,
    response=m.MemoryBatch,
    query=("workspace",),
)


def write_memory(
    actor_id: str, memory: m.MemoryInput, *, workspace: str | None = None
) -> Call[m.Memory]:
    """Write one new memory for ``actor_id`` (created if it has none yet)."""
    return _call(WRITE_MEMORY, {"actor_id": actor_id}, params={"workspace": workspace}, body=memory)


def write_memories(
    actor_id: str, memories: Sequence[m.MemoryInput], *, workspace: str | None = None
) -> Call[m.MemoryBatch]:
    """Write up to 1,000 new memories for ``actor_id``: all, or none if one is not valid."""
    body: MemoryBatchInput = {"memories": list(memories)}
    return _call(WRITE_MEMORIES, {"actor_id": actor_id}, params={"workspace": workspace}, body=body)


LIST_MEMORIES = _operation(
    "memory_actors_memories_list",
    "GET",
    "/v1/memory/actors/{actor_id}/memories",
    response=m.Page[m.Memory],
    query=("workspace", "type", "source", "status", "sensitivity", "segment", "q", *PAGE),
)


def list_memories(
    actor_id: str,
    *,
    type: str | None = None,
    source: str | None = None,
    status: str | None = None,
    sensitivity: str | None = None,
    segment: str | None = None,
    q: str | None = None,
    page: int | None = None,
    page_size: int | None = None,
    workspace: str | None = None,
) -> Call[m.Page[m.Memory]]:
    """One page of the actor's memories, filtered (``q``: text the content contains)."""
    params = {
        "workspace": workspace,
        "type": type,
        "source": source,
        "status": status,
        "sensitivity": sensitivity,
        "segment": segment,
        "q": q,
        **_pages(page, page_size),
    }
    return _call(LIST_MEMORIES, {"actor_id": actor_id}, params=params)


GET_MEMORY = _operation(
    "memory_memories_retrieve", "GET", "/v1/memory/memories/{memory_id}", response=m.Memory
)
UPDATE_MEMORY = _operation(
    "memory_memories_partial_update",
    "PATCH",
    "/v1/memory/memories/{memory_id}",
    request=m.MemoryPatch,
    response=m.Memory,
)
DELETE_MEMORY = _operation("memory_memories_destroy", "DELETE", "/v1/memory/memories/{memory_id}")
SUPPRESS_MEMORY = _operation(
    "memory_memories_suppress_create",
    "POST",
    "/v1/memory/memories/{memory_id}/suppress",
    response=m.Memory,
)
RESTORE_MEMORY = _operation(
    "memory_memories_restore_create",
    "POST",
    "/v1/memory/memories/{memory_id}/restore",
    response=m.Memory,
)


class ReactivateRequest(TypedDict, total=False):
    expiresAt: str | None


REACTIVATE_MEMORY = _operation(
    "memory_memories_reactivate_create",
    "POST",
    "/v1/memory/memories/{memory_id}/reactivate",
    request=ReactivateRequest,
    response=m.Memory,
)
MEMORY_INJECTIONS = _operation(
    "memory_memories_injections_list",
    "GET",
    "/v1/memory/memories/{memory_id}/injections",
    response=m.Page[m.Injection],
    query=PAGE,
)
MEMORY_LIFECYCLE = _operation(
    "memory_memories_lifecycle_retrieve",
    "GET",
    "/v1/memory/memories/{memory_id}/lifecycle",
    response=m.MemoryLifecycle,
)


def get_memory(memory_id: int | str) -> Call[m.Memory]:
    """One memory."""
    return _call(GET_MEMORY, {"memory_id": memory_id})


def update_memory(memory_id: int | str, changes: m.MemoryPatch) -> Call[m.Memory]:
    """Change some fields of a memory (editors)."""
    return _call(UPDATE_MEMORY, {"memory_id": memory_id}, body=changes)


def delete_memory(memory_id: int | str) -> Call[None]:
    """Delete a memory (editors)."""
    return _call(DELETE_MEMORY, {"memory_id": memory_id})


def suppress_memory(memory_id: int | str) -> Call[m.Memory]:
    """Keep a memory out of every recall until it is restored (editors)."""
    return _call(SUPPRESS_MEMORY, {"memory_id": memory_id})


def restore_memory(memory_id: int | str) -> Call[m.Memory]:
    """Make a suppressed memory active again (editors)."""
    return _call(RESTORE_MEMORY, {"memory_id": memory_id})


def reactivate_memory(
    memory_id: int | str, *, expires_at: str | None = None, clear_expiry: bool = False
) -> Call[m.Memory]:
    """Make a stale or expired memory active again (operators); ``expires_at`` sets a new
    expiry, ``clear_expiry`` removes it."""
    body: ReactivateRequest = {}
    if expires_at is not None or clear_expiry:
        body["expiresAt"] = expires_at
    return _call(REACTIVATE_MEMORY, {"memory_id": memory_id}, body=body)


def memory_injections(
    memory_id: int | str, *, page: int | None = None, page_size: int | None = None
) -> Call[m.Page[m.Injection]]:
    """The envelopes that carried a memory, newest first."""
    return _call(MEMORY_INJECTIONS, {"memory_id": memory_id}, params=_pages(page, page_size))


def memory_lifecycle(memory_id: int | str) -> Call[m.MemoryLifecycle]:
    """Where a memory stands with the lifecycle sweeps (decay, staleness, promotion)."""
    return _call(MEMORY_LIFECYCLE, {"memory_id": memory_id})


class EraseRequest(TypedDict, total=False):
    expectedCount: int


ERASE_ACTOR = _operation(
    "memory_actors_erase_create",
    "POST",
    "/v1/memory/actors/{actor_id}/erase",
    request=EraseRequest,
    response=m.Erasure,
    query=("workspace",),
)


def erase_actor(
    actor_id: str, *, expected_count: int | None = None, workspace: str | None = None
) -> Call[m.Erasure]:
    """Erase an actor for a data-subject request (operators): every memory, its sessions,
    archive lines and stored queries. With ``expected_count``, nothing is erased if the
    actor has another number of memories now (409 ``COUNT_CHANGED``)."""
    body: EraseRequest = {}
    if expected_count is not None:
        body["expectedCount"] = expected_count
    return _call(ERASE_ACTOR, {"actor_id": actor_id}, params={"workspace": workspace}, body=body)


# --- sessions and turns ---------------------------------------------------------------------


class SessionCreate(TypedDict):
    actorId: str
    workloadId: str
    environment: str
    externalId: NotRequired[str]
    systemPrompt: NotRequired[str]
    systemPromptTokens: NotRequired[int]
    toolSchemaTokens: NotRequired[int]


class TurnsRequest(TypedDict):
    messages: list[m.Message]


START_SESSION = _operation(
    "sessions_create",
    "POST",
    "/v1/sessions",
    request=SessionCreate,
    response=m.Session,
    query=("workspace",),
)
LIST_SESSIONS = _operation(
    "sessions_list",
    "GET",
    "/v1/sessions/",
    response=m.Page[m.Session],
    query=("workspace", "actor", "workload", "environment", "status", *PAGE),
)
GET_SESSION = _operation(
    "sessions_retrieve", "GET", "/v1/sessions/{session_id}", response=m.Session
)
END_SESSION = _operation(
    "sessions_end_create", "POST", "/v1/sessions/{session_id}/end", response=m.Session
)
POST_TURNS = _operation(
    "sessions_turns_create",
    "POST",
    "/v1/sessions/{session_id}/turns",
    request=TurnsRequest,
    response=m.TurnAnswer,
)
COMPACT_SESSION = _operation(
    "sessions_compact_create",
    "POST",
    "/v1/sessions/{session_id}/compact",
    response=m.CompactionRun,
)
GET_COMPACTION_RUN = _operation(
    "compaction_runs_retrieve",
    "GET",
    "/v1/compaction/runs/{compaction_run_id}",
    response=m.CompactionRun,
)
GET_TURN = _operation(
    "sessions_turns_retrieve",
    "GET",
    "/v1/sessions/{session_id}/turns/{turn}",
    response=m.TurnDetail,
)
GET_TURN_PROMPT = _operation(
    "sessions_turns_prompt_retrieve",
    "GET",
    "/v1/sessions/{session_id}/turns/{turn}/prompt",
    response=m.TurnPrompt,
)


def start_session(
    *,
    actor_id: str,
    workload_id: Id,
    environment: str,
    external_id: str | None = None,
    system_prompt: str | None = None,
    system_prompt_tokens: int | None = None,
    tool_schema_tokens: int | None = None,
    workspace: str | None = None,
) -> Call[m.Session]:
    """Start a session of ``actor_id`` with a workload in an environment. ``external_id``
    is your own id for the conversation (a second session with it: 409 ``SESSION_EXISTS``
    naming the first in ``details["sessionId"]``)."""
    body: SessionCreate = {
        "actorId": actor_id,
        "workloadId": str(workload_id),
        "environment": environment,
    }
    if external_id is not None:
        body["externalId"] = external_id
    if system_prompt is not None:
        body["systemPrompt"] = system_prompt
    if system_prompt_tokens is not None:
        body["systemPromptTokens"] = system_prompt_tokens
    if tool_schema_tokens is not None:
        body["toolSchemaTokens"] = tool_schema_tokens
    return _call(START_SESSION, params={"workspace": workspace}, body=body)


def list_sessions(
    *,
    actor: str | None = None,
    workload: Id | None = None,
    environment: str | None = None,
    status: str | None = None,
    page: int | None = None,
    page_size: int | None = None,
    workspace: str | None = None,
) -> Call[m.Page[m.Session]]:
    """One page of the workspace's sessions, newest first."""
    params = {
        "workspace": workspace,
        "actor": actor,
        "workload": workload,
        "environment": environment,
        "status": status,
        **_pages(page, page_size),
    }
    return _call(LIST_SESSIONS, params=params)


def get_session(session_id: int | str) -> Call[m.Session]:
    """A session: its status, turn count and last budget status."""
    return _call(GET_SESSION, {"session_id": session_id})


def end_session(session_id: int | str) -> Call[m.Session]:
    """End a session: no turn can be added, and its retention starts."""
    return _call(END_SESSION, {"session_id": session_id})


def post_turns(session_id: int | str, messages: Sequence[m.Message]) -> Call[m.TurnAnswer]:
    """Append messages to a session, in order (the assistant's last reply, tool results,
    then the user's new message). When the last is the user's, its context is assembled:
    the answer's ``prompt["messages"]`` is what to send to the model, and ``recall`` names
    its envelope and ``context.assembled`` event."""
    body: TurnsRequest = {"messages": list(messages)}
    return _call(POST_TURNS, {"session_id": session_id}, body=body)


def get_turn(session_id: int | str, turn: int) -> Call[m.TurnDetail]:
    """A turn and, for an assembled one, its diagnostics."""
    return _call(GET_TURN, {"session_id": session_id, "turn": turn})


def get_turn_prompt(session_id: int | str, turn: int) -> Call[m.TurnPrompt]:
    """An assembled turn's prompt as it was returned (operators: private content)."""
    return _call(GET_TURN_PROMPT, {"session_id": session_id, "turn": turn})


def compact_session(session_id: int | str) -> Call[m.CompactionRun]:
    """Seed 000's ``/compact`` (editors and operators): a compaction run of the session now.
    Without a task queue the run has finished when this answers (200); with one it is
    queued (202): poll ``get_compaction_run``. A workload whose compaction is not enabled
    is a 422 ``COMPACTION_DISABLED``; a run in flight, an ended session or one without an
    assembled turn a 409."""
    return _call(COMPACT_SESSION, {"session_id": session_id})


def get_compaction_run(run_id: int | str) -> Call[m.CompactionRun]:
    """A compaction run: its outcome, tokens before and after, turns summarised."""
    return _call(GET_COMPACTION_RUN, {"compaction_run_id": run_id})
