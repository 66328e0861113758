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

import time

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from audit.services import (
    audit_assembled_after,
    audit_settled_through,
    carried_after_sql,
    carried_last_sql,
    carried_sql,
)
from portal.models import Workspace
from recall.models import HitFold, MemoryRecord


def _mark_of(row: str) -> str:
    """The workspace's mark, for memory row ``row`` (a table name or alias)."""
    return (
        f"coalesce((SELECT f.event_id FROM {HitFold._meta.db_table} f"
        f" WHERE f.workspace_id = {row}.workspace_id), 0)"
    )


def _pending(row: str) -> dict[str, str]:
    return {"memory": f"{row}.id", "workspace": f"{row}.workspace_id", "after": _mark_of(row)}


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


def hits_fold(*, workspace_id: int) -> int:
    """Count the workspace's recalls since its mark into its memories; returns how many
    memories changed. Safe to run at any time and from several processes at once (they take
    turns on the mark's row). Outside any transaction."""
    folded = HitFold.objects.filter(workspace_id=workspace_id).values_list("event_id", flat=True)
    if not audit_assembled_after(workspace_id=workspace_id, after=folded.first() or 0):
        # Nothing to count, and whatever is being appended now comes after the mark, which
        # stays: no need to hold the heads.
        return 0
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
    """``hits_fold`` for every workspace (beat's task); returns how many memories changed."""
    ids = Workspace.objects.order_by("pk").values_list("pk", flat=True)
    return sum(hits_fold(workspace_id=pk) for pk in ids)


# When this process last folded each workspace's hits (monotonic seconds), without a broker.
_FOLDED_AT: dict[int, float] = {}


def hits_fold_due(*, workspace_id: int) -> None:
    """Without a broker (tasks run eagerly), nothing schedules the fold: the recall endpoint
    calls this after each recall, and it folds the workspace at most every
    ``RECALL_HITS_FOLD_SECONDS`` per process (a workspace's first recall in a process starts
    the clock). With a broker it does nothing: beat folds."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        return
    now = time.monotonic()
    last = _FOLDED_AT.setdefault(workspace_id, now)
    if now - last < settings.RECALL_HITS_FOLD_SECONDS:
        return
    _FOLDED_AT[workspace_id] = now
    hits_fold(workspace_id=workspace_id)
