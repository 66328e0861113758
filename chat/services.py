"""Session writes: start a session, append its turns (assembling the context for a user
turn, ``chat.assembly``), ask for a compaction run, end it, delete sessions (erasure, the
``sessions`` sweep).

Turn content is personal data: no function here logs it, and no error message quotes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from chat.assembly import turn_assemble
from chat.compaction.coordinator import (
    MONITOR_FIELDS,
    Waited,
    compaction_send,
    compaction_start,
    compaction_wait,
    session_monitor,
)
from chat.compaction.records import compaction_fail
from chat.models import (
    SESSION_LOCK,
    CompactionRun,
    CompactionTrigger,
    Role,
    Session,
    SessionStatus,
    Turn,
    TurnContext,
)
from chat.statements import TurnStart, session_locked_for_turns, turn_recorded
from policies.models import Workload
from policies.selectors import environment_check
from policies.services import workload_check_live
from portal.errors import (
    ConflictError,
    DomainError,
    NotFoundError,
    UnprocessableError,
    ValidationFailed,
)
from portal.models import Workspace
from portal.tasks import QueueUnavailable
from recall.layout.services import layout_config_current
from recall.models import Actor
from recall.runtime import token_estimator
from recall.services import actor_check_not_erased, actor_get_or_create

# One message's content, in characters: larger is a 413 (MESSAGE_TOO_LARGE), nothing appended.
MESSAGE_MAX_CHARS = 100_000
# Messages one call may append.
MESSAGES_MAX = 100
SYSTEM_PROMPT_MAX_CHARS = 100_000
EXTERNAL_ID_MAX_CHARS = 200
ROLES: tuple[str, ...] = tuple(Role.values)


class MessageTooLarge(DomainError):
    """A message over ``MESSAGE_MAX_CHARS`` (HTTP 413)."""

    status = 413

    def __init__(self, index: int, size: int):
        super().__init__(
            "MESSAGE_TOO_LARGE",
            f"Message {index} has {size:,} characters; a message holds at most "
            f"{MESSAGE_MAX_CHARS:,}. Nothing was appended.",
            {"index": index, "size": size, "limit": MESSAGE_MAX_CHARS},
        )


@dataclass(frozen=True)
class Message:
    """A message to append, checked (``messages_check``)."""

    role: str
    content: str


def messages_check(messages: Any) -> list[Message]:
    """The messages of a turns request, checked before anything is written.

    A non-empty list (at most ``MESSAGES_MAX``) of ``{role, content}``: a known role, text
    content (empty only for an assistant or tool message), at most ``MESSAGE_MAX_CHARS``
    characters (413 otherwise). Every problem is reported together, by index.
    """
    if not isinstance(messages, list) or not messages:
        raise ValidationFailed(
            {"messages": "Send a non-empty list of messages {role, content}."},
            "There is no message to append; nothing was appended.",
        )
    if len(messages) > MESSAGES_MAX:
        raise ValidationFailed(
            {"messages": f"At most {MESSAGES_MAX} messages per call; got {len(messages)}."},
            "Too many messages; nothing was appended.",
        )
    errors: dict[str, str] = {}
    checked: list[Message] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            errors[where] = "Each message is an object {role, content}."
            continue
        unknown = sorted(set(message) - {"role", "content"})
        if unknown:
            errors[f"{where}.{unknown[0]}"] = "Unknown field; a message has role and content."
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            errors[f"{where}.role"] = f"Use one of {', '.join(ROLES)}; got {_shown(role)}."
        if not isinstance(content, str):
            errors[f"{where}.content"] = "The content is text."
            continue
        if len(content) > MESSAGE_MAX_CHARS:
            raise MessageTooLarge(index, len(content))
        if "\x00" in content:
            errors[f"{where}.content"] = "The content holds a NUL character."
        elif role == Role.USER and not content.strip():
            errors[f"{where}.content"] = "A user message needs some text."
        if not errors:
            checked.append(Message(str(role), content))
    if errors:
        raise ValidationFailed(errors, "Some messages are not valid; nothing was appended.")
    return checked


def _shown(value: Any) -> str:
    """A refused role, quoted briefly (a role is a short word, not content)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- sessions -----------------------------------------------------------------------------------


@transaction.atomic
def session_create(
    *,
    workspace: Workspace,
    actor_id: str,
    workload_id: Any,
    environment: str,
    author: str,
    external_id: str = "",
    system_prompt: str = "",
    system_prompt_tokens: int | None = None,
    tool_schema_tokens: int = 0,
) -> Session:
    """Start a session of ``actor_id`` with a live workload of the workspace in one of its
    environments. The actor is created if the workspace has none of that id (as a memory
    write does); an erased actor gets no session (409 ``ACTOR_ERASED``). A second session
    with the same ``external_id`` is a 409 ``SESSION_EXISTS`` naming the first.

    ``system_prompt_tokens`` defaults to the estimate of ``system_prompt``.
    """
    workload = Workload.objects.filter(workspace=workspace, pk=workload_id).first()
    if workload is None:
        raise NotFoundError(
            f"No workload {workload_id} in this workspace.",
            {"fields": {"workloadId": "Unknown workload."}},
        )
    workload_check_live(workload)
    environment_check(workspace=workspace, environment=environment)
    if not environment:
        raise ValidationFailed({"environment": "Name the environment of the session."})
    existing = _session_with_external_id(workspace, external_id)
    if existing is not None:
        raise _exists(existing)
    actor = actor_get_or_create(workspace=workspace, actor_id=actor_id)
    # Locked, then checked: an erasure committing meanwhile is seen, not raced.
    actor = Actor.objects.select_for_update(no_key=True).get(pk=actor.pk)
    actor_check_not_erased(actor)
    if system_prompt_tokens is None:
        system_prompt_tokens = token_estimator()(system_prompt)
    try:
        with transaction.atomic():
            session = Session.objects.create(
                workspace=workspace,
                actor=actor,
                workload=workload,
                environment=environment,
                external_id=external_id,
                system_prompt=system_prompt,
                system_prompt_tokens=system_prompt_tokens,
                tool_schema_tokens=tool_schema_tokens,
                author=author,
            )
    except IntegrityError:
        # Another call took the external id meanwhile.
        existing = _session_with_external_id(workspace, external_id)
        if existing is None:
            raise
        raise _exists(existing) from None
    _session_event(session, EventType.SESSION_STARTED, author=author)
    return session


def _session_event(session: Session, type: str, *, author: str) -> None:
    """The session's ``session.started`` or ``session.ended`` event, in the caller's
    transaction: who, with which workload, where; no content. The caller's external id is not
    in it: a caller may put personal data there, and an event outlives an erasure (the event's
    page reads it from the session while the session is kept)."""
    payload: dict[str, Any] = {"sessionId": str(session.pk)}
    if type == EventType.SESSION_ENDED:
        payload["turns"] = session.turn_count
    audit_event_record(
        workspace=session.workspace,
        type=type,
        author=author,
        payload=payload,
        workload_id=session.workload_id,
        environment=session.environment,
        actor_id=session.actor.external_id,
    )


def _session_with_external_id(workspace: Workspace, external_id: str) -> Session | None:
    if not external_id:
        return None
    return Session.objects.filter(workspace=workspace, external_id=external_id).first()


def _exists(session: Session) -> ConflictError:
    return ConflictError(
        f"Session {session.pk} already has the external id {session.external_id!r}; "
        "continue that one, or choose another id.",
        {"sessionId": str(session.pk), "externalId": session.external_id},
        code="SESSION_EXISTS",
    )


def session_locked(session: Session) -> Session:
    """The session row locked for a write (turns appended one call at a time), or 404. (A
    turns request locks it with what its turn reads: ``chat.statements``.)"""
    locked = (
        Session.objects.select_for_update(**SESSION_LOCK)
        .select_related("workspace", "actor", "workload")
        .filter(pk=session.pk)
        .first()
    )
    if locked is None:
        raise NotFoundError(f"No session {session.pk}.")
    return locked


def session_check_active(session: Session) -> None:
    if session.status != SessionStatus.ACTIVE:
        ended = f" on {session.ended_at:%Y-%m-%d %H:%M} UTC" if session.ended_at else ""
        raise ConflictError(
            f"Session {session.pk} ended{ended}; no turn can be added to it. Start a new session.",
            {"sessionId": str(session.pk), "status": session.status},
            code="SESSION_ENDED",
        )


@transaction.atomic
def session_end(*, session: Session, author: str) -> Session:
    """End the session, with its ``session.ended`` event; ending an ended session changes
    and records nothing. Its retention (the ``sessions`` sweep) counts from now."""
    locked = session_locked(session)
    if locked.status == SessionStatus.ENDED:
        return locked
    locked.status = SessionStatus.ENDED
    locked.ended_at = timezone.now()
    locked.save(update_fields=["status", "ended_at", "updated_at"])
    _session_event(locked, EventType.SESSION_ENDED, author=author)
    return locked


def turns_numbered(*, session: Session, messages: Sequence[Message]) -> list[Turn]:
    """The turns of checked messages for a locked, active session, numbered on from the
    session's last, each with its estimated tokens, not saved yet; the session's
    ``turn_count`` counts them."""
    count = token_estimator()
    start = session.turn_count
    turns = [
        Turn(
            workspace_id=session.workspace_id,
            session=session,
            index=start + offset + 1,
            role=message.role,
            content=message.content,
            tokens=count(message.content),
        )
        for offset, message in enumerate(messages)
    ]
    session.turn_count = start + len(turns)
    return turns


@dataclass(frozen=True)
class Posted:
    """What a turns request did: the session after it, the turns it appended and, when the
    last was the user's, the context assembled for it and the compaction run it asked for."""

    session: Session
    turns: list[Turn]
    context: TurnContext | None
    run: CompactionRun | None = None


def session_turns_post(*, session: Session, messages: Any, author: str) -> Posted:
    """``turns_post`` for a session already found (and checked by the caller)."""

    def locate() -> TurnStart:
        return session_locked_for_turns(pk=session.pk, workspace_id=session.workspace_id)

    return turns_post(locate=locate, messages=lambda: messages, author=author)


def turns_post(
    *, locate: Callable[[], TurnStart], messages: Callable[[], Any], author: str
) -> Posted:
    """Append messages to an active session and, when the last one is the user's, assemble
    the context for it (``chat.assembly``): all in one transaction, so a refusal (an ended
    session, a workload archived since, a message not valid) appends nothing.

    ``locate`` locks the session, with what its turn reads (``chat.statements``), and checks
    the caller may post to it (404, 403), first thing in the transaction; then ``messages()``
    gives the messages (read once) and they are checked. A compaction run of the session in
    flight is then waited for, up to ``COMPACTION_WAIT_MS``, outside the transaction (the run
    needs the session's lock to finish): the lock is let go, and taken again after. A run the
    monitor asks for is sent once the turn is written (without a broker it has run when this
    returns)."""
    checked: list[Message] | None = None
    waited: Waited | None = None
    while True:
        in_flight = None
        with transaction.atomic():
            start = locate()
            if checked is None:
                checked = messages_check(messages())
            if start.session.compaction_run_id is not None and waited is None:
                in_flight = start.session
                transaction.set_rollback(True)
            else:
                posted = _turns_posted(start, checked, waited, author)
        if in_flight is None:
            break
        waited = compaction_wait(session=in_flight)
    if posted.run is not None:
        posted.run.refresh_from_db()
    return posted


def _turns_posted(
    start: TurnStart, messages: list[Message], waited: Waited | None, author: str
) -> Posted:
    locked = start.session
    session_check_active(locked)
    turns = turns_numbered(session=locked, messages=messages)
    context = run = None
    if turns[-1].role == Role.USER:
        assembled = turn_assemble(
            session=locked,
            query=turns[-1],
            appended=turns[:-1],
            author=author,
            layout=start.layout,
            assembled_before=start.assembled_before,
            waited=waited,
        )
        context, run = assembled.context, assembled.run
        locked.last_budget = context.budget_status
    turn_recorded(session=locked, turns=turns, context=context, now=timezone.now())
    if run is not None:
        compaction_send(run)
    return Posted(locked, turns, context, run)


# --- compaction ---------------------------------------------------------------------------------


def compaction_request(*, session: Session, author: str) -> CompactionRun:
    """A manual compaction run of the session (seed 000's ``/compact``): written and sent;
    without a broker it has run when this returns.

    Refused, with nothing written, while compaction is disabled in the workload's layout
    configuration (422 ``COMPACTION_DISABLED``: ``enabled: false`` disables the manual path
    too), for an ended session (409 ``SESSION_ENDED``), before any turn was assembled (409
    ``COMPACTION_NO_HISTORY``) and while a run of the session is in flight (409
    ``COMPACTION_IN_PROGRESS``, naming it). It bypasses the cooldown, and starts one.
    """
    with transaction.atomic():
        locked = session_locked(session)
        session_check_active(locked)
        config = layout_config_current(workload=locked.workload).config
        if not config.compaction.enabled:
            raise UnprocessableError(
                "COMPACTION_DISABLED",
                f"Compaction is disabled in the layout configuration of {locked.workload.name}"
                " (memory.compaction.enabled is not true), which disables manual runs too;"
                " nothing was started.",
                {"workloadId": str(locked.workload_id)},
            )
        if locked.compaction_run_id is not None:
            raise ConflictError(
                f"Compaction run {locked.compaction_run_id} of session {locked.pk} is still in"
                " flight; wait for it to finish.",
                {"runId": str(locked.compaction_run_id)},
                code="COMPACTION_IN_PROGRESS",
            )
        monitor = session_monitor(session=locked, config=config)
        if monitor.latest is None:
            raise ConflictError(
                f"Session {locked.pk} has no assembled turn yet, so there is nothing to compact.",
                {"sessionId": str(locked.pk)},
                code="COMPACTION_NO_HISTORY",
            )
        run = compaction_start(
            session=locked,
            monitor=monitor,
            config=config,
            trigger=CompactionTrigger.MANUAL,
            reason="manual",
            author=author,
        )
        locked.save(update_fields=[*MONITOR_FIELDS, "updated_at"])
    try:
        compaction_send(run)
    except QueueUnavailable:
        _fail_unsent(run)
        raise QueueUnavailable(
            f"The task queue is not reachable right now, so compaction run {run.pk} was not"
            " started and changed nothing; it is recorded as failed. Try again shortly.",
            {"runId": str(run.pk)},
        ) from None
    run.refresh_from_db()
    return run


def _fail_unsent(run: CompactionRun) -> None:
    compaction_fail(
        run_id=run.pk,
        code="QUEUE_UNAVAILABLE",
        message="The task queue was not reachable; the run was never started.",
        only_queued=True,
    )


# --- deletion -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deleted:
    sessions: int
    turns: int


def sessions_delete(
    *, workspace: Workspace, actor: Actor | None = None, ids: Sequence[int] | None = None
) -> Deleted:
    """Delete sessions with their turns and prompts: the actor's (erasure), or those of
    ``ids`` (the ``sessions`` sweep). Inside the caller's transaction."""
    sessions: QuerySet[Session] = Session.objects.filter(workspace=workspace)
    if actor is not None:
        sessions = sessions.filter(actor=actor)
    if ids is not None:
        sessions = sessions.filter(pk__in=list(ids))
    listed = list(sessions.annotate(n=Count("turns")).values_list("pk", "n"))
    if not listed:
        return Deleted(0, 0)
    pks = [pk for pk, _ in listed]
    # Children first, each one statement (the ORM's cascade would read every row first).
    TurnContext.objects.filter(session_id__in=pks).delete()
    Turn.objects.filter(session_id__in=pks).delete()
    Session.objects.filter(pk__in=pks).update(compaction_run=None)
    CompactionRun.objects.filter(session_id__in=pks).delete()
    Session.objects.filter(pk__in=pks).delete()
    return Deleted(len(pks), sum(n for _, n in listed))
