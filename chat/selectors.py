"""Reads of sessions, their turns and their assembled contexts, for the API and the pages."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.db.models import Case, CharField, Count, F, Q, QuerySet, Value, When, Window
from django.db.models.functions import RowNumber, TruncDate

from chat.context import PastTurn, Recalled, prior_turns, retrieval_plan, supporting_sections
from chat.filtersets import SessionFilterSet
from chat.models import CompactionRun, Session, SessionStatus, Turn, TurnContext
from portal.db.cursors import prepared_statement
from portal.errors import NotFoundError, ValidationFailed
from portal.models import Workspace
from recall.assembly import TOP_K_MAX
from recall.forms.layout import LINES_MAX, LayoutStart
from recall.layout.config import LayoutConfig, PrimingConfig, parse_memory_config
from recall.layout.services import layout_config_current
from recall.models import WorkloadLayoutConfigVersion
from recall.selectors import memories_by_id


def session_list(*, workspace: Workspace, filters: Any) -> QuerySet[Session]:
    """The workspace's sessions narrowed by ``filters`` (a QueryDict), newest first; bad
    filters are a 400."""
    filterset = SessionFilterSet(
        filters,
        queryset=Session.objects.filter(workspace=workspace).select_related(
            "workspace", "actor", "workload"
        ),
    )
    if not filterset.is_valid():
        raise ValidationFailed(
            {field: " ".join(errors) for field, errors in filterset.errors.items()},
            "The session filters are not valid.",
        )
    return filterset.qs.order_by("-id")


def session_turn(*, session: Session, index: Any) -> tuple[Turn, TurnContext | None]:
    """Turn ``index`` of the session and the context assembled for it (None for a turn that
    was not the user's last of its call), or 404."""
    # A turn index is a PostgreSQL integer: a larger number names no turn.
    number = index if isinstance(index, int) and 0 < index < 2**31 else None
    turn = session.turns.filter(index=number).first() if number is not None else None
    if turn is None:
        raise NotFoundError(
            f"Session {session.pk} has no turn {index}; it has {session.turn_count}.",
            {"turnCount": session.turn_count},
        )
    return turn, session.contexts.filter(turn=turn.index).first()


# --- the histories of a turn ---------------------------------------------------------------------

_TURN = Turn._meta.db_table
_SESSION = Session._meta.db_table
_TURN_COLUMNS = "t.session_id, t.index, t.role, t.content, t.tokens"
# One statement for both histories of a turn: the current session's last turns before the
# query that are still current (a compaction had not summarised them), with how many there
# are (counted before the limit), and the last turns of each of the actor's earlier sessions
# of the workload, newest sessions first (each a lateral read of its own tail). ``history``
# is at least 1 (the count rides on the rows): a caller keeping none drops them.
_HISTORIES = prepared_statement(
    "chat.histories",
    f"""
(SELECT 0 AS part, {_TURN_COLUMNS}, count(*) OVER () AS given
 FROM {_TURN} t
 WHERE t.session_id = %(session)s AND t.index < %(before)s AND t.compacted_by_id IS NULL
 ORDER BY t.index DESC
 LIMIT %(history)s)
UNION ALL
(SELECT 1, {_TURN_COLUMNS}, NULL
 FROM (
     SELECT s.id FROM {_SESSION} s
     WHERE s.workspace_id = %(workspace)s AND s.actor_id = %(actor)s
       AND s.workload_id = %(workload)s AND s.id < %(session)s
     ORDER BY s.id DESC
     LIMIT %(sessions)s
 ) s
 CROSS JOIN LATERAL (
     SELECT {_TURN_COLUMNS} FROM {_TURN} t
     WHERE t.session_id = s.id AND t.compacted_by_id IS NULL
     ORDER BY t.index DESC
     LIMIT %(turns)s
 ) t)
""",
)


@dataclass(frozen=True)
class Histories:
    """What a turn's layout is given of the sessions' turns (``chat.assembly``)."""

    current: list[PastTurn]  # the last current turns before the query, oldest first
    given: int  # how many current turns precede the query (older ones counted, never read)
    prior: list[PastTurn]  # the prior-session history (``chat.context.prior_turns``)


def turn_histories(
    *, session: Session, before: int, keep: int, priming: PrimingConfig
) -> Histories:
    """The histories of the turn ``before`` of the session, in one statement: its current
    history (the last ``keep`` turns before it that no compaction summarised, and how many
    such turns there are) and its prior-session history: the actor's sessions of the workload
    started before this one, newest first, read for their last ``previous_session_turns``
    turns each (``chat.context.prior_turns``); nothing while priming is off."""
    reads_prior = _reads_prior(priming)
    rows = _HISTORIES.fetchall(
        {
            "session": session.pk,
            "before": before,
            "history": max(keep, 1),
            "workspace": session.workspace_id,
            "actor": session.actor_id,
            "workload": session.workload_id,
            "sessions": priming.previous_sessions if reads_prior else 0,
            "turns": priming.previous_session_turns,
        }
    )
    current: list[PastTurn] = []
    given = 0
    tails: dict[int, list[PastTurn]] = {}
    for part, session_id, index, role, content, tokens, counted in rows:
        turn = PastTurn(str(session_id), index, role, content, tokens)
        if part == 0:
            current.append(turn)
            given = counted
        else:
            tails.setdefault(session_id, []).append(turn)
    # Newest sessions first, each its turns in order.
    prior = [sorted(tails[pk], key=lambda t: t.index) for pk in sorted(tails, reverse=True)]
    return Histories(
        current=list(reversed(current)) if keep else [],
        given=given,
        prior=prior_turns(prior, priming) if reads_prior else [],
    )


def turn_layout_start(*, session: Session, context: TurnContext) -> LayoutStart:
    """A recorded turn as the Layout tab's starting point: what its layout was given.

    The configuration version it ran under (the workload's current one if that version is
    gone), the session's fixed costs, its current-session turns before the query (those no
    compaction had taken out of the history by then; at most the form's ``LINES_MAX``, the
    newest), the earlier sessions' turns it was given (``_prior_turns_given``), the memories
    its recall gave, each in its section with its recorded similarity (cut to the sections'
    retrieval limits as the turn was), and the query. A memory deleted or erased since is left
    out, and so are the turns of a session deleted since.
    """
    config = _turn_config(session, context)
    query = session.turns.get(index=context.turn)
    history = list(
        session.turns.filter(index__lt=context.turn)
        .exclude(_taken_by(context.created_at))
        .order_by("-index")
        .values_list("role", "content")[:LINES_MAX]
    )
    prior = _prior_turns_given(session, context, config.priming)
    ids = [str(pk) for pk in context.recall.get("memoryIds") or []]
    similarities = context.recall.get("similarities") or {}
    rows = memories_by_id(workspace=session.workspace, ids=[int(pk) for pk in ids])
    recalled = [
        Recalled(
            id=pk,
            content=row.content,
            memory_type=row.memory_type,
            segment_kind=row.segment_kind,
            tier=row.tier,
            similarity=similarities.get(pk),
            score=-float(rank),  # the envelope's order is the recall's ranking
        )
        for rank, pk in enumerate(ids)
        if (row := rows.get(int(pk))) is not None
    ]
    priority = config.supporting_context.section_priority
    plan = retrieval_plan(config, primed=context.primed, top_k_max=TOP_K_MAX)
    return LayoutStart(
        config=config,
        system_prompt_tokens=session.system_prompt_tokens,
        tool_schema_tokens=session.tool_schema_tokens,
        history=list(reversed(history)),
        prior_history=[(turn.role, turn.content) for turn in prior],
        supporting=supporting_sections(recalled, plan, priority).items,
        query=query.content,
    )


def _taken_by(moment: datetime) -> Q:
    """Turns a compaction had taken out of their session's history at ``moment``."""
    return Q(compacted_by__isnull=False) & (
        Q(compacted_by__finished_at__isnull=True) | Q(compacted_by__finished_at__lte=moment)
    )


def _reads_prior(priming: PrimingConfig) -> bool:
    """Whether a primed turn is given any earlier session's turns."""
    return bool(priming.enabled and priming.previous_sessions and priming.previous_session_turns)


def _prior_turns_given(
    session: Session, context: TurnContext, priming: PrimingConfig
) -> list[PastTurn]:
    """The earlier sessions' turns the context's layout was given, as it recorded them, in one
    query; those of a session deleted since are left out (none stands in for them). A context
    recorded before they were kept has them worked out again (``_prior_turns_then``)."""
    if context.prior_given is None:
        return _prior_turns_then(session, priming, context.created_at)
    if not context.prior_given:
        return []
    indexes: dict[int, list[int]] = {}
    for session_id, index in context.prior_given:
        indexes.setdefault(session_id, []).append(index)
    wanted = Q()
    for session_id, among in indexes.items():
        wanted |= Q(session_id=session_id, index__in=among)
    found = {
        (session_id, index): PastTurn(str(session_id), index, role, content, tokens)
        for session_id, index, role, content, tokens in Turn.objects.filter(
            wanted, workspace_id=session.workspace_id
        ).values_list("session_id", "index", "role", "content", "tokens")
    }
    return [found[key] for key in map(tuple, context.prior_given) if key in found]


def _prior_turns_then(session: Session, priming: PrimingConfig, moment: datetime) -> list[PastTurn]:
    """The prior-session history as a turn assembled at ``moment`` was given it: the earlier
    sessions' turns written by then and not yet compacted (``turn_histories`` reads them as
    they are now; an earlier session may have gone on since). Two queries, however many
    sessions the priming reads; a session deleted since lets an older one stand in."""
    if not _reads_prior(priming):
        return []
    earlier = list(
        Session.objects.filter(
            workspace_id=session.workspace_id,
            actor_id=session.actor_id,
            workload_id=session.workload_id,
            pk__lt=session.pk,
        )
        .order_by("-pk")
        .values_list("pk", flat=True)[: priming.previous_sessions]
    )
    rows = (
        Turn.objects.filter(session_id__in=earlier, created_at__lte=moment)
        .exclude(_taken_by(moment))
        .annotate(
            back=Window(RowNumber(), partition_by=F("session_id"), order_by=F("index").desc())
        )
        .filter(back__lte=priming.previous_session_turns)
        .order_by("session_id", "index")
        .values_list("session_id", "index", "role", "content", "tokens")
    )
    tails: dict[int, list[PastTurn]] = {pk: [] for pk in earlier}
    for session_id, index, role, content, tokens in rows:
        tails[session_id].append(PastTurn(str(session_id), index, role, content, tokens))
    return prior_turns([tails[pk] for pk in earlier], priming)


def _turn_config(session: Session, context: TurnContext) -> LayoutConfig:
    version = context.layout.get("configVersion")
    if version is not None:
        stored = WorkloadLayoutConfigVersion.objects.filter(
            workload_id=session.workload_id, version=version
        ).first()
        if stored is not None:
            return parse_memory_config(stored.document, accept_no_effect=True)
    return layout_config_current(workload=session.workload).config


def session_contexts(*, session: Session) -> QuerySet[TurnContext]:
    """The session's assembled contexts, in turn order, without their prompts."""
    return session.contexts.defer("prompt").order_by("turn")


def session_compaction_runs(*, session: Session) -> QuerySet[CompactionRun]:
    """The session's compaction runs, newest first."""
    return session.compaction_runs.order_by("-id")


# A run's outcome in SQL, as ``CompactionRun.outcome`` says it.
OUTCOME_SQL = Case(
    When(status__in=["queued", "running"], then=Value("pending")),
    When(status="failed", then=Value("failed")),
    When(target_met=True, then=Value("target_met")),
    When(time_budget_exhausted=True, then=Value("time_budget_exhausted")),
    default=Value("target_missed"),
    output_field=CharField(),
)


def compaction_outcomes_per_day(
    *, workspace: Workspace, since: datetime
) -> dict[date, dict[str, int]]:
    """The workspace's compaction runs asked for since ``since``, by UTC day and outcome."""
    rows = (
        CompactionRun.objects.filter(workspace=workspace, created_at__gte=since)
        .annotate(day=TruncDate("created_at", tzinfo=UTC), result=OUTCOME_SQL)
        .values("day", "result")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[date, dict[str, int]] = {}
    for row in rows:
        counts.setdefault(row["day"], {})[row["result"]] = row["n"]
    return counts


@dataclass(frozen=True)
class EndedSession:
    """An ended session as the ``sessions`` sweep lists it (no content)."""

    pk: int
    actor_id: str
    ended_at: datetime | None  # never None: the sweep lists ended sessions
    turns: int
    fingerprint: str


def _fingerprint(status: str, ended_at: datetime | None, turns: int, updated: datetime) -> str:
    """A session's state, so that a sweep deletes only a session still as it was listed."""
    ended = ended_at.isoformat() if ended_at else ""
    return hashlib.md5(f"{status}|{ended}|{turns}|{updated.isoformat()}".encode()).hexdigest()


def sessions_ended_before(
    *, workspace_id: int, before: datetime, after_id: int, limit: int
) -> list[EndedSession]:
    """A page, in id order after ``after_id``, of the workspace's sessions that ended before
    ``before``."""
    rows = (
        Session.objects.filter(
            workspace_id=workspace_id,
            status=SessionStatus.ENDED,
            ended_at__lt=before,
            pk__gt=after_id,
        )  # fmt: skip
        .order_by("pk")
        .values_list(
            "pk", "actor__kind", "actor__name", "status", "ended_at", "turn_count", "updated_at"
        )[:limit]
    )
    return [
        EndedSession(pk, f"{kind}:{name}", ended, turns, _fingerprint(status, ended, turns, upd))
        for pk, kind, name, status, ended, turns, upd in rows
    ]


def sessions_locked(*, workspace_id: int, ids: Sequence[int]) -> dict[int, str]:
    """The fingerprints of those of ``ids`` that still exist, their rows locked (in id
    order) to the end of the caller's transaction."""
    rows = (
        Session.objects.select_for_update()
        .filter(workspace_id=workspace_id, pk__in=list(ids))
        .order_by("pk")
        .values_list("pk", "status", "ended_at", "turn_count", "updated_at")
    )
    return {pk: _fingerprint(status, ended, n, upd) for pk, status, ended, n, upd in rows}
