"""The large actor's recall right after its memories change, against the same recall with its
funnel cached (``docs/performance.md``: the issue's target is at most 1.5×).

Each request of the three phases comes after one round trip of the benchmark's own to the
database, untimed: a memory added (``memory_added``), one edited, suppressed or deleted
(``memories_changed``), or, for the cached funnel, the read of the row a change would pick
(``memory_looked_up``), which changes nothing. The server thus idles for the same moment
before every request of every phase: on this machine a request after any pause (even a
``time.sleep`` of 3 ms, no database work at all) takes ~1 ms longer than one sent the instant
the last returned, so a baseline of back-to-back requests would count that pause as the
change's cost. The phases run in alternating rounds, each after the hits were folded (as beat
does every ``RECALL_HITS_FOLD_SECONDS``), so that a slow stretch of the machine and the hits
piling up for the ranked rows (each recall of a row counts its hits since the fold) fall on
every phase alike.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from typing import Any

from bench.servers import http_run, summary

BENCH_ROW = "bench: added during the run"

# The rows ``memory_added`` wrote and no change deleted since, oldest first: a change picks one
# by its id, so that its own statement costs no more than a write of one row does.
_ADDED: list[int] = []
_CHANGE_TURNS = itertools.count()


def memory_added(actor_pk: int) -> None:
    """One more memory for the actor (a copy of one of its rows), as an agent adds after a turn."""
    from django.db import connection

    from recall.models import MemoryRecord

    skip = ("id", "content")
    names = ", ".join(f.column for f in MemoryRecord._meta.concrete_fields if f.column not in skip)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO recall_memoryrecord (content, {names})"
            f" SELECT %s, {names} FROM recall_memoryrecord"
            " WHERE actor_id = %s ORDER BY id LIMIT 1 RETURNING id",
            [BENCH_ROW, actor_pk],
        )
        _ADDED.append(cursor.fetchone()[0])


def memories_changed(actor_pk: int) -> None:
    """One edit, suppression or delete of one of the actor's memories, in turn (what the
    memory API's PATCH, suppress and DELETE write): the next recall merges it into the cached
    funnel. The rows changed are the ones ``memory_added`` wrote (removed after the run)."""
    from django.db import connection

    _rows_ready(actor_pk)
    turn = next(_CHANGE_TURNS)
    with connection.cursor() as cursor:
        if turn % 3 == 0:
            sensitivity = ("public", "internal", "confidential")[turn // 3 % 3]
            cursor.execute(
                "UPDATE recall_memoryrecord SET sensitivity = %s WHERE id = %s",
                [sensitivity, _ADDED[turn % 7]],
            )
        elif turn % 3 == 1:
            cursor.execute(
                "UPDATE recall_memoryrecord SET lifecycle_status = CASE lifecycle_status"
                " WHEN 'active' THEN 'suppressed' ELSE 'active' END WHERE id = %s",
                [_ADDED[turn % 5]],
            )
        else:
            cursor.execute("DELETE FROM recall_memoryrecord WHERE id = %s", [_ADDED.pop(0)])


def memory_looked_up(actor_pk: int) -> None:
    """The round trip ``memories_changed`` makes, without the change: a row it could pick,
    read. The cached funnel's phase waits for it before each request."""
    from django.db import connection

    _rows_ready(actor_pk)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sensitivity, lifecycle_status FROM recall_memoryrecord"
            " WHERE id = %s AND actor_id = %s",
            [_ADDED[0], actor_pk],
        )
        cursor.fetchall()


def _rows_ready(actor_pk: int) -> None:
    """Rows of ``memory_added``'s for a change to pick, or the cached phase to read (the
    first time, untimed like every step before a request)."""
    while len(_ADDED) < 8:
        memory_added(actor_pk)


def bench_rows_removed() -> None:
    """The rows ``memory_added`` wrote, so the dataset is the same for the next run."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM recall_memoryrecord WHERE content = %s", [BENCH_ROW])
    _ADDED.clear()


PHASES = {
    "cached": memory_looked_up,
    "afterInsert": memory_added,
    "afterChange": memories_changed,
}


def large_rounds(
    token: str, body: dict[str, Any], jobs: list[tuple[str, str]], *, actor_pk: int,
    workspace_id: int, rounds: int = 4,
) -> dict[str, Any]:  # fmt: skip
    """The three phases (``PHASES``) in ``rounds`` rounds, each round in another order, each
    phase after a fold of the hits: per phase, the median of the rounds' p50s and the summary
    of every request."""
    from django.db import connection

    from recall.hits import hits_fold

    names = list(PHASES)
    p50s: dict[str, list[float]] = {name: [] for name in names}
    kept: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            hits_fold(workspace_id=workspace_id)
            result = http_run(
                token, body, jobs, concurrency=1,
                before_each=functools.partial(PHASES[name], actor_pk), latencies_kept=kept[name],
            )  # fmt: skip
            p50s[name].append(result["p50Ms"])
    connection.close()
    return {
        "rounds": rounds,
        "requestsPerRound": len(jobs),
        "p50Ms": {name: round(statistics.median(values), 2) for name, values in p50s.items()},
        # the pooled requests (throughput over their own time, pauses excluded)
        **{name: summary(values, sum(values) / 1000) for name, values in kept.items()},
    }
