"""A memory's hits: how often recalls carried it (``hit_count``) and when one last did
(``last_accessed_at``), counted without rewriting the memory on every recall.

A recall's hits are already written down by its audit event: the memories it carried as
entries (its injections). The recall itself writes nothing else; ``hits_fold`` later adds the
events appended since the workspace's ``HitFold`` mark to the memories' columns and moves the
mark, all in one transaction. The columns are therefore exact up to the mark, and:

- the recall read adds, to each row it ranks, the hits after the mark (``RANKED_HITS_SQL``),
  so that scoring sees every earlier recall, as when each recall counted its own;
- the memory API and pages read the rows ``with_hits`` (the same sums, in the same query)
  and show ``MemoryRecord.hits`` and ``last_accessed``;
- the maintenance sweeps, which decide on the columns in SQL, fold first (``hits_fold``);
- beat folds every workspace every ``RECALL_HITS_FOLD_SECONDS``, so that what is pending
  stays small; without a broker nothing is scheduled, and the recall endpoint folds its own
  workspace as often instead (``hits_fold_due``).

The mark only moves over events that are settled: ``audit_settled_through`` waits for the
appends in flight, so no event with a smaller id can still arrive and be skipped.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import DatabaseError, connection, models, transaction
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from audit.services import (
    assembled_after_sql,
    audit_settled_through,
    carried_after_sql,
    carried_last_sql,
    carried_sql,
)
from portal.models import Workspace
from portal.tasks import eager, send_in_background
from recall.models import HitFold, MemoryRecord

logger = logging.getLogger(__name__)


def _mark_of(workspace: str) -> str:
    """The mark of workspace ``workspace`` (an SQL expression); 0 before its first fold."""
    return (
        f"coalesce((SELECT f.event_id FROM {HitFold._meta.db_table} f"
        f" WHERE f.workspace_id = {workspace}), 0)"
    )


def _pending(row: str) -> dict[str, str]:
    workspace = f"{row}.workspace_id"
    return {"memory": f"{row}.id", "workspace": workspace, "after": _mark_of(workspace)}


# A ranked memory's hit count as if every recall had counted its own: the folded count and
# the hits after the mark (memory row ``m``).
RANKED_HITS_SQL = "m.hit_count + " + carried_after_sql(**_pending("m"))

_TABLE = MemoryRecord._meta.db_table


def with_hits(rows: QuerySet[MemoryRecord]) -> QuerySet[MemoryRecord]:
    """``rows`` with the recalls not counted into them yet, for ``MemoryRecord.hits`` and
    ``last_accessed``: two sub-selects per row (a range of the injections' key each), in the
    same query. For querysets that do not alias the memory table (no self-join)."""
    return rows.annotate(
        hits_pending=RawSQL(
            carried_after_sql(**_pending(_TABLE)), (), output_field=models.IntegerField()
        ),
        accessed_pending=RawSQL(
            carried_last_sql(**_pending(_TABLE)), (), output_field=models.DateTimeField()
        ),
    )


_FOLD_SQL = f"""
WITH hits AS MATERIALIZED (
    SELECT memory_id, count(*) AS n, max(occurred_at) AS at
    FROM ({carried_sql(after="%(after)s", through="%(through)s")}) carried
    GROUP BY memory_id
),
counted AS (
    UPDATE {MemoryRecord._meta.db_table} m
    SET hit_count = m.hit_count + h.n, last_accessed_at = greatest(m.last_accessed_at, h.at)
    FROM hits h
    WHERE m.id = h.memory_id AND m.workspace_id = %(workspace)s
    RETURNING 1
)
UPDATE {HitFold._meta.db_table} SET event_id = %(through)s
WHERE workspace_id = %(workspace)s AND event_id = %(after)s
RETURNING (SELECT count(*) FROM counted)
"""


# The workspaces (among ``%(ids)s``, or all when it is NULL) with a recall after their mark:
# the others have nothing to count, and whatever is being appended to them now comes after
# the mark, which stays, so they need not hold their heads.
_DUE_SQL = f"""
SELECT w.id FROM {Workspace._meta.db_table} w
WHERE (%(ids)s::bigint[] IS NULL OR w.id = ANY (%(ids)s::bigint[]))
  AND {assembled_after_sql(workspace="w.id", after=_mark_of("w.id"))}
ORDER BY w.id
"""


def _due(ids: list[int] | None) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(_DUE_SQL, {"ids": ids})
        return [row[0] for row in cursor.fetchall()]


def hits_fold(*, workspace_id: int) -> int:
    """Count the workspace's recalls since its mark into its memories; returns how many
    memories changed. Safe to run at any time and from several processes at once (they take
    turns on the mark's row). Outside any transaction."""
    if not _due([workspace_id]):
        return 0
    return _fold(workspace_id)


def _fold(workspace_id: int) -> int:
    through = audit_settled_through(workspace_id=workspace_id)
    with transaction.atomic(), connection.cursor() as cursor:
        HitFold.objects.get_or_create(workspace_id=workspace_id)
        mark = HitFold.objects.select_for_update().get(workspace_id=workspace_id)
        if mark.event_id >= through:
            return 0
        cursor.execute(
            _FOLD_SQL, {"workspace": workspace_id, "after": mark.event_id, "through": through}
        )
        row = cursor.fetchone()
        return int(row[0]) if row else 0


def hits_fold_all() -> int:
    """``hits_fold`` for every workspace with recalls to count (beat's task, one query to
    find them); returns how many memories changed."""
    return sum(_fold(pk) for pk in _due(None))


# When this process last folded each workspace's hits (monotonic seconds), without a broker,
# and how many of its recalls this process served since it last folded or asked for a fold.
_FOLDED_AT: dict[int, float] = {}
_RECALLS_SINCE: dict[int, int] = {}


def hits_fold_due(*, workspace_id: int) -> None:
    """Called by the recall endpoint after each recall, to keep what is pending small: each
    read adds, to each row it ranks, the hits since the fold, one index entry at a time, so an
    actor recalled many times a second would read hundreds per row before beat's next fold.

    Every ``RECALL_HITS_FOLD_RECALLS`` recalls of a workspace in this process, the workspace
    is folded: at once without a broker; with one, by a worker, the task sent from a thread of
    its own so that a broker that is down or hung costs the recall nothing (a send still in
    flight drops the next; beat folds later anyway). Without a broker, nothing schedules the
    fold either, so the workspace is also folded once ``RECALL_HITS_FOLD_SECONDS`` have passed
    since this process last did (its first recall in a process starts the clock); with one,
    beat does that. A fold in the request that fails (a lock it waited too long for, a lost
    connection) is logged and left to the next: the recall is recorded and answered."""
    in_request = eager()
    served = _RECALLS_SINCE.get(workspace_id, 0) + 1
    now = time.monotonic()
    last = _FOLDED_AT.setdefault(workspace_id, now)
    by_count = served >= settings.RECALL_HITS_FOLD_RECALLS
    if not by_count and not (in_request and now - last >= settings.RECALL_HITS_FOLD_SECONDS):
        _RECALLS_SINCE[workspace_id] = served
        return
    _RECALLS_SINCE[workspace_id] = 0
    _FOLDED_AT[workspace_id] = now
    if not in_request:
        send_in_background(
            "recall.fold_workspace_hits",
            workspace_id,
            deferred="beat folds every workspace's hits every RECALL_HITS_FOLD_SECONDS",
        )
        return
    try:
        hits_fold(workspace_id=workspace_id)
    except DatabaseError as exc:
        logger.warning(
            "The hits of workspace %s were not folded (%s); the next fold counts them.",
            workspace_id,
            type(exc).__name__,
        )
