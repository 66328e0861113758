"""Reads for recall: the policy funnel and the vector ranking, in SQL.

The fail-closed rules and every recall axis are evaluated in PostgreSQL, before ranking.
Ranking takes one of two access paths, chosen by the size of the eligible set:

* **exact** (eligible set up to ``EXACT_SEARCH_MAX`` rows): the eligible rows are
  materialised first and ordered by true cosine distance. The covering index
  ``memory_recall_cover_idx`` answers the filter without touching the heap, so the cost is
  one distance per eligible row. Always complete.
* **hnsw**: the HNSW index with pgvector's iterative scan, which keeps walking the graph
  until enough rows pass the filter. If it still returns fewer rows than asked while more
  are eligible (the scan hit ``hnsw.max_scan_tuples``), the exact path runs instead, so
  recall never silently returns fewer than ``topK`` rows.

The funnel (every memory's decision code, for the diagnostics counts) is one index-only scan
of the actor's rows; for actors with at least ``FUNNEL_CACHE_MIN`` memories its result is kept
in ``FunnelCache`` and reused while it is provably current (see there). The hot-path
statement runs prepared, on its generic plan (``portal.db.cursors``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet

from audit.services import CHAIN_TIP_SQL
from policies.algebra import SEGMENT_KINDS, SENSITIVITY_ORDER
from portal.db.cursors import prepared_cursor
from portal.errors import ValidationFailed
from portal.models import Workspace
from recall.actor_ids import ActorIdError, split_actor_id
from recall.filtersets import MemoryFilterSet
from recall.models import Actor, MemoryRecord
from recall.runtime import embedder

EXACT_SEARCH_MAX = 20_000
HNSW_EF_SEARCH = 100
HNSW_MAX_SCAN_TUPLES = 40_000

# The fail-closed rule, whatever any policy says (SPEC §3). ``%(now)s`` is bound per call.
# A segment kind outside the vocabulary (a row written around the API) cannot be budgeted:
# like any unknown value it fails closed rather than failing the whole recall.
FAIL_CLOSED_SQL = (
    "m.lifecycle_status = 'active' AND m.is_current"
    " AND (m.expires_at IS NULL OR m.expires_at > %(now)s)"
    " AND m.consent_policy <> 'withdrawn'"
    " AND m.segment_kind IN (" + ", ".join(f"'{kind}'" for kind in SEGMENT_KINDS) + ")"
)

# A memory is ranked only once the configured embedder has embedded it: one not embedded yet
# (its embedding job has not run) or embedded by another embedder (RECALL_EMBEDDER changed;
# the re-embed sweep catches up) has no vector comparable with the query. Such rows are
# counted as ``embedding_pending``, never listed, like lifecycle-excluded rows.
EMBEDDED_SQL = "m.embedding_model = %(model)s"

# Policy axes in the order their decision codes are reported: a row failing several axes is
# reported under the first. NULLs never pass (``= ANY`` and ``>=`` yield NULL → not true).
POLICY_CHECKS: tuple[tuple[str, str], ...] = (
    ("memory_type_not_allowed", "m.memory_type = ANY(%(memory_types)s)"),
    ("source_kind_not_allowed", "m.source_kind = ANY(%(source_kinds)s)"),
    ("confirmation_status_not_allowed", "m.confirmation_status = ANY(%(confirmations)s)"),
    ("confidence_below_min", "m.confidence >= %(confidence_min)s"),
    ("sensitivity_above_ceiling", "m.sensitivity = ANY(%(sensitivities)s)"),
    ("consent_not_allowed", "m.consent_policy = ANY(%(consents)s)"),
    (
        "older_than_max_age",
        "(%(min_created)s::timestamptz IS NULL OR m.created_at >= %(min_created)s)",
    ),
)
POLICY_SQL = " AND ".join(f"({check})" for _, check in POLICY_CHECKS)
TABLE = MemoryRecord._meta.db_table


def policy_params(policy: dict[str, Any], now: datetime) -> dict[str, Any]:
    ceiling = SENSITIVITY_ORDER.index(policy["sensitivityCeiling"])
    max_age = policy["maxAgeSeconds"]
    return {
        "now": now,
        "memory_types": list(policy["memoryTypeAllowed"]),
        "source_kinds": list(policy["sourceKindAllowed"]),
        "confirmations": list(policy["confirmationStatusAllowed"]),
        "confidence_min": float(policy["confidenceMin"]),
        "sensitivities": list(SENSITIVITY_ORDER[: ceiling + 1]),
        "consents": list(policy["consentPolicyAllowed"]),
        "min_created": now - timedelta(seconds=max_age) if max_age is not None else None,
        "max_age_seconds": max_age,
        "model": embedder_model(),
    }


def embedder_model() -> str:
    """The name the configured embedder stores on the memories it embeds (``EMBEDDED_SQL``)."""
    return embedder().model_name


@dataclass(frozen=True)
class Funnel:
    candidates: int
    lifecycle_excluded: int
    after_policy: int
    reasons: dict[str, int]
    embedding_pending: int = 0


def _code_case() -> str:
    whens = " ".join(
        f"WHEN NOT COALESCE({check}, false) THEN '{code}'" for code, check in POLICY_CHECKS
    )
    return (
        f"CASE WHEN NOT ({FAIL_CLOSED_SQL}) THEN 'lifecycle_excluded'"
        f" WHEN NOT COALESCE({EMBEDDED_SQL}, false) THEN 'embedding_pending' {whens}"
        " ELSE 'passes_policy' END"
    )


def _funnel(counts: dict[str, int]) -> Funnel:
    candidates = sum(counts.values())
    lifecycle = counts.pop("lifecycle_excluded", 0)
    pending = counts.pop("embedding_pending", 0)
    after_policy = counts.pop("passes_policy", 0)
    return Funnel(candidates, lifecycle, after_policy, counts, pending)


RANKED_COLUMNS = (
    "m.id, m.content, m.memory_type, m.source_kind, m.confirmation_status, m.confidence,"
    " m.sensitivity, m.segment_kind, m.token_count, m.created_at, m.hit_count"
)

# Two stages: the filter reads only the covering index (index-only scan, no wide heap rows),
# then distances are computed for the eligible ids alone. Materialising both keeps the planner
# from answering ORDER BY distance with the HNSW index, which would filter after the scan.
EXACT_SQL = f"""
WITH ids AS MATERIALIZED (
    SELECT m.id FROM {TABLE} m
    WHERE m.actor_id = %(actor)s AND {FAIL_CLOSED_SQL} AND {EMBEDDED_SQL} AND {POLICY_SQL}
),
eligible AS MATERIALIZED (
    SELECT m.id, m.embedding <=> %(query)s::vector AS distance
    FROM ids JOIN {TABLE} m ON m.id = ids.id
)
SELECT {RANKED_COLUMNS}, COALESCE(1 - e.distance, 0) AS similarity
FROM eligible e JOIN {TABLE} m ON m.id = e.id
ORDER BY e.distance NULLS LAST, m.id
LIMIT %(limit)s
"""

_CODE = _code_case()

# Actors with at least this many memories keep their funnel in FunnelCache (see there): below
# it the scan costs less than writing the cache would.
FUNNEL_CACHE_MIN = 2_000
# Funnels kept per actor, one per policy filter (overrides make new filters).
FUNNEL_CACHE_PER_ACTOR = 8
# Rejected ids kept per funnel (the most verbosity ``full`` ever lists).
REJECTED_KEEP = 200
# A funnel with more rows waiting for their embedding than this is not cached.
FUNNEL_PENDING_MAX = 2_000

# The hot path in one round trip: the actor, the funnel (every row's decision code from one
# index-only scan, or the actor's cached funnel plus the rows added since), the first rejected
# ids, the previous fingerprint, the chain tip and, when the eligible set is small enough for
# exact search, the nearest rows. A larger eligible set returns no rows here and is ranked by
# ``memory_ranked`` with the HNSW index instead. A large actor's funnel, when computed or
# extended here, is stored as a side effect (``fill``; see FunnelCache for when it is used).
RECALL_SQL = f"""
WITH actor AS (
    SELECT a.id, a.memory_version, a.memory_inserts FROM recall_actor a
    WHERE a.workspace_id = %(workspace)s AND a.kind = %(kind)s AND a.name = %(name)s
),
cached AS MATERIALIZED (
    SELECT f.counts, f.eligible, f.rejected, f.max_id, f.memory_inserts, f.valid_until, f.pending
    FROM recall_funnelcache f JOIN actor a ON f.actor_id = a.id
    WHERE f.filter_key = %(filter_key)s AND f.memory_version = a.memory_version
      AND (f.valid_until IS NULL OR f.valid_until > %(now)s)
      -- stored without ids (too many to rank exactly then), but the exact path wants them now
      AND (f.eligible IS NOT NULL OR (f.counts ->> 'passes_policy')::bigint > %(exact_max)s)
),
-- the memories added since the cached funnel, when there is one
added AS MATERIALIZED (
    SELECT m.id, {_CODE} AS code, m.created_at, m.expires_at
    FROM {TABLE} m
    WHERE m.actor_id = (SELECT id FROM actor) AND m.id > (SELECT max_id FROM cached)
),
-- the memories that waited for their embedding when the funnel was cached: the embedding job
-- leaves the actor's version alone (migration 0011), so they are coded again instead
rechecked AS MATERIALIZED (
    SELECT m.id, {_CODE} AS code, m.created_at, m.expires_at
    FROM cached c CROSS JOIN unnest(c.pending) p(id) JOIN {TABLE} m ON m.id = p.id
    WHERE m.actor_id = (SELECT id FROM actor)
),
-- the cached funnel, if the added rows are all the rows inserted since it was computed
usable AS MATERIALIZED (
    SELECT c.* FROM cached c, actor a
    WHERE a.memory_inserts - c.memory_inserts = (SELECT count(*) FROM added)
),
coded AS MATERIALIZED (
    SELECT * FROM added WHERE EXISTS (SELECT 1 FROM usable)
    UNION ALL
    SELECT * FROM rechecked WHERE EXISTS (SELECT 1 FROM usable)
    UNION ALL
    SELECT m.id, {_CODE} AS code, m.created_at, m.expires_at
    FROM {TABLE} m
    WHERE m.actor_id = (SELECT id FROM actor) AND NOT EXISTS (SELECT 1 FROM usable)
),
counts AS MATERIALIZED (
    SELECT code, sum(n)::bigint AS n FROM (
        SELECT code, count(*) AS n FROM coded GROUP BY code
        UNION ALL
        SELECT kv.key, kv.value::bigint FROM usable, jsonb_each_text(usable.counts) kv
        -- exactly the rechecked rows, counted again in coded
        WHERE kv.key <> 'embedding_pending'
    ) parts GROUP BY code
),
passing AS MATERIALIZED (
    SELECT coalesce(sum(n), 0) AS n FROM counts WHERE code = 'passes_policy'
),
rejected AS MATERIALIZED (
    (SELECT id, code FROM coded
     WHERE code NOT IN ('passes_policy', 'lifecycle_excluded', 'embedding_pending')
     ORDER BY id LIMIT {REJECTED_KEEP})
    UNION ALL
    SELECT (r ->> 0)::bigint, r ->> 1 FROM usable, jsonb_array_elements(usable.rejected) r
),
eligible_ids AS (
    SELECT id FROM coded WHERE code = 'passes_policy'
    UNION ALL
    SELECT unnest(usable.eligible) FROM usable
),
eligible AS MATERIALIZED (
    SELECT m.id, m.embedding <=> %(query)s::vector AS distance
    FROM eligible_ids e JOIN {TABLE} m ON m.id = e.id
    WHERE (SELECT n FROM passing) <= %(exact_max)s
),
nearest AS (
    SELECT id, distance FROM eligible ORDER BY distance NULLS LAST, id LIMIT %(limit)s
),
filling AS MATERIALIZED (
    SELECT 1 WHERE (NOT EXISTS (SELECT 1 FROM usable) OR EXISTS (SELECT 1 FROM coded))
      AND (SELECT coalesce(sum(n), 0) FROM counts) >= %(cache_min)s
      -- every pending row is rechecked on each use: not worth it for a mass (re-)embedding
      AND (SELECT coalesce(sum(n), 0) FROM counts WHERE code = 'embedding_pending')
          <= {FUNNEL_PENDING_MAX}
),
-- an actor keeps its most recently computed funnels only (one per filter: overrides vary);
-- rows another recall is writing are skipped, never waited for (no lock cycles)
pruned AS (
    DELETE FROM recall_funnelcache p
    WHERE p.id IN (
        SELECT q.id FROM recall_funnelcache q
        WHERE EXISTS (SELECT 1 FROM filling)
          AND q.actor_id = (SELECT id FROM actor) AND q.filter_key <> %(filter_key)s
          AND q.id NOT IN (
            SELECT k.id FROM recall_funnelcache k
            WHERE k.actor_id = (SELECT id FROM actor) AND k.filter_key <> %(filter_key)s
            ORDER BY k.computed_at DESC LIMIT {FUNNEL_CACHE_PER_ACTOR - 1}
          )
        FOR UPDATE SKIP LOCKED
    )
),
fill AS (
    INSERT INTO recall_funnelcache AS f (
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
)
SELECT
    (SELECT id FROM actor),
    -- as text: the scalars repeat on every row, and are decoded once (row 1) in Python
    (SELECT coalesce(json_object_agg(code, n), '{{}}')::text FROM counts),
    (SELECT coalesce(json_agg(json_build_array(r.id, r.code)), '[]')::text FROM (
        SELECT id, code FROM rejected ORDER BY id LIMIT %(rejected_limit)s
    ) r),
    -- the previous context.assembled for the same key: its prefix fingerprint sets `reused`
    (SELECT ev.payload ->> 'prefixFingerprint' FROM audit_auditevent ev
     WHERE ev.workspace_id = %(workspace)s AND ev.actor_id = %(actor_id)s
       AND ev.workload_id = %(workload)s AND ev.environment = %(environment)s
       AND ev.type = 'context.assembled'
     ORDER BY ev.id DESC LIMIT 1),
    {CHAIN_TIP_SQL},
    EXISTS (SELECT 1 FROM usable),
    t.*
FROM (SELECT 1) one
LEFT JOIN LATERAL (
    SELECT {RANKED_COLUMNS}, COALESCE(1 - n.distance, 0) AS similarity
    FROM nearest n JOIN {TABLE} m ON m.id = n.id
    ORDER BY n.distance NULLS LAST, m.id
) t ON true
"""


def filter_key(params: dict[str, Any]) -> str:
    """What the funnel depends on besides the rows and the clock: the policy's filter values."""
    relevant = {k: v for k, v in params.items() if k not in ("now", "min_created")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class RecallCandidates:
    actor_pk: int | None
    funnel: Funnel
    rows: list[RankedRow]
    rejections: list[tuple[int, str]]
    path: str
    previous_fingerprint: str | None
    chain_tip: str | None
    funnel_cached: bool = False


def recall_candidates(
    *,
    workspace_id: int,
    workload_id: uuid.UUID,
    environment: str,
    actor_id: str,
    policy: dict[str, Any],
    query_vector: Sequence[float],
    limit: int,
    rejected_limit: int,
    now: datetime,
) -> RecallCandidates:
    """Everything recall reads about the actor's memories, nearest rows included."""
    kind, _, name = actor_id.partition(":")
    filters = policy_params(policy, now)
    params = {
        **filters,
        "filter_key": filter_key(filters),
        "workspace": workspace_id,
        "workload": workload_id,
        "environment": environment,
        "actor_id": actor_id,
        "kind": kind,
        "name": name,
        "query": vector_literal(query_vector),
        "limit": limit,
        "exact_max": EXACT_SEARCH_MAX,
        "rejected_limit": min(rejected_limit, REJECTED_KEEP),
        "cache_min": FUNNEL_CACHE_MIN,
    }
    with prepared_cursor() as cursor:
        cursor.execute(RECALL_SQL, params)
        result = cursor.fetchall()
    actor_pk, counts, rejected, previous, tip, cached = result[0][:6]
    counts, rejected = _json(counts), _json(rejected)
    funnel = _funnel({code: int(n) for code, n in counts.items()})
    rows = [RankedRow(*row[6:]) for row in result if row[6] is not None]
    path = "exact" if rows else "none"
    if actor_pk is not None and funnel.after_policy > EXACT_SEARCH_MAX:
        rows, path = memory_ranked(
            actor_pk=actor_pk,
            policy=policy,
            query_vector=query_vector,
            limit=limit,
            eligible=funnel.after_policy,
            now=now,
        )
    return RecallCandidates(
        actor_pk,
        funnel,
        rows,
        [(int(i), str(c)) for i, c in rejected],
        path,
        previous,
        tip,
        funnel_cached=bool(cached),
    )


def _json(value: Any) -> Any:
    # Django reads json/jsonb as text on raw cursors.
    return json.loads(value) if isinstance(value, str) else value


HNSW_SQL = f"""
SELECT {RANKED_COLUMNS}, 1 - (m.embedding <=> %(query)s::vector) AS similarity
FROM {TABLE} m
WHERE m.actor_id = %(actor)s AND {FAIL_CLOSED_SQL} AND {EMBEDDED_SQL} AND {POLICY_SQL}
ORDER BY m.embedding <=> %(query)s::vector
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class RankedRow:
    id: int
    content: str
    memory_type: str
    source_kind: str
    confirmation_status: str
    confidence: float
    sensitivity: str
    segment_kind: str
    token_count: int
    created_at: datetime
    hit_count: int
    similarity: float


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{v:.7g}" for v in vector) + "]"


def memory_ranked(
    *,
    actor_pk: int,
    policy: dict[str, Any],
    query_vector: Sequence[float],
    limit: int,
    eligible: int,
    now: datetime,
) -> tuple[list[RankedRow], str]:
    """The ``limit`` eligible rows nearest the query, and the access path used."""
    params = {
        **policy_params(policy, now),
        "actor": actor_pk,
        "query": vector_literal(query_vector),
        "limit": limit,
    }
    wanted = min(limit, eligible)
    if eligible > EXACT_SEARCH_MAX:
        rows = hnsw_nearest(params)
        if len(rows) >= wanted:
            return rows, "hnsw"
    with connection.cursor() as cursor:
        cursor.execute(EXACT_SQL, params)
        return [RankedRow(*row) for row in cursor.fetchall()], "exact"


def hnsw_nearest(params: dict[str, Any], *, ef_search: int | None = None) -> list[RankedRow]:
    """The nearest eligible rows through the HNSW index with pgvector's iterative scan."""
    # set_config(..., true) is SET LOCAL: it lasts until the end of this transaction, which
    # the scan therefore shares. One statement, not three joined by ";", since a connection
    # with server-side binding prepares statements and a prepared statement cannot hold
    # several commands.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
            " set_config('hnsw.ef_search', %s, true),"
            " set_config('hnsw.max_scan_tuples', %s, true)",
            [str(ef_search or HNSW_EF_SEARCH), str(HNSW_MAX_SCAN_TUPLES)],
        )
        cursor.execute(HNSW_SQL, params)
        return [RankedRow(*row) for row in cursor.fetchall()]


def actor_lookup(*, workspace: Workspace, actor_id: str) -> Actor | None:
    """The actor with this id (in its canonical form); None if there is none or the id is not
    a valid one."""
    try:
        kind, name = split_actor_id(actor_id)
    except ActorIdError:
        return None
    return Actor.objects.filter(workspace=workspace, kind=kind, name=name).first()


def memory_list(*, actor: Actor, filters: Any) -> QuerySet[MemoryRecord]:
    filterset = MemoryFilterSet(
        filters, queryset=MemoryRecord.objects.filter(actor=actor).select_related("actor")
    )
    if not filterset.is_valid():
        raise ValidationFailed(
            {field: " ".join(errors) for field, errors in filterset.errors.items()},
            "The memory filters are not valid.",
        )
    return filterset.qs.defer("embedding").order_by("-created_at", "-id")
