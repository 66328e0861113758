from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from audit.anchors import AnchorFile, anchor_file_read
from audit.chain import (
    GENESIS_HASH,
    ChainLink,
    ChainVerdict,
    LaneTip,
    event_hash,
    lane_fields,
    verify_links,
)
from audit.keys import chain_keys, signing_key
from audit.models import (
    AuditChainHead,
    AuditCheckpoint,
    AuditEvent,
    EventType,
    Injection,
    StoredQuery,
)
from portal.db.cursors import PreparedStatement, prepared_statement
from portal.models import Workspace


def _hashed_fields(
    *,
    workspace_slug: str,
    type: str,
    occurred_at: Any,
    author: str,
    workload_id: uuid.UUID | None,
    environment: str,
    actor_id: str,
    payload: dict[str, Any],
) -> dict[str, Any]:
    return {
        "type": type,
        "occurredAt": occurred_at.isoformat(),
        "workspace": workspace_slug,
        "author": author,
        "workloadId": str(workload_id) if workload_id else None,
        "environment": environment,
        "actorId": actor_id,
        "payload": payload,
    }


@dataclass(frozen=True)
class ChainTip:
    """Where a lane of a workspace's chain ends: the hash its next event must name as its
    predecessor."""

    last_hash: str
    lane: int = 0

    @classmethod
    def of(cls, last_hash: str | None, lane: int) -> ChainTip:
        """The tip of ``lane`` read as ``last_hash``; None (a lane without a head yet) is the
        start of the lane, which its first event names."""
        return cls(last_hash or GENESIS_HASH, lane)


# --- lanes --------------------------------------------------------------------------------------
# Each thread appends its recalls to one lane of the workspace's chain (1..AUDIT_RECALL_LANES),
# drawn at random, and draws another when it loses a race for the tip: two processes that
# share a lane soon part, and recalls of one workspace rarely wait for each other's commit.
_lane = threading.local()


def append_lane() -> int:
    """The lane this thread's next recall appends to (0, the main chain, without lanes)."""
    lanes = settings.AUDIT_RECALL_LANES
    if lanes <= 0:
        return 0
    lane = getattr(_lane, "value", 0)
    if not 1 <= lane <= lanes:
        lane = _lane.value = random.randint(1, lanes)
    return lane


def _lane_shared(lane: int) -> None:
    """Another thread appended to ``lane`` meanwhile: draw another for the next recall."""
    lanes = settings.AUDIT_RECALL_LANES
    if lanes > 1 and getattr(_lane, "value", 0) == lane:
        _lane.value = random.choice([n for n in range(1, lanes + 1) if n != lane])


# Sub-selects other reads embed, so that they learn what they need of the trail in their own
# round trip while audit's tables are read only by SQL written here.
# The tip of a lane of the chain (named parameters: workspace, lane).
CHAIN_TIP_SQL = (
    f"(SELECT last_hash FROM {AuditChainHead._meta.db_table}"
    " WHERE workspace_id = %(workspace)s AND lane = %(lane)s)"
)


# --- hits: what the recalls carried, read by whoever counts them ---------------------------------
# A recall's hits are the memories its context.assembled event carried as entries (its
# ``memoryIds``, and its injections not ``truncated``): nothing else records them. The app that
# counts them (recall/hits.py) reads them through these.


# The origin a dry run's context.assembled event names (the sandbox's recall): recorded and
# shown like any, never counted as hits.
DRY_RUN_ORIGIN = "sandbox"


def carried_sql(*, after: str, through: str) -> str:
    """Rows (memory_id, occurred_at): each memory carried as an entry by each context.assembled
    event of workspace ``%(workspace)s`` with an id above ``after`` and up to ``through`` (SQL
    expressions)."""
    return f"""SELECT c.id::bigint AS memory_id, e.occurred_at
    FROM {AuditEvent._meta.db_table} e, jsonb_array_elements_text(e.payload -> 'memoryIds') c(id)
    WHERE e.workspace_id = %(workspace)s AND e.type = '{EventType.ASSEMBLED}'
      AND e.id > {after} AND e.id <= {through}
      AND (e.payload ->> 'origin') IS DISTINCT FROM '{DRY_RUN_ORIGIN}'"""


def carried_after_sql(*, memory: str, workspace: str, after: str) -> str:
    """How many context.assembled events with an id above ``after`` carried memory ``memory``
    of workspace ``workspace`` as an entry (SQL expressions): one range of the injections'
    primary key."""
    return f"(SELECT count(*) {_carried_after(memory, workspace, after)})"


def carried_last_sql(*, memory: str, workspace: str, after: str) -> str:
    """When the latest context.assembled event with an id above ``after`` that carried memory
    ``memory`` of workspace ``workspace`` as an entry occurred (NULL: none did)."""
    return f"""(SELECT e.occurred_at FROM {AuditEvent._meta.db_table} e
     WHERE e.id = (SELECT max(i.event_id) {_carried_after(memory, workspace, after)}))"""


def _carried_after(memory: str, workspace: str, after: str) -> str:
    # The bound comes from a derived table that is not flattened (OFFSET 0): a column of an
    # outer relation can bound the index range, where the expression itself would only filter
    # the memory's every injection (row-level security keeps such expressions above the scan).
    return f"""FROM (SELECT {after} AS mark OFFSET 0) k, {Injection._meta.db_table} i
     WHERE i.workspace_id = {workspace} AND i.memory_id = {memory} AND i.event_id > k.mark
       AND NOT i.truncated AND NOT i.dry_run"""


def assembled_after_sql(*, workspace: str, after: str) -> str:
    """Whether a context.assembled event of workspace ``workspace`` with an id above ``after``
    is committed (SQL expressions): its latest one's id, the first entry of the events' index
    by workspace and type, against ``after``. Written as ``EXISTS (... AND e.id > after)``,
    PostgreSQL made it a semi-join that read every such event of the workspace (92 ms at
    283,000 events, against 0.06 ms)."""
    return f"""coalesce((SELECT max(e.id) FROM {AuditEvent._meta.db_table} e
     WHERE e.workspace_id = {workspace} AND e.type = '{EventType.ASSEMBLED}') > {after}, false)"""


# --- stored queries: kept beside their events, erased with their actor ------------------------


def stored_queries_erase(*, workspace: Workspace, actor_id: str) -> int:
    """Delete the query texts kept for ``actor_id``'s recalls in ``workspace`` (an erasure);
    returns how many went. Their events keep the queries' salted hashes, so the chain still
    verifies."""
    deleted, _ = StoredQuery.objects.filter(workspace=workspace, actor_id=actor_id).delete()
    return deleted


def audit_settled_through(*, workspace_id: int) -> int:
    """The id up to which workspace's trail is settled: every event with an id up to it is
    committed (none is still being appended), and every event appended from now on has a
    greater one. 0 when it has no event. Run it outside any transaction: inside one, the
    heads would stay locked until the caller's end."""
    with transaction.atomic(), connection.cursor() as cursor:
        return _settle(cursor, workspace_id)


def _settle(cursor: Any, workspace_id: int) -> int:
    """Inside a transaction: wait for the appends in flight, hold the heads, and return the
    largest event id (see ``audit_settled_through``).

    An append holds its lane's head until it commits. This locks every head of the
    workspace (creating those of the configured lanes not used yet, so that one being
    created by an append in flight is waited for too), for the caller's transaction: appends
    wait that long, so the caller keeps it to an instant. Every process must share
    ``AUDIT_RECALL_LANES``: a lane only another process knows, with no head yet, is not
    waited for."""
    lanes = list(range(settings.AUDIT_RECALL_LANES + 1))
    head = AuditChainHead._meta.db_table
    cursor.execute(
        f"INSERT INTO {head} (workspace_id, lane, last_hash, length)"
        " SELECT %s, lane, %s, 0 FROM unnest(%s::smallint[]) lane"
        " ON CONFLICT (workspace_id, lane) DO NOTHING",
        [workspace_id, GENESIS_HASH, lanes],
    )
    cursor.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {head} WHERE workspace_id = %s"
        " ORDER BY lane FOR SHARE) locked",
        [workspace_id],
    )
    cursor.execute(
        f"SELECT coalesce(max(id), 0) FROM {AuditEvent._meta.db_table} WHERE workspace_id = %s",
        [workspace_id],
    )
    return int(cursor.fetchone()[0])


def latest_payload_value_sql(*, type: str, key: str, unless: tuple[str, str] | None = None) -> str:
    """``payload ->> key`` of the latest event of ``type`` for one actor, workload and
    environment (named parameters: workspace, actor_id, workload, environment), passing over
    the events whose payload holds ``unless`` (a key and its value)."""
    skip = f"AND ev.payload ->> '{unless[0]}' IS DISTINCT FROM '{unless[1]}'" if unless else ""
    return f"""(SELECT ev.payload ->> '{key}' FROM {AuditEvent._meta.db_table} ev
     WHERE ev.workspace_id = %(workspace)s AND ev.actor_id = %(actor_id)s
       AND ev.workload_id = %(workload)s AND ev.environment = %(environment)s
       AND ev.type = '{type}' {skip}
     ORDER BY ev.id DESC LIMIT 1)"""


_APPEND_SQL = f"""
-- the lane's tip moved from the one expected (a lane without a head yet gets one here: its
-- first event names the genesis hash)
WITH appended AS (
    INSERT INTO {AuditChainHead._meta.db_table} AS head (last_hash, workspace_id, lane, length)
    VALUES (%s, %s, %s, 1)
    ON CONFLICT (workspace_id, lane) DO UPDATE
    SET last_hash = excluded.last_hash, length = head.length + 1
    WHERE head.last_hash = %s
    RETURNING id
),
inserted AS (
    INSERT INTO {AuditEvent._meta.db_table}
        (workspace_id, type, occurred_at, author, workload_id, environment, actor_id, payload,
         prev_hash, hash, key_id, lane)
    SELECT %s, %s, %s::timestamptz, %s, %s::uuid, %s, %s, %s::jsonb, %s, %s, %s, %s
    FROM appended
    RETURNING id
){{work}},
-- when another append moved the tip first: the tip as it is now (the row locked and read at
-- its latest version), for the retry, which then need not read it in a round trip of its own
moved AS (
    SELECT last_hash FROM {AuditChainHead._meta.db_table}
    WHERE workspace_id = %s AND lane = %s AND NOT EXISTS (SELECT 1 FROM appended)
    FOR UPDATE
)
SELECT (SELECT id FROM inserted), (SELECT last_hash FROM moved)
"""


# --- what an append also writes -----------------------------------------------------------------
# The recall hot path records its event and what the event carried in one statement: each kind
# of work below is rendered here into the append's statement, where it takes effect only if the
# event is written (the ``appended``/``inserted`` expressions above), all or nothing.


@dataclass(frozen=True)
class Injections:
    """The memories the event carried (``Injection`` rows, its provenance): ``included`` as
    entries, ``truncated`` as truncated refs; ``dry_run`` for a recall that counts no hits."""

    included: Sequence[int]
    truncated: Sequence[int] = ()
    dry_run: bool = False


@dataclass(frozen=True)
class QueryKept:
    """The event's query text, kept beside it (``StoredQuery``) for the actor it names."""

    text: str


AppendWork = Injections | QueryKept


def _sql_array(values: Sequence[Any]) -> str:
    """A PostgreSQL array literal of ints or bools: psycopg would inspect every element of a
    list to choose its type, on every recall."""
    return (
        "{"
        + ",".join(("t" if v else "f") if isinstance(v, bool) else str(int(v)) for v in values)
        + "}"
    )


def _rendered(
    work: AppendWork, workspace: Workspace, actor_id: str
) -> tuple[str, str, list[Any]] | None:
    """The work's expression (name, SQL) and parameters; None when there is nothing to do."""
    if isinstance(work, QueryKept):
        sql = (
            f"INSERT INTO {StoredQuery._meta.db_table} (event_id, workspace_id, actor_id, text)"
            " SELECT inserted.id, %s, %s, %s FROM inserted"
        )
        return "query", sql, [workspace.pk, actor_id, work.text]
    carried = [*work.included, *work.truncated]
    if not carried:
        return None
    sql = (
        f"INSERT INTO {Injection._meta.db_table}"
        " (memory_id, event_id, workspace_id, truncated, dry_run)"
        " SELECT m.id, inserted.id, %s, m.truncated, %s"
        " FROM inserted, unnest(%s::bigint[], %s::boolean[]) AS m(id, truncated)"
    )
    flags = [False] * len(work.included) + [True] * len(work.truncated)
    return "injections", sql, [workspace.pk, work.dry_run, _sql_array(carried), _sql_array(flags)]


@cache
def _append_statement(work: tuple[tuple[str, str], ...]) -> PreparedStatement:
    """The append with these (name, SQL) expressions: one prepared statement per shape."""
    if len({name for name, _ in work}) < len(work):
        raise ValueError("an append does each kind of work once")
    names = "".join(f"+{name}" for name, _ in work)
    ctes = "".join(f",\n{name} AS ({sql})" for name, sql in work)
    return prepared_statement(f"audit.append{names}", _APPEND_SQL.format(work=ctes))


APPEND_ATTEMPTS = 8

# While set (``audit_backdated``): the slug of the workspace whose events are recorded at a
# past time, and that time. Unset, an event occurs when it is appended.
_backdated: ContextVar[tuple[str, datetime] | None] = ContextVar("audit_backdated", default=None)


@contextmanager
def audit_backdated(*, slug: str, at: datetime) -> Iterator[None]:
    """Record the events of workspace ``slug`` appended inside the block as occurring ``at``.

    For the demo's history only (``load_demo``), which is played oldest first: ``at`` may be
    neither in the future nor before the workspace's latest event, so the chain's times never
    go backwards along its order. By slug, so that the block can create the workspace too.
    """
    if at > timezone.now():
        raise ValueError(f"cannot record events in the future ({at.isoformat()})")
    latest = AuditEvent.objects.filter(workspace__slug=slug).aggregate(last=Max("occurred_at"))
    if latest["last"] is not None and at < latest["last"]:
        raise ValueError(
            f"cannot record events at {at.isoformat()}, before the chain's latest event"
            f" ({latest['last'].isoformat()})"
        )
    token = _backdated.set((slug, at))
    try:
        yield
    finally:
        _backdated.reset(token)


def _occurred_at(workspace: Workspace) -> datetime:
    backdated = _backdated.get()
    if backdated is not None and backdated[0] == workspace.slug:
        return backdated[1]
    return timezone.now()


def audit_event_record(
    *,
    workspace: Workspace,
    type: str,
    author: str,
    payload: dict[str, Any],
    workload_id: uuid.UUID | None = None,
    environment: str = "",
    actor_id: str = "",
) -> AuditEvent:
    """Append one event to the workspace's main chain (lane 0) inside the caller's
    transaction.

    The event commits (or not) with the change it records; the chain head's row lock, held
    to the end of that transaction, orders the main chain's appends.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_event_record must be called inside transaction.atomic()")
    event = _append(
        _locked_tip(workspace, 0),
        workspace=workspace, type=type, author=author, payload=payload,
        workload_id=workload_id, environment=environment, actor_id=actor_id, work=(),
    )  # fmt: skip
    if not isinstance(event, AuditEvent):  # impossible while we hold the lock
        raise RuntimeError("the audit chain moved while locked")
    return event


def audit_event_append(
    *,
    workspace: Workspace,
    tip: ChainTip,
    type: str,
    author: str,
    payload: dict[str, Any],
    workload_id: uuid.UUID | None = None,
    environment: str = "",
    actor_id: str = "",
    work: Sequence[AppendWork] = (),
) -> AuditEvent:
    """Append without a transaction, for the recall hot path: compare-and-swap on the tip of
    the lane ``tip`` names (``ChainTip.of``: a lane without a head yet starts at genesis, and
    gets its head from this statement).

    One statement moves the tip from ``tip`` to the new event's hash, inserts the event and
    does the ``work`` (the injections: rendered here, taking effect only with the event): all
    or nothing, as one statement is. If another append moved the tip first,
    nothing is written, the same statement reads the tip it lost to, and the append is
    retried on it (and this thread's next recall draws another lane); after a few lost races
    it takes the lock. The event is durable when this returns (no transaction holds it open).
    """
    fields: dict[str, Any] = {
        "workspace": workspace, "type": type, "author": author, "payload": payload,
        "workload_id": workload_id, "environment": environment, "actor_id": actor_id,
        "work": work,
    }  # fmt: skip
    lane = tip.lane
    for _ in range(APPEND_ATTEMPTS):
        appended = _append(tip, **fields)
        if isinstance(appended, AuditEvent):
            return appended
        if appended is None:
            break  # the lane's head was created meanwhile, after this statement began
        _lane_shared(lane)
        tip = appended  # the tip another append moved it to
    with transaction.atomic():
        event = _append(_locked_tip(workspace, lane), **fields)
    if not isinstance(event, AuditEvent):  # impossible while we hold the lock
        raise RuntimeError("the audit chain moved while locked")
    return event


def _locked_tip(workspace: Workspace, lane: int) -> ChainTip:
    heads = AuditChainHead.objects.select_for_update().filter(workspace=workspace, lane=lane)
    head = heads.first()
    if head is None:
        AuditChainHead.objects.get_or_create(
            workspace=workspace, lane=lane, defaults={"last_hash": GENESIS_HASH}
        )
        head = heads.get()
    return ChainTip(head.last_hash, lane)


def _append(
    tip: ChainTip,
    *,
    workspace: Workspace,
    type: str,
    author: str,
    payload: dict[str, Any],
    workload_id: uuid.UUID | None,
    environment: str,
    actor_id: str,
    work: Sequence[AppendWork],
) -> AuditEvent | ChainTip | None:
    """One statement: move the tip, insert the event, do the work. The event; or, if another
    append moved the tip first, the tip it moved it to (None if that was another append
    creating the lane's head, which this statement cannot see yet)."""
    # Encode once: the stored jsonb and the hashed fields must be the same JSON (a UUID or
    # datetime in a payload becomes its string in both).
    payload_json = json.dumps(payload, cls=DjangoJSONEncoder)
    payload = json.loads(payload_json)
    occurred_at = _occurred_at(workspace)
    fields = _hashed_fields(
        workspace_slug=workspace.slug,
        type=type,
        occurred_at=occurred_at,
        author=author,
        workload_id=workload_id,
        environment=environment,
        actor_id=actor_id,
        payload=payload,
    )
    key = signing_key()
    digest = event_hash(tip.last_hash, lane_fields(fields, tip.lane), key)
    rendered = [r for r in (_rendered(w, workspace, actor_id) for w in work) if r is not None]
    params: list[Any] = [
        digest, workspace.pk, tip.lane, tip.last_hash,
        workspace.pk, type, occurred_at, author, workload_id, environment, actor_id,
        payload_json, tip.last_hash, digest, key.id, tip.lane,
    ]  # fmt: skip
    for _, _, work_params in rendered:
        params.extend(work_params)
    params.extend((workspace.pk, tip.lane))
    statement = _append_statement(tuple((name, sql) for name, sql, _ in rendered))
    event_id, moved_to = statement.fetchone(params) or (None, None)
    if event_id is None:
        return ChainTip(moved_to, tip.lane) if moved_to else None
    return AuditEvent(
        pk=event_id,
        workspace=workspace,
        type=type,
        occurred_at=occurred_at,
        author=author,
        workload_id=workload_id,
        environment=environment,
        actor_id=actor_id,
        payload=payload,
        prev_hash=tip.last_hash,
        hash=digest,
        key_id=key.id,
        lane=tip.lane,
    )


# The event columns an event's hash covers (with the workspace's slug): _hashed_fields' names.
_HASHED_COLUMNS = (
    "type", "occurred_at", "author", "workload_id", "environment", "actor_id", "payload",
)  # fmt: skip


def _links(
    workspace: Workspace, *, after_id: int | None = None, up_to: int | None = None
) -> Iterator[ChainLink]:
    # Tuples, not model instances: verification reads every event of the chain.
    chain = AuditEvent.objects.filter(workspace=workspace)
    if after_id is not None:
        chain = chain.filter(id__gt=after_id)
    if up_to is not None:
        chain = chain.filter(id__lte=up_to)
    events = chain.order_by("id").values_list(
        "id", "prev_hash", "hash", "key_id", "lane", "seal", *_HASHED_COLUMNS
    )
    for pk, prev, digest, key_id, lane, seal, *hashed in events.iterator(chunk_size=5000):
        yield ChainLink(
            id=pk,
            prev_hash=prev,
            hash=digest,
            key_id=key_id,
            lane=lane,
            seal=seal,
            fields=_hashed_fields(
                workspace_slug=workspace.slug, **dict(zip(_HASHED_COLUMNS, hashed, strict=True))
            ),
        )


def _checkpoint_tips(checkpoint: AuditCheckpoint) -> dict[int, LaneTip]:
    """Each lane's tip as the checkpoint saw it (one written before lanes holds lane 0's)."""
    if not checkpoint.lanes:
        return {0: LaneTip(checkpoint.event_hash, checkpoint.length, checkpoint.event_id)}
    return {
        int(lane): LaneTip(str(digest), int(length), int(event_id))
        for lane, (length, digest, event_id) in checkpoint.lanes.items()
    }


def _lane_name(lane: int) -> str:
    return "" if lane == 0 else f" (lane {lane})"


@dataclass(frozen=True)
class ChainCheck:
    verdict: ChainVerdict
    full: bool  # whether every event was walked (else only those after the checkpoint)
    walked: int  # events this check read
    full_at: datetime | None  # when a walk of the whole chain last held
    anchors: int = 0  # anchors of the chain it was checked against
    newest_anchor_at: str | None = None  # when the newest of them was taken


def audit_chain_verify(*, workspace: Workspace, anchors: AnchorFile | None = None) -> ChainVerdict:
    """Walk the whole chain: every event's link and hash, that it passes through every
    anchor, and that it ends at the head."""
    return audit_chain_check(workspace=workspace, full=True, anchors=anchors).verdict


def audit_chain_check(
    *, workspace: Workspace, full: bool, anchors: AnchorFile | None = None
) -> ChainCheck:
    """Verify the chain, all of it (``full``) or the events after the last checkpoint.

    The chain checked is the one the heads described when the check began: the check first
    settles the trail (``_settle``: appends in flight on any lane commit first) and reads
    each lane's length and tip, so every event up to the largest id it saw is checked, and
    the ones appended while the walk runs are neither missing nor counted. A walk that holds
    moves the workspace's checkpoint to its last event. ``anchors`` are what signed
    checkpoints kept outside the database saw (``audit.anchors``; by default those of
    ``AUDIT_ANCHOR_FILE``, when it is set): every lane must pass through each of its own,
    and a line of the file that fails its signature fails the check.
    """
    anchor_file = anchor_file_read() if anchors is None else anchors
    positions = anchor_file.positions(workspace.pk)
    problems = anchor_file.problems_for(workspace.pk)
    # The trail settled (no append in flight) and its heads read while they are held: every
    # event up to ``up_to`` is committed and counted by its lane's head, and later ones are
    # left for the next check.
    with transaction.atomic(), connection.cursor() as cursor:
        up_to = _settle(cursor, workspace.pk)
        heads = {
            lane: (length, tip)
            for lane, length, tip in AuditChainHead.objects.filter(workspace=workspace).values_list(
                "lane", "length", "last_hash"
            )
        }
    checkpoint = None
    after: dict[int, LaneTip] = {}
    if not full:
        checkpoint = AuditCheckpoint.objects.filter(workspace=workspace).first()
        if checkpoint is not None:
            after = _checkpoint_tips(checkpoint)
            if any(tip.count > heads.get(lane, (0, ""))[0] for lane, tip in after.items()):
                # a head went backwards: only a full walk can say where
                checkpoint, after = None, {}
    start_count = sum(tip.count for tip in after.values())
    # The checkpoint's event is the last one its walk covered, in every lane.
    links = _links(workspace, after_id=checkpoint.event_id if checkpoint else None, up_to=up_to)
    verdict = verify_links(links, keys=chain_keys(), anchored=positions, after=after)
    if verdict.ok:
        verdict = _ends_checked(verdict, heads, positions, problems)
    walked = verdict.checked - start_count
    full_at = checkpoint.full_at if checkpoint else timezone.now()
    if verdict.ok and verdict.last_id is not None and (checkpoint is None or walked):
        main = verdict.tips.get(0, LaneTip())
        AuditCheckpoint.objects.update_or_create(
            workspace=workspace,
            defaults={
                "event_id": verdict.last_id,
                "event_hash": main.hash,
                "length": main.count,
                "lanes": {
                    str(lane): [tip.count, tip.hash, tip.id]
                    for lane, tip in sorted(verdict.tips.items())
                },
                "full_at": full_at,
            },
        )
    newest = max((point.at for point in positions.values()), default=None)
    return ChainCheck(verdict, checkpoint is None, walked, full_at, len(positions), newest)


def _ends_checked(
    verdict: ChainVerdict,
    heads: dict[int, tuple[int, str]],
    positions: dict[tuple[int, int], Any],
    problems: list[str],
) -> ChainVerdict:
    """A walk that held, failed if a lane ends short of its head or of an anchor, or if the
    anchor file had lines that failed."""
    if problems:
        return ChainVerdict(False, verdict.checked, None, problems[0], tips=verdict.tips)
    furthest: dict[int, int] = {}
    for lane, position in positions:
        furthest[lane] = max(furthest.get(lane, 0), position)
    for lane, position in sorted(furthest.items()):
        walked = verdict.tips.get(lane, LaneTip()).count
        if position > walked:
            # Events an anchor saw are gone (a deleted tail with the head moved back to match).
            point = positions[(lane, position)]
            return ChainVerdict(
                False,
                verdict.checked,
                None,
                f"events are missing from the end{_lane_name(lane)}: the anchor taken at"
                f" {point.at} saw {position} events, the chain has {walked}",
                tips=verdict.tips,
            )
    for lane, tip in sorted(verdict.tips.items()):
        if lane not in heads:
            return ChainVerdict(
                False, verdict.checked, tip.id, f"lane {lane} has events but no chain head",
                tips=verdict.tips,
            )  # fmt: skip
        if tip.count > heads[lane][0]:
            return ChainVerdict(
                False, verdict.checked, tip.id,
                f"the chain{_lane_name(lane)} goes on past its head: an event was added"
                " without moving it",
                tips=verdict.tips,
            )  # fmt: skip
    for lane, (length, last_hash) in sorted(heads.items()):
        # A deleted tail leaves a valid-looking chain; the head remembers where it ends.
        tip = verdict.tips.get(lane, LaneTip())
        if tip.count != length:
            return ChainVerdict(
                False,
                verdict.checked,
                None,
                f"events are missing from the end{_lane_name(lane)}",
                tips=verdict.tips,
            )
        if tip.hash != last_hash:
            return ChainVerdict(
                False,
                verdict.checked,
                tip.id,
                f"the last event{_lane_name(lane)} is not the chain's tip",
                tips=verdict.tips,
            )
    return verdict
