"""Maintenance's SQL, written once: the statements the sweeps (``maintenance.sweeps``) and
the reverts (``maintenance.reverts``) run on recall's memory table, as templates in the manner
of ``recall.engine``: ``{memories}``, ``{actors}`` and ``{items}`` stand for the tables and
``{fingerprint}`` for a row's fingerprint; parameters are named. The functions below render
and run them, so no caller writes or rewrites SQL. (The connection counts have their own
module, ``maintenance.connections``; the vectors are written by recall's engine.)

Rows are locked in id order, as recall's writes lock them, so the two never wait on each
other in a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from django.db import connection

from maintenance.models import MaintenanceItem
from recall.models import Actor, MemoryRecord

TABLES = {
    "memories": MemoryRecord._meta.db_table,
    "actors": Actor._meta.db_table,
    "items": MaintenanceItem._meta.db_table,
}

# A hash of everything a sweep's decision reads or writes: an execute changes a row only if
# this is still what was listed. A recall's hit moves it (decay and promotion read hits).
FINGERPRINT = (
    "md5(ROW(m.lifecycle_status, m.is_current, m.tier, m.superseded_by_id, m.expires_at,"
    " m.last_accessed_at, m.hit_count, m.confidence, m.updated_at, m.embedding_model,"
    " m.stale_since, m.memory_type)::text)"
)


def _sql(template: str, **parts: str) -> str:
    return template.format(**TABLES, fingerprint=FINGERPRINT, **parts)


def _run(template: str, params: Mapping[str, Any], **parts: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(_sql(template, **parts), params)
        return list(cursor.fetchall()) if cursor.description else []


# --- listing --------------------------------------------------------------------------------

# A page of a workspace's memories with what the rules read of them (``sweeps.Row``).
FACTS = """
SELECT m.id, a.kind || ':' || a.name, m.tier, m.lifecycle_status, m.is_current, m.confidence,
       m.created_at, m.last_accessed_at, m.hit_count, m.expires_at,
       coalesce(m.stale_since, m.updated_at), m.embedding_model, {fingerprint}, m.actor_id,
       m.reactivated_at
FROM {memories} m JOIN {actors} a ON a.id = m.actor_id
WHERE m.workspace_id = %(workspace)s AND {after} AND ({prefilter})
ORDER BY {order}
LIMIT %(page)s
"""
# Keyset pagination: by id, or actor by actor (by id within each; memory_recall_cover_idx).
Order = Literal["id", "actor"]
ORDERS: dict[str, tuple[str, str]] = {
    "id": ("m.id > %(after)s", "m.id"),
    "actor": ("(m.actor_id, m.id) > (%(after_actor)s, %(after)s)", "m.actor_id, m.id"),
}
# What each listing narrows the page to in SQL: never fewer rows than its rule admits
# (``maintenance.lifecycle`` decides each row).
Prefilter = Literal["expiry", "decay", "retention", "promotion", "promotion_of_actor", "reembed"]
PREFILTERS: dict[str, str] = {
    "expiry": "m.lifecycle_status IN ('active', 'inactive') AND m.expires_at <= %(now)s",
    "decay": (
        "m.lifecycle_status = 'active' AND m.is_current"
        " AND (m.tier = 'short_term' OR %(long)s)"
        " AND m.created_at <= %(old_enough)s"
        " AND greatest(coalesce(m.last_accessed_at, m.created_at), m.reactivated_at)"
        " <= %(untouched_since)s"
    ),
    "retention": (
        "m.lifecycle_status = 'stale' AND coalesce(m.stale_since, m.updated_at) <= %(stale_before)s"
    ),
    "promotion": "m.tier = 'short_term' AND m.lifecycle_status = 'active' AND m.is_current",
    "reembed": "m.embedding_model IS DISTINCT FROM %(model)s",
}
PREFILTERS["promotion_of_actor"] = PREFILTERS["promotion"] + " AND m.actor_id = %(actor)s"


def facts_page(
    *,
    workspace_id: int,
    prefilter: Prefilter,
    params: Mapping[str, Any],
    order: Order,
    after: int,
    after_actor: int,
    page: int,
) -> list[tuple[Any, ...]]:
    """One page of ``FACTS`` after the keyset (``after``, ``after_actor``)."""
    keyset, ordering = ORDERS[order]
    return _run(
        FACTS,
        {**params, "workspace": workspace_id, "after": after, "after_actor": after_actor,
         "page": page},
        prefilter=PREFILTERS[prefilter], after=keyset, order=ordering,
    )  # fmt: skip


LOCKED = """
SELECT m.id, {fingerprint} FROM {memories} m
WHERE m.workspace_id = %(workspace)s AND m.id = ANY(%(ids)s) ORDER BY m.id FOR UPDATE
"""


def fingerprints_locked(*, workspace_id: int, ids: Sequence[int]) -> dict[int, str]:
    """The fingerprints of the memories ``ids`` that still exist, locked (in id order) to the
    end of the caller's transaction."""
    return dict(_run(LOCKED, {"workspace": workspace_id, "ids": sorted(ids)}))


# --- retention: the archive's lines -----------------------------------------------------------

# The import's fields, in the API's camelCase: an archive line is a memory the import
# (page or API) accepts back, under its own id.
ARCHIVE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "m.id::text"),
    ("actorId", "a.kind || ':' || a.name"),
    ("content", "m.content"),
    ("memoryType", "m.memory_type"),
    ("sourceKind", "m.source_kind"),
    ("confirmationStatus", "m.confirmation_status"),
    ("confidence", "m.confidence"),
    ("sensitivity", "m.sensitivity"),
    ("consentPolicy", "m.consent_policy"),
    ("segmentKind", "m.segment_kind"),
    ("lifecycleStatus", "m.lifecycle_status"),
    ("isCurrent", "m.is_current"),
    ("tier", "m.tier"),
    ("expiresAt", "m.expires_at"),
    ("staleSince", "m.stale_since"),
    ("createdAt", "m.created_at"),
    ("lastAccessedAt", "m.last_accessed_at"),
    ("hitCount", "m.hit_count"),
)
ARCHIVED = """
SELECT {columns} FROM {memories} m JOIN {actors} a ON a.id = m.actor_id
WHERE m.id = ANY(%(ids)s) ORDER BY m.id
"""


def archive_rows(ids: Sequence[int]) -> list[dict[str, Any]]:
    """The memories ``ids`` by ``ARCHIVE_COLUMNS``' names, in id order."""
    columns = ", ".join(expression for _, expression in ARCHIVE_COLUMNS)
    names = [name for name, _ in ARCHIVE_COLUMNS]
    rows = _run(ARCHIVED, {"ids": list(ids)}, columns=columns)
    return [dict(zip(names, row, strict=True)) for row in rows]


# --- dedup ----------------------------------------------------------------------------------

INSIGHT_ACTORS = """
SELECT DISTINCT m.actor_id FROM {memories} m
WHERE m.workspace_id = %(workspace)s AND m.actor_id > %(after)s
  AND m.memory_type = 'insight' AND m.is_current
ORDER BY m.actor_id LIMIT %(limit)s
"""
# Each actor's ``limit`` most recent current, active insights embedded by ``model``.
INSIGHTS = """
SELECT m.id, a.kind || ':' || a.name, m.created_at, {fingerprint}
FROM (
    SELECT r.id FROM (
        SELECT m.id, row_number() OVER (
            PARTITION BY m.actor_id ORDER BY m.created_at DESC, m.id DESC) AS rank
        FROM {memories} m
        WHERE m.workspace_id = %(workspace)s AND m.actor_id = ANY(%(actors)s)
          AND m.memory_type = 'insight' AND m.is_current AND m.lifecycle_status = 'active'
          AND m.embedding_model = %(model)s
    ) r WHERE r.rank <= %(limit)s
) recent
JOIN {memories} m ON m.id = recent.id JOIN {actors} a ON a.id = m.actor_id
"""
# Pairs of them, of one actor, within ``max_distance`` (cosine) of each other.
PAIRS = """
SELECT x.id, y.id, 1 - (x.embedding <=> y.embedding)
FROM {memories} x JOIN {memories} y
  ON x.actor_id = y.actor_id AND x.id < y.id
WHERE x.id = ANY(%(ids)s) AND y.id = ANY(%(ids)s)
  AND (x.embedding <=> y.embedding) <= %(max_distance)s
"""
SUPERSEDE = """
UPDATE {memories} m SET is_current = false, superseded_by_id = v.newer, updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(newer)s::bigint[]) AS v(id, newer)
WHERE m.id = v.id
"""


def insight_actors(*, workspace_id: int, after: int, limit: int) -> list[int]:
    """The next ``limit`` actors (by pk, after ``after``) with a current insight."""
    params = {"workspace": workspace_id, "after": after, "limit": limit}
    return [pk for (pk,) in _run(INSIGHT_ACTORS, params)]


def recent_insights(
    *, workspace_id: int, actor_pks: Sequence[int], model: str, limit: int
) -> list[tuple[Any, ...]]:
    """(id, actor id, created at, fingerprint) of ``INSIGHTS``."""
    params = {"workspace": workspace_id, "actors": list(actor_pks), "model": model, "limit": limit}
    return _run(INSIGHTS, params)


def insight_pairs(*, ids: Sequence[int], max_distance: float) -> dict[tuple[int, int], float]:
    """The similarity of each pair of ``PAIRS``."""
    rows = _run(PAIRS, {"ids": list(ids), "max_distance": max_distance})
    return {(a, b): float(similarity) for a, b, similarity in rows}


def insights_superseded(*, newer: Mapping[int, int], now: datetime) -> None:
    """Each older insight of ``newer`` is no longer current, superseded by its newer one."""
    _run(SUPERSEDE, {"ids": list(newer), "newer": list(newer.values()), "now": now})


# --- the sweeps' changes ----------------------------------------------------------------------

Change = Literal["expire", "stale", "promote"]
CHANGES: dict[str, str] = {
    "expire": "lifecycle_status = 'expired', stale_since = NULL, updated_at = %(now)s",
    "stale": "lifecycle_status = 'stale', stale_since = %(now)s, updated_at = %(now)s",
    "promote": "tier = 'long_term', updated_at = %(now)s",
}
CHANGED = "UPDATE {memories} SET {change} WHERE id = ANY(%(ids)s)"


def memories_changed(*, ids: Sequence[int], change: Change, now: datetime) -> None:
    """Apply one of ``CHANGES`` to the memories ``ids``."""
    _run(CHANGED, {"ids": list(ids), "now": now}, change=CHANGES[change])


# --- what an item records, and what a revert puts back ----------------------------------------


def state_json(columns: Iterable[str], alias: str = "m") -> str:
    """The columns of a memory row as one JSON object, keyed by column name (timestamps as
    ISO 8601 text): what an item records, and what a revert compares it with."""
    return "jsonb_build_object(" + ", ".join(f"'{c}', {alias}.{c}" for c in columns) + ")"


STATE_RECORD = """
UPDATE {items} i SET {field} = {state} FROM {memories} m
WHERE i.run_id = %(run)s AND i.memory_id = ANY(%(ids)s) AND m.id = i.memory_id
"""
# As the run left it: the columns it wrote still hold what it wrote.
STATE_UNCHANGED = """
SELECT m.id, {state} = i.after FROM {memories} m
JOIN {items} i ON i.run_id = %(run)s AND i.memory_id = m.id
WHERE m.workspace_id = %(workspace)s AND m.id = ANY(%(ids)s) ORDER BY m.id{lock}
"""
STATE_RESTORE = """
UPDATE {memories} m SET {assignments}, updated_at = %(now)s FROM (
    SELECT i.memory_id, jsonb_populate_record(NULL::{memories}, i.before) AS old
    FROM {items} i WHERE i.run_id = %(run)s AND i.memory_id = ANY(%(ids)s)) r
WHERE m.id = r.memory_id AND m.workspace_id = %(workspace)s
"""


def state_record(
    *, run_id: int, ids: Sequence[int], field: Literal["before", "after"], columns: Sequence[str]
) -> None:
    """Write the rows' ``columns`` as they are now into the items' ``field``."""
    _run(STATE_RECORD, {"run": run_id, "ids": list(ids)}, field=field, state=state_json(columns))


def states_unchanged(
    *, run_id: int, workspace_id: int, ids: Sequence[int], columns: Sequence[str], lock: bool
) -> dict[int, bool]:
    """Of the memories ``ids`` that still exist, whether ``columns`` hold what the run wrote
    (locked, in id order, if ``lock``)."""
    rows = _run(
        STATE_UNCHANGED,
        {"run": run_id, "workspace": workspace_id, "ids": list(ids)},
        state=state_json(columns),
        lock=" FOR UPDATE OF m" if lock else "",
    )
    return dict(rows)


def states_restore(
    *, run_id: int, workspace_id: int, ids: Sequence[int], fields: Sequence[str], now: datetime
) -> None:
    """Write each row's recorded ``before`` back into ``fields``."""
    assignments = ", ".join(f"{column} = (r.old).{column}" for column in fields)
    params = {"run": run_id, "workspace": workspace_id, "ids": list(ids), "now": now}
    _run(STATE_RESTORE, params, assignments=assignments)
