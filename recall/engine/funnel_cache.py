"""The funnel cache (``recall.models.FunnelCache``): its part of the recall statement, its
limits, and the triggers that keep its keys current.

The recall statement (``recall.engine.read``) looks an actor's funnel up (:data:`LOOKUP`), merges
the rows added since and the rows that waited for their embedding, and, in its read-and-fill
variant only, stores the funnel it computed (:data:`FILL`). An entry is keyed by the policy's
filter values (:func:`filter_key`) and by two counters on the actor that triggers on the memory
table keep, whoever writes the rows (:data:`TRIGGERS`): ``memory_version`` moves on a delete or a
change of a filtered column, ``memory_inserts`` counts inserts. The triggers were installed by
migrations 0007-0011, whose SQL stays as it was; the constants here are that SQL as it stands
now, for a new migration to import (tests/recall/test_engine.py checks them against the
migrations).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from recall.engine.policy_filter import FILTER_COLUMNS, policy_filter_sql
from recall.models import Actor, FunnelCache, MemoryRecord

# Actors with at least this many memories keep their funnel (below it the scan costs less
# than writing the cache would).
FUNNEL_CACHE_MIN = 2_000
# Funnels kept per actor, one per policy filter (overrides make new filters).
FUNNEL_CACHE_PER_ACTOR = 8
# Rejected ids kept per funnel (the most verbosity ``full`` ever lists).
REJECTED_KEEP = 200
# A funnel with more rows waiting for their embedding than this is not cached.
FUNNEL_PENDING_MAX = 2_000

TABLE = MemoryRecord._meta.db_table
CACHE = FunnelCache._meta.db_table
ACTOR = Actor._meta.db_table
_DECISION = policy_filter_sql("decision")


def filter_key(params: dict[str, Any]) -> str:
    """What the funnel depends on besides the rows and the clock: the policy's filter values."""
    relevant = {k: v for k, v in params.items() if k not in ("now", "min_created")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


# Common table expressions of the recall statement, after ``actor``: the actor's cached funnel
# if it is current (``cached``), and usable (``usable``: the rows added since are exactly the
# rows inserted since), with the rows to code on top of it (``added``, ``rechecked``).
LOOKUP = f"""cached AS MATERIALIZED (
    SELECT f.counts, f.eligible, f.rejected, f.max_id, f.memory_inserts, f.valid_until, f.pending
    FROM {CACHE} f JOIN actor a ON f.actor_id = a.id
    WHERE f.filter_key = %(filter_key)s AND f.memory_version = a.memory_version
      AND (f.valid_until IS NULL OR f.valid_until > %(now)s)
      -- stored without ids (too many to rank exactly then), but the exact path wants them now
      AND (f.eligible IS NOT NULL OR (f.counts ->> 'passes_policy')::bigint > %(exact_max)s)
),
-- the memories added since the cached funnel, when there is one
added AS MATERIALIZED (
    SELECT m.id, {_DECISION} AS code, m.created_at, m.expires_at
    FROM {TABLE} m
    WHERE m.actor_id = (SELECT id FROM actor) AND m.id > (SELECT max_id FROM cached)
),
-- the memories that waited for their embedding when the funnel was cached: the embedding job
-- leaves the actor's version alone (migration 0011), so they are coded again instead
rechecked AS MATERIALIZED (
    SELECT m.id, {_DECISION} AS code, m.created_at, m.expires_at
    FROM cached c CROSS JOIN unnest(c.pending) p(id) JOIN {TABLE} m ON m.id = p.id
    WHERE m.actor_id = (SELECT id FROM actor)
),
-- the cached funnel, if the added rows are all the rows inserted since it was computed
usable AS MATERIALIZED (
    SELECT c.* FROM cached c, actor a
    WHERE a.memory_inserts - c.memory_inserts = (SELECT count(*) FROM added)
)"""

# The fill, last of the statement's expressions (it reads ``coded``, ``counts``, ``passing``,
# ``rejected`` and ``eligible_ids``): a large actor's funnel, computed or extended by this
# recall, is stored; an actor keeps its most recent funnels only (one per filter: overrides
# vary). Rows another recall is writing are skipped, never waited for (no lock cycles), and an
# older funnel never overwrites a newer one.
FILL = f"""filling AS MATERIALIZED (
    SELECT 1 WHERE (NOT EXISTS (SELECT 1 FROM usable) OR EXISTS (SELECT 1 FROM coded))
      AND (SELECT coalesce(sum(n), 0) FROM counts) >= %(cache_min)s
      -- every pending row is rechecked on each use: not worth it for a mass (re-)embedding
      AND (SELECT coalesce(sum(n), 0) FROM counts WHERE code = 'embedding_pending')
          <= {FUNNEL_PENDING_MAX}
),
-- an actor keeps its most recently computed funnels only (one per filter: overrides vary);
-- rows another recall is writing are skipped, never waited for (no lock cycles)
pruned AS (
    DELETE FROM {CACHE} p
    WHERE p.id IN (
        SELECT q.id FROM {CACHE} q
        WHERE EXISTS (SELECT 1 FROM filling)
          AND q.actor_id = (SELECT id FROM actor) AND q.filter_key <> %(filter_key)s
          AND q.id NOT IN (
            SELECT k.id FROM {CACHE} k
            WHERE k.actor_id = (SELECT id FROM actor) AND k.filter_key <> %(filter_key)s
            ORDER BY k.computed_at DESC LIMIT {FUNNEL_CACHE_PER_ACTOR - 1}
          )
        FOR UPDATE SKIP LOCKED
    )
),
fill AS (
    INSERT INTO {CACHE} AS f (
        actor_id, filter_key, memory_version, memory_inserts, max_id, valid_until, counts,
        eligible, rejected, pending, computed_at
    )
    SELECT
        a.id, %(filter_key)s, a.memory_version, a.memory_inserts,
        coalesce(greatest((SELECT max_id FROM usable), (SELECT max(id) FROM coded)), 0),
        -- the first moment a row expires or ages past maxAgeSeconds (least() skips NULLs)
        least(
            (SELECT valid_until FROM usable),
            (SELECT least(
                min(c.expires_at) FILTER (WHERE c.expires_at > %(now)s),
                min(c.created_at + make_interval(secs => %(max_age_seconds)s))
                    FILTER (WHERE c.created_at >= %(min_created)s)
             ) FROM coded c)
        ),
        (SELECT jsonb_object_agg(code, n) FROM counts),
        CASE WHEN (SELECT n FROM passing) <= %(exact_max)s THEN
            (SELECT coalesce(array_agg(id ORDER BY id), '{{}}') FROM eligible_ids)
        END,
        (SELECT coalesce(jsonb_agg(jsonb_build_array(r.id, r.code) ORDER BY r.id), '[]')
         FROM (SELECT id, code FROM rejected ORDER BY id LIMIT {REJECTED_KEEP}) r),
        (SELECT coalesce(array_agg(id ORDER BY id), '{{}}') FROM coded
         WHERE code = 'embedding_pending'),
        %(now)s
    FROM actor a
    WHERE EXISTS (SELECT 1 FROM filling)
    ON CONFLICT (actor_id, filter_key) DO UPDATE SET
        memory_version = excluded.memory_version, memory_inserts = excluded.memory_inserts,
        max_id = excluded.max_id, valid_until = excluded.valid_until, counts = excluded.counts,
        eligible = excluded.eligible, rejected = excluded.rejected, pending = excluded.pending,
        computed_at = excluded.computed_at
    WHERE (f.memory_version, f.memory_inserts)
        <= (excluded.memory_version, excluded.memory_inserts)
)"""


# --- the triggers, as migrations 0007-0011 left them ---------------------------------------------

# A change of one of these makes the actor's cached funnels stale (``memory_version``). The
# embedding model is watched apart: a memory embedded at last (from '' to a model) is rechecked
# by every use of a cached funnel (``FunnelCache.pending``), so only other changes count.
TRIGGER_COLUMNS = ("actor_id", *(c for c in FILTER_COLUMNS if c != "embedding_model"))
_CHANGED = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in TRIGGER_COLUMNS) + (
    " OR (OLD.embedding_model IS DISTINCT FROM NEW.embedding_model AND OLD.embedding_model <> '')"
)

# Inserts are counted, not versioned: recall merges the new rows into a cached funnel (0008).
INSERTED_FUNCTION = """\
CREATE OR REPLACE FUNCTION recall_bump_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE recall_actor a SET memory_inserts = a.memory_inserts + n.added
    FROM (SELECT actor_id, count(*) AS added FROM changed_rows GROUP BY actor_id) n
    WHERE a.id = n.actor_id;
    RETURN NULL;
END $$;"""
INSERTED_TRIGGER = """\
CREATE TRIGGER recall_memory_inserted AFTER INSERT ON recall_memoryrecord
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT
    EXECUTE FUNCTION recall_bump_inserted();"""

DELETED_FUNCTION = """\
CREATE FUNCTION recall_bump_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE recall_actor SET memory_version = memory_version + 1
    WHERE id IN (SELECT DISTINCT actor_id FROM changed_rows);
    RETURN NULL;
END $$;"""
DELETED_TRIGGER = """\
CREATE TRIGGER recall_memory_deleted AFTER DELETE ON recall_memoryrecord
    REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT
    EXECUTE FUNCTION recall_bump_deleted();"""

UPDATED_FUNCTION = """\
CREATE FUNCTION recall_bump_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE recall_actor SET memory_version = memory_version + 1
    WHERE id IN (OLD.actor_id, NEW.actor_id);
    RETURN NULL;
END $$;"""
# Hit counts and content edits leave these columns alone: recall's own writes never fire it.
_WATCHED = ", ".join((*TRIGGER_COLUMNS, "embedding_model"))
UPDATED_TRIGGER = f"""\
CREATE TRIGGER recall_memory_updated AFTER UPDATE OF {_WATCHED}
    ON recall_memoryrecord FOR EACH ROW WHEN ({_CHANGED})
    EXECUTE FUNCTION recall_bump_updated();"""

# TRUNCATE fires no row or statement triggers of the other kinds: it empties the cache (0009).
TRUNCATED_FUNCTION = """\
CREATE FUNCTION recall_memories_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM recall_funnelcache;
    RETURN NULL;
END $$;"""
TRUNCATED_TRIGGER = """\
CREATE TRIGGER recall_memory_truncated AFTER TRUNCATE ON recall_memoryrecord
    FOR EACH STATEMENT EXECUTE FUNCTION recall_memories_truncated();"""

# Everything the cache relies on, in an order that installs it on a table that has none of it.
TRIGGERS = "\n".join(
    (
        INSERTED_FUNCTION, INSERTED_TRIGGER, DELETED_FUNCTION, DELETED_TRIGGER,
        UPDATED_FUNCTION, UPDATED_TRIGGER, TRUNCATED_FUNCTION, TRUNCATED_TRIGGER,
    )
)  # fmt: skip
