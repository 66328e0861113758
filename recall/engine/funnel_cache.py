"""The funnel cache (``recall.models.FunnelCache``): its part of the recall statement, its
limits, and the triggers that keep its keys current.

The recall statement (``recall.engine.read``) looks an actor's funnel up (:data:`LOOKUP`), merges
the rows added since, the rows that waited for their embedding and the rows changed since, and,
in its read-and-fill variant only, stores the funnel it computed (:data:`FILL`). An entry is
keyed by the policy's filter values (:func:`filter_key`) and by counters on the actor that
triggers on the memory table keep, whoever writes the rows (:data:`TRIGGERS`):
``memory_inserts`` counts inserts, ``memory_changes`` deletes and changes of a filtered column,
each of which is also logged (``MemoryChange``, with the row's filtered columns as they were)
while the actor has a funnel that could use it. ``memory_version`` still moves with every
change, for a process running the code before migration 0015 (which keys its funnels on it);
this code does not read it. The triggers were installed by migrations 0007-0011, 0015 and
0016, whose SQL stays as it was; the constants here are that SQL as it stands now, for a new
migration to import (tests/recall/test_engine.py checks them against the migrations).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from recall.engine.policy_filter import FILTER_COLUMNS, policy_filter_sql
from recall.models import Actor, FunnelCache, MemoryChange, MemoryRecord

# Actors with at least this many memories keep their funnel (below it the scan costs less
# than writing the cache would).
FUNNEL_CACHE_MIN = 2_000
# Funnels kept per actor, one per policy filter (overrides make new filters).
FUNNEL_CACHE_PER_ACTOR = 8
# Rejected ids kept per funnel (the most verbosity ``full`` ever lists).
REJECTED_KEEP = 200
# A funnel with more rows waiting for their embedding than this is not cached.
FUNNEL_PENDING_MAX = 2_000
# A funnel more changes behind than this is computed again (and they are no longer logged).
CHANGES_MAX = 2_000
# A usable funnel is stored again once this many rows were added, changed or embedded since:
# until then each read merges them (microseconds a row), which costs less than rewriting the
# entry (milliseconds) after every change.
FUNNEL_REFILL_MIN = 64

TABLE = MemoryRecord._meta.db_table
CACHE = FunnelCache._meta.db_table
ACTOR = Actor._meta.db_table
CHANGES = MemoryChange._meta.db_table
_DECISION = policy_filter_sql("decision")
# The decision a logged change's old columns made (they carry the memory table's names).
_OLD_DECISION = policy_filter_sql("decision", alias="g")
# The codes that are not a policy's rejection: the first rejected ids list the others.
REJECTIONS_NOT = "('passes_policy', 'lifecycle_excluded', 'embedding_pending')"


def filter_key(params: dict[str, Any]) -> str:
    """What the funnel depends on besides the rows and the clock: the policy's filter values,
    and the filter itself, so that a funnel stored under rules since changed (a new release)
    is never read as this code's. Not the similarity floor, which the funnel never checks (it
    depends on the query): policies that differ only there share their funnel."""
    unkeyed = ("now", "min_created", "similarity_min")
    relevant = {k: v for k, v in params.items() if k not in unkeyed}
    keyed = {"rules": _DECISION, "values": relevant}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()


# Common table expressions of the recall statement, after ``actor``: the actor's cached funnel
# if it is current (``cached``), and usable (``usable``: the rows added since are exactly the
# rows inserted since, every change since is logged), with the rows to code on top of it
# (``added``, ``rechecked``, ``revised``) and the decisions to take out of it (``retracted``).
LOOKUP = f"""cached AS MATERIALIZED (
    SELECT f.counts, f.eligible, f.rejected, f.max_id, f.memory_inserts, f.memory_changes,
           f.valid_until, f.pending
    FROM {CACHE} f JOIN actor a ON f.actor_id = a.id
    WHERE f.filter_key = %(filter_key)s
      AND a.memory_changes - f.memory_changes <= {CHANGES_MAX}
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
-- leaves the actor's counters alone (migration 0011), so they are coded again instead (looked
-- up by their ids as one array, as ``revised`` below)
rechecked AS MATERIALIZED (
    SELECT m.id, {_DECISION} AS code, m.created_at, m.expires_at
    FROM {TABLE} m
    WHERE m.actor_id = (SELECT id FROM actor)
      AND m.id = ANY ((SELECT pending FROM cached)::bigint[])
),
-- the deletes and changes of a filtered column logged since the cached funnel
logged AS MATERIALIZED (
    SELECT g.* FROM {CHANGES} g
    WHERE g.actor_id = (SELECT id FROM actor) AND g.seq > (SELECT memory_changes FROM cached)
),
-- each changed row as the cached funnel saw it: its first change logged since
first_changes AS MATERIALIZED (
    SELECT DISTINCT ON (g.memory_id) g.* FROM logged g ORDER BY g.memory_id, g.seq, g.id
),
-- those the cached funnel counted (neither added since nor waiting for their embedding,
-- which are coded as they are now anyway)
changed AS MATERIALIZED (
    SELECT g.* FROM first_changes g, cached c
    WHERE g.memory_id <= c.max_id AND NOT g.memory_id = ANY (c.pending)
),
-- the decisions the cached funnel holds for them (a row moved in from another actor has none)
retracted AS MATERIALIZED (
    SELECT g.memory_id AS id, {_OLD_DECISION} AS code FROM changed g WHERE g.present
),
-- and their decisions now (a row deleted or moved to another actor has none): the changed ids
-- looked up as one array, not joined, so that no plan hashes every row of a large actor to
-- find a handful (a generic plan did, after an ANALYZE: 24 ms at 100,000 rows)
revised AS MATERIALIZED (
    SELECT m.id, {_DECISION} AS code, m.created_at, m.expires_at
    FROM {TABLE} m
    WHERE m.actor_id = (SELECT id FROM actor)
      AND m.id = ANY (ARRAY(SELECT memory_id FROM changed))
),
-- the rows inserted since the cached funnel, as the table and the log tell: the added rows
-- not changed since, and the rows above max_id changed since that were the actor's when first
-- changed (a row added and deleted since counts; one moved in from another actor does not)
inserted AS MATERIALIZED (
    SELECT count(*) AS n FROM added WHERE id NOT IN (SELECT memory_id FROM logged)
    UNION ALL
    SELECT count(*) FROM first_changes g, cached c WHERE g.memory_id > c.max_id AND g.present
),
-- the cached funnel, if the added rows are all the rows inserted since it was computed, every
-- change since is logged, one stored without ids still has too many eligible rows to rank
-- exactly, and its first rejected ids stay the first ones (the list held every rejected row,
-- or none of the rows it lists left it)
usable AS MATERIALIZED (
    SELECT c.* FROM cached c, actor a
    WHERE a.memory_inserts - c.memory_inserts = (SELECT sum(n) FROM inserted)
      AND a.memory_changes - c.memory_changes = (SELECT count(*) FROM logged)
      AND (c.eligible IS NOT NULL OR (c.counts ->> 'passes_policy')::bigint
           - (SELECT count(*) FROM retracted WHERE code = 'passes_policy') > %(exact_max)s)
      AND (jsonb_array_length(c.rejected) < {REJECTED_KEEP} OR NOT EXISTS (
          SELECT 1 FROM retracted r
          WHERE r.code NOT IN {REJECTIONS_NOT}
            AND r.id <= (SELECT max((x ->> 0)::bigint) FROM jsonb_array_elements(c.rejected) x)
      ))
)"""

# The fill, last of the statement's expressions (it reads ``coded``, ``counts``, ``passing``,
# ``rejected`` and ``eligible_ids``): a large actor's funnel, computed by this recall or
# extended by ``FUNNEL_REFILL_MIN`` rows or more, is stored; an actor keeps its most recent
# funnels only (one per filter: overrides vary). Rows another recall is writing are skipped,
# never waited for (no lock cycles), and an older funnel never overwrites a newer one.
FILL = f"""filling AS MATERIALIZED (
    SELECT 1
    WHERE (NOT EXISTS (SELECT 1 FROM usable)
           OR (SELECT count(*) FROM added) + (SELECT count(*) FROM logged)
              + (SELECT count(*) FROM rechecked WHERE code <> 'embedding_pending')
              >= %(refill_min)s)
      AND (SELECT coalesce(sum(n), 0) FROM counts) >= %(cache_min)s
      -- every pending row is rechecked on each use: not worth it for a mass (re-)embedding
      AND (SELECT coalesce(sum(n), 0) FROM counts WHERE code = 'embedding_pending')
          <= {FUNNEL_PENDING_MAX}
      -- nothing is written for a call whose token the read did not confirm (``caller``)
      AND (%(token_hash)s::text IS NULL OR (SELECT ok FROM caller))
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
-- the logged changes no funnel of the actor can use any more: behind every other funnel and
-- this one, or too far behind to be used at all
changes_pruned AS (
    DELETE FROM {CHANGES} p
    WHERE p.id IN (
        SELECT q.id FROM {CHANGES} q
        WHERE EXISTS (SELECT 1 FROM filling) AND q.actor_id = (SELECT id FROM actor)
          AND q.seq <= greatest(
            (SELECT memory_changes FROM actor) - {CHANGES_MAX},
            least((SELECT memory_changes FROM actor), (
                SELECT min(k.memory_changes) FROM {CACHE} k
                WHERE k.actor_id = (SELECT id FROM actor) AND k.filter_key <> %(filter_key)s
            ))
          )
        FOR UPDATE SKIP LOCKED
    )
),
fill AS (
    INSERT INTO {CACHE} AS f (
        actor_id, filter_key, memory_version, memory_inserts, memory_changes, max_id,
        valid_until, counts, eligible, rejected, pending, computed_at
    )
    SELECT
        a.id, %(filter_key)s, a.memory_version, a.memory_inserts, a.memory_changes,
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
        memory_changes = excluded.memory_changes, max_id = excluded.max_id,
        valid_until = excluded.valid_until, counts = excluded.counts,
        eligible = excluded.eligible, rejected = excluded.rejected, pending = excluded.pending,
        computed_at = excluded.computed_at
    WHERE (f.memory_version, f.memory_inserts, f.memory_changes)
        <= (excluded.memory_version, excluded.memory_inserts, excluded.memory_changes)
)"""


# --- the triggers, as migrations 0007-0011, 0015 and 0016 left them ---------------------------

# A change of one of these is a change to the actor's cached funnels (``memory_changes``). The
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

# Deletes and changes of a filtered column are counted (``memory_changes``) and, while one of
# the actor's funnels is near enough to use them, logged with the row's old columns (0015).
LOGGED_COLUMNS = ", ".join(FILTER_COLUMNS)
_OLD = ", ".join(f"OLD.{c}" for c in FILTER_COLUMNS)
_DELETED_LOGGED = ", ".join(f"o.{c}" for c in FILTER_COLUMNS)
DELETED_FUNCTION = f"""\
CREATE OR REPLACE FUNCTION recall_bump_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH bumped AS (
        UPDATE recall_actor a SET memory_changes = a.memory_changes + n.deleted,
            memory_version = a.memory_version + 1
        FROM (SELECT actor_id, count(*) AS deleted FROM changed_rows GROUP BY actor_id) n
        WHERE a.id = n.actor_id
        RETURNING a.id, a.memory_changes
    )
    INSERT INTO recall_memorychange (actor_id, memory_id, seq, present, {LOGGED_COLUMNS})
    SELECT o.actor_id, o.id, b.memory_changes, true, {_DELETED_LOGGED}
    FROM changed_rows o JOIN bumped b ON b.id = o.actor_id
    WHERE EXISTS (
        SELECT 1 FROM recall_funnelcache f
        WHERE f.actor_id = o.actor_id AND f.memory_changes >= b.memory_changes - {CHANGES_MAX}
    );
    RETURN NULL;
END $$;"""
DELETED_TRIGGER = """\
CREATE TRIGGER recall_memory_deleted AFTER DELETE ON recall_memoryrecord
    REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT
    EXECUTE FUNCTION recall_bump_deleted();"""

# A row moved to another actor is a change for both, counted in one statement (one lock order,
# so moves both ways cannot deadlock); each logs the row's old columns, and whether the row was
# its own (``present``: the actor it joined has no decision of the row to take out).
UPDATED_FUNCTION = f"""\
CREATE OR REPLACE FUNCTION recall_bump_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bumped record;
BEGIN
    FOR bumped IN
        UPDATE recall_actor SET memory_changes = memory_changes + 1,
            memory_version = memory_version + 1
        WHERE id IN (OLD.actor_id, NEW.actor_id) RETURNING id, memory_changes
    LOOP
        CONTINUE WHEN NOT EXISTS (
            SELECT 1 FROM recall_funnelcache f
            WHERE f.actor_id = bumped.id
              AND f.memory_changes >= bumped.memory_changes - {CHANGES_MAX}
        );
        INSERT INTO recall_memorychange (actor_id, memory_id, seq, present, {LOGGED_COLUMNS})
        VALUES (bumped.id, OLD.id, bumped.memory_changes, bumped.id = OLD.actor_id, {_OLD});
    END LOOP;
    RETURN NULL;
END $$;"""
# Hit counts and content edits leave these columns alone: recall's own writes never fire it.
_WATCHED = ", ".join((*TRIGGER_COLUMNS, "embedding_model"))
UPDATED_TRIGGER = f"""\
CREATE TRIGGER recall_memory_updated AFTER UPDATE OF {_WATCHED}
    ON recall_memoryrecord FOR EACH ROW WHEN ({_CHANGED})
    EXECUTE FUNCTION recall_bump_updated();"""

# TRUNCATE fires no row or statement triggers of the other kinds: it empties the cache (0009)
# and the change log (0015).
TRUNCATED_FUNCTION = """\
CREATE OR REPLACE FUNCTION recall_memories_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM recall_funnelcache;
    DELETE FROM recall_memorychange;
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
