"""The recall read: the policy funnel and the vector ranking, in one statement when it can.

The fail-closed rules and every recall axis (``policy_filter``) are evaluated in PostgreSQL,
before ranking. Ranking takes one of two access paths, chosen by the size of the eligible set:

* **exact** (eligible set up to ``EXACT_SEARCH_MAX`` rows): the eligible rows are
  materialised first and ordered by true cosine distance. The covering index
  ``memory_recall_cover_idx`` answers the filter without touching the heap, so the cost is
  one distance per eligible row. Always complete.
* **hnsw**: the HNSW index with pgvector's iterative scan, which keeps walking the graph
  until enough rows pass the filter. If it still returns fewer rows than asked while more
  are eligible (the scan hit ``hnsw.max_scan_tuples``), the exact path runs instead, so
  recall never silently returns fewer than ``topK`` rows.

Either way the similarity floor (``similarityMin``) is applied to the ranked rows: the nearest
rows come first, so those that pass it are a prefix of the ranking, and the nearest rows that
pass fill ``topK`` whenever enough pass. Below the floor, the exact path counts every eligible
row (it computes every distance anyway); the HNSW path counts what its ranking saw: if one of
its nearest rows is below the floor, every farther row is too, so the count is exact then;
otherwise the rows past the nearest are not known to be below it, and are not counted so.

The funnel (every memory's decision code, for the diagnostics counts) is one index-only scan
of the actor's rows; for actors with at least ``FUNNEL_CACHE_MIN`` memories its result is kept
in ``FunnelCache`` and reused while it is provably current (``funnel_cache``). The statement
comes in two variants, both prepared (``portal.db.cursors``): :func:`recall_read` writes
nothing; with ``fill_cache`` (the recall endpoint's) it also stores the funnel it
computed, in the same round trip.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from audit.models import EventType
from audit.services import CHAIN_TIP_SQL, DRY_RUN_ORIGIN, latest_payload_value_sql
from policies.axes import PolicyDocument
from policies.selectors import POLICY_CONTEXT_KEY_SQL
from portal.db.cursors import BinaryVector, prepared_statement, vector_literal
from portal.tokens import TOKEN_CHECK_SQL, TokenCheck, token_params
from recall.engine.funnel_cache import (
    ACTOR,
    FILL,
    FUNNEL_CACHE_MIN,
    FUNNEL_CACHE_PER_ACTOR,
    FUNNEL_REFILL_MIN,
    LOOKUP,
    REJECTED_KEEP,
    REJECTIONS_NOT,
    TABLE,
    filter_key,
)
from recall.engine.policy_filter import policy_filter_sql, policy_params
from recall.hits import RANKED_HITS_SQL

__all__ = [
    "EXACT_SEARCH_MAX", "EXACT_SQL", "FUNNEL_CACHE_MIN", "FUNNEL_CACHE_PER_ACTOR",
    "FUNNEL_REFILL_MIN",
    "HNSW_EF_SEARCH", "HNSW_MAX_SCAN_TUPLES", "HNSW_SQL", "REJECTED_KEEP", "RECALL_READ",
    "RECALL_READ_AND_FILL", "Funnel", "RankedRow", "RecallCandidates", "hnsw_nearest",
    "memory_ranked", "policy_params", "recall_read", "vector_literal",
]  # fmt: skip

EXACT_SEARCH_MAX = 20_000
HNSW_EF_SEARCH = 100
HNSW_MAX_SCAN_TUPLES = 40_000

_RECALLABLE = policy_filter_sql("recallable")
# An agent's prompt prefix follows its own recalls: a sandbox run (an operator's dry run,
# perhaps of a draft policy) is passed over, or it would decide the next recall's `reused`.
PREVIOUS_FINGERPRINT_SQL = latest_payload_value_sql(
    type=EventType.ASSEMBLED, key="prefixFingerprint", unless=("origin", DRY_RUN_ORIGIN)
)
_DECISION = policy_filter_sql("decision")


def _floor_sql(alias: str) -> tuple[str, str]:
    """(a ranked row's similarity, whether it passes the similarity floor) over ``alias``."""
    return (
        policy_filter_sql("similarity", alias=alias),
        policy_filter_sql("above_floor", alias=alias),
    )


@dataclass(frozen=True)
class Funnel:
    candidates: int
    lifecycle_excluded: int
    after_policy: int
    reasons: dict[str, int]
    embedding_pending: int = 0


def _funnel(counts: dict[str, int]) -> Funnel:
    candidates = sum(counts.values())
    lifecycle = counts.pop("lifecycle_excluded", 0)
    pending = counts.pop("embedding_pending", 0)
    after_policy = counts.pop("passes_policy", 0)
    return Funnel(candidates, lifecycle, after_policy, counts, pending)


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
    tier: str  # short_term or long_term (a session's turn places passages by it)
    similarity: float
    # Whether it passes the similarity floor: recall ranks only the rows that do. The hot
    # path's statement returns those alone; the others say it of each row (``memory_ranked``).
    above_floor: bool = True


# The hit count as if every recall had counted its own (recall/hits.py: the folded count and
# the hits since).
RANKED_COLUMNS = (
    "m.id, m.content, m.memory_type, m.source_kind, m.confirmation_status, m.confidence,"
    f" m.sensitivity, m.segment_kind, m.token_count, m.created_at, {RANKED_HITS_SQL} AS hit_count,"
    " m.tier"
)


# --- ranking ------------------------------------------------------------------------------------

# Two stages: the filter reads only the covering index (index-only scan, no wide heap rows),
# then distances are computed for the eligible ids alone. Materialising both keeps the planner
# from answering ORDER BY distance with the HNSW index, which would filter after the scan.
# The eligible rows are fetched by one scan of the primary key given all their ids (``= ANY``
# of an array), not by one probe per id: PostgreSQL (17 and later) reads the ids that share a
# leaf page without descending the index again for each (docs/architecture.md, "A recall
# request, end to end"). The hot path's statement below does the same.
_SIMILARITY_E, _ABOVE_FLOOR_E = _floor_sql("e")
EXACT_SQL = f"""
WITH ids AS MATERIALIZED (
    SELECT m.id FROM {TABLE} m
    WHERE m.actor_id = %(actor)s AND {_RECALLABLE}
),
eligible AS MATERIALIZED (
    SELECT m.id, m.embedding <=> %(query)s::vector AS distance
    FROM {TABLE} m WHERE m.id = ANY(ARRAY(SELECT id FROM ids))
)
SELECT {RANKED_COLUMNS}, {_SIMILARITY_E} AS similarity, {_ABOVE_FLOOR_E} AS above_floor
FROM eligible e JOIN {TABLE} m ON m.id = e.id
ORDER BY e.distance NULLS LAST, m.id
LIMIT %(limit)s
"""

# The iterative scan's relaxed order may return rows slightly out of order (pgvector): the
# nearest rows it found are put in the exact path's order, nearest first, then by id, so that
# the same rows always come back in the same order.
_RANKED_NAMES = ", ".join(
    f.name for f in fields(RankedRow) if f.name not in ("similarity", "above_floor")
)
_SIMILARITY_NEAREST, _ABOVE_FLOOR_NEAREST = _floor_sql("nearest")
HNSW_SQL = f"""
SELECT {_RANKED_NAMES}, {_SIMILARITY_NEAREST} AS similarity, {_ABOVE_FLOOR_NEAREST} AS above_floor
FROM (
    SELECT {RANKED_COLUMNS}, m.embedding <=> %(query)s::vector AS distance
    FROM {TABLE} m
    WHERE m.actor_id = %(actor)s AND {_RECALLABLE}
    ORDER BY m.embedding <=> %(query)s::vector
    LIMIT %(limit)s
) nearest
ORDER BY distance, id
"""


@dataclass(frozen=True)
class Ranked:
    """The nearest eligible rows that pass the similarity floor, and those known below it."""

    rows: list[RankedRow]  # nearest first
    path: str
    below_floor: int  # eligible rows known to be below the similarity floor
    below_listed: list[tuple[int, float]]  # (id, similarity) of the nearest of them


def memory_ranked(
    *,
    actor_pk: int,
    policy: PolicyDocument,
    query_vector: Sequence[float],
    limit: int,
    eligible: int,
    now: datetime,
) -> Ranked:
    """The ``limit`` eligible rows nearest the query, cut at the similarity floor, and the
    access path used."""
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
            return _floored(rows, "hnsw", eligible)
    with connection.cursor() as cursor:
        cursor.execute(EXACT_SQL, params)
        return _floored([RankedRow(*row) for row in cursor.fetchall()], "exact", eligible)


def _floored(nearest: list[RankedRow], path: str, eligible: int) -> Ranked:
    """``nearest`` (the nearest eligible rows, nearest first) cut at the similarity floor.
    The rows that pass are a prefix: once one of them is below the floor, so is every
    eligible row farther away, whose number is then known."""
    above = [row for row in nearest if row.above_floor]
    below = [(row.id, row.similarity) for row in nearest if not row.above_floor]
    return Ranked(above, path, eligible - len(above) if below else 0, below)


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


# --- the hot path's statement -------------------------------------------------------------------

# The hot path in one round trip: the actor, the funnel (every row's decision code from one
# index-only scan, or the actor's cached funnel plus the rows added since), the first rejected
# ids, the previous fingerprint, the chain tip and, when the eligible set is small enough for
# exact search, the nearest rows. A larger eligible set returns no rows here and is ranked by
# ``memory_ranked`` with the HNSW index instead.
_FUNNEL_AND_NEAREST = f"""
WITH caller AS MATERIALIZED (
    -- a remembered API token this call did not look up (portal.tokens.TokenCheck), checked in
    -- the snapshot of everything read here; no row when there is none to check
    SELECT {TOKEN_CHECK_SQL} AS ok WHERE %(token_hash)s::text IS NOT NULL
),
actor AS (
    SELECT a.id, a.memory_version, a.memory_inserts, a.memory_changes FROM {ACTOR} a
    WHERE a.workspace_id = %(workspace)s AND a.kind = %(kind)s AND a.name = %(name)s
),
{LOOKUP},
coded AS MATERIALIZED (
    SELECT * FROM added WHERE EXISTS (SELECT 1 FROM usable)
    UNION ALL
    SELECT * FROM rechecked WHERE EXISTS (SELECT 1 FROM usable)
    UNION ALL
    SELECT * FROM revised WHERE EXISTS (SELECT 1 FROM usable)
    UNION ALL
    SELECT m.id, {_DECISION} AS code, m.created_at, m.expires_at
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
        UNION ALL
        -- the changed rows' old decisions (their new ones are in coded)
        SELECT code, -count(*) FROM retracted WHERE EXISTS (SELECT 1 FROM usable) GROUP BY code
    ) parts GROUP BY code HAVING sum(n) <> 0
),
passing AS MATERIALIZED (
    SELECT coalesce(sum(n), 0) AS n FROM counts WHERE code = 'passes_policy'
),
rejected AS MATERIALIZED (
    (SELECT id, code FROM coded
     WHERE code NOT IN {REJECTIONS_NOT}
     ORDER BY id LIMIT {REJECTED_KEEP})
    UNION ALL
    SELECT (r ->> 0)::bigint, r ->> 1 FROM usable, jsonb_array_elements(usable.rejected) r
    WHERE (r ->> 0)::bigint NOT IN (SELECT id FROM retracted)
),
eligible_ids AS (
    SELECT id FROM coded WHERE code = 'passes_policy'
    UNION ALL
    SELECT e.id FROM usable, unnest(usable.eligible) e(id)
    WHERE e.id NOT IN (SELECT id FROM retracted)
),
eligible AS MATERIALIZED (
    SELECT m.id, m.embedding <=> %(query)s::vector AS distance
    FROM {TABLE} m
    WHERE m.id = ANY(ARRAY(SELECT id FROM eligible_ids))
      AND (SELECT n FROM passing) <= %(exact_max)s
),
-- the similarity floor, on the distances just computed: the nearest rows that pass it ...
nearest AS (
    SELECT e.id, e.distance FROM eligible e WHERE {_ABOVE_FLOOR_E}
    ORDER BY e.distance NULLS LAST, e.id LIMIT %(limit)s
),
-- ... and every eligible row below it, counted (and the nearest of them listed); without a
-- floor the scan is skipped (a one-time filter on the parameter)
below_floor AS MATERIALIZED (
    SELECT e.id, e.distance FROM eligible e
    WHERE %(similarity_min)s::float8 IS NOT NULL AND NOT {_ABOVE_FLOOR_E}
)"""

# The scalars the statement's first row starts with; the ranked rows' columns follow.
_RESULT_HEAD = 10
_SIMILARITY_B, _ = _floor_sql("b")
_SIMILARITY_N, _ = _floor_sql("n")
_RESULT = f"""
SELECT
    (SELECT id FROM actor),
    -- as text: the scalars repeat on every row, and are decoded once (row 1) in Python
    (SELECT coalesce(json_object_agg(code, n), '{{}}')::text FROM counts),
    (SELECT coalesce(json_agg(json_build_array(r.id, r.code)), '[]')::text FROM (
        SELECT id, code FROM rejected ORDER BY id LIMIT %(rejected_limit)s
    ) r),
    -- the previous context.assembled for the same key: its prefix fingerprint sets `reused`
    {PREVIOUS_FINGERPRINT_SQL},
    {CHAIN_TIP_SQL},
    EXISTS (SELECT 1 FROM usable),
    -- the policy context's key: the caller's remembered policy is current if it is the same
    {POLICY_CONTEXT_KEY_SQL},
    (SELECT ok FROM caller),
    (SELECT count(*) FROM below_floor),
    (SELECT coalesce(json_agg(json_build_array(b.id, {_SIMILARITY_B})), '[]')::text FROM (
        SELECT e.id, e.distance FROM below_floor e
        ORDER BY e.distance, e.id LIMIT %(rejected_limit)s
    ) b),
    t.*
FROM (SELECT 1) one
LEFT JOIN LATERAL (
    SELECT {RANKED_COLUMNS}, {_SIMILARITY_N} AS similarity
    FROM nearest n JOIN {TABLE} m ON m.id = n.id
    ORDER BY n.distance NULLS LAST, m.id
) t ON true
"""

RECALL_READ = prepared_statement("recall.read", _FUNNEL_AND_NEAREST + _RESULT, binary=True)
# The same read, and the funnel it computed or extended stored for a large actor (``FILL``).
RECALL_READ_AND_FILL = prepared_statement(
    "recall.read_and_fill", _FUNNEL_AND_NEAREST + ",\n" + FILL + _RESULT, binary=True
)


# How many memories each actor had at its last read with ``fill_cache`` (per process): a hint
# that never changes an answer, only whether the read also tries to store the funnel.
_FUNNEL_SIZES: dict[tuple[int, str], int] = {}
_FUNNEL_SIZES_KEPT = 100_000


@dataclass(frozen=True)
class RecallCandidates:
    actor_pk: int | None
    funnel: Funnel
    rows: list[RankedRow]
    rejections: list[tuple[int, str]]
    path: str
    previous_fingerprint: str | None
    chain_tip: str | None  # of the lane read (``lane``)
    funnel_cached: bool = False
    # The policy context's key when read (``policies.selectors.effective_policy_remembered``).
    policy_context: str | None = None
    lane: int = 0
    # For a call with a remembered token (``token``): whether the read found it live, as
    # remembered, and the connection scoped to its workspace (``portal.tokens.TOKEN_CHECK_SQL``).
    token_ok: bool | None = None
    # Eligible rows (they passed the funnel) below the similarity floor, as the access path
    # counts them (``Ranked``), and the nearest of them (id, similarity), up to as many as
    # the rejected ids.
    below_floor: int = 0
    below_listed: list[tuple[int, float]] = field(default_factory=list)


def recall_read(
    *,
    workspace_id: int,
    workload_id: uuid.UUID,
    environment: str,
    actor_id: str,
    policy: PolicyDocument,
    query_vector: Sequence[float],
    limit: int,
    rejected_limit: int,
    now: datetime,
    fill_cache: bool = False,
    lane: int = 0,
    token: TokenCheck | None = None,
) -> RecallCandidates:
    """Everything recall reads about the actor's memories, nearest rows included. It writes
    nothing (a cached funnel is used, never stored) unless ``fill_cache``: then, in the same
    statement, a large actor's funnel is stored in ``FunnelCache`` when this read computed or
    extended it (the recall endpoint's cache fill). An actor found small by its previous such
    read is read without the fill, which would store nothing; its count is checked again by
    each read, so an actor that grows is cached from its next read on. The chain tip read is
    that of ``lane`` of the workspace's audit chain, the one the recall will append to.

    With ``token`` (a remembered token the call did not look up, still pending) the read
    also checks the token (``token_ok``); refused, it stores nothing and returns nothing,
    and the caller is to look the token up and read again."""
    sized = (workspace_id, actor_id)
    # The fill costs a tenth of the read even when it writes nothing: it runs only for an actor
    # whose last read in this process found it large enough to cache (or that none read yet).
    fill = fill_cache and _FUNNEL_SIZES.get(sized, FUNNEL_CACHE_MIN) >= FUNNEL_CACHE_MIN
    statement = RECALL_READ_AND_FILL if fill else RECALL_READ
    kind, _, name = actor_id.partition(":")
    filters = policy_params(policy, now)
    params = {
        **filters,
        "filter_key": filter_key(filters),
        "workspace": workspace_id,
        "lane": lane,
        "workload": workload_id,
        "environment": environment,
        "actor_id": actor_id,
        "kind": kind,
        "name": name,
        "query": BinaryVector(query_vector),
        "limit": limit,
        "exact_max": EXACT_SEARCH_MAX,
        "rejected_limit": min(rejected_limit, REJECTED_KEEP),
        "cache_min": FUNNEL_CACHE_MIN,
        "refill_min": FUNNEL_REFILL_MIN,
        **token_params(token),
    }
    result = statement.fetchall(params)
    head = result[0][:_RESULT_HEAD]
    actor_pk, counts, rejected, previous, tip, cached, context, token_ok, below, listed = head
    if params["token_hash"] is not None and not token_ok:
        return RecallCandidates(
            None, _funnel({}), [], [], "none", None, None, lane=lane, token_ok=False
        )
    counts, rejected = _json(counts), _json(rejected)
    funnel = _funnel({code: int(n) for code, n in counts.items()})
    if fill_cache:
        if len(_FUNNEL_SIZES) >= _FUNNEL_SIZES_KEPT:
            _FUNNEL_SIZES.clear()
        _FUNNEL_SIZES[sized] = funnel.candidates
    rows = [RankedRow(*row[_RESULT_HEAD:]) for row in result if row[_RESULT_HEAD] is not None]
    below_listed = [(int(i), float(similarity)) for i, similarity in _json(listed)]
    path = "exact" if rows or below else "none"
    if actor_pk is not None and funnel.after_policy > EXACT_SEARCH_MAX:
        ranked = memory_ranked(
            actor_pk=actor_pk,
            policy=policy,
            query_vector=query_vector,
            limit=limit,
            eligible=funnel.after_policy,
            now=now,
        )
        rows, path, below = ranked.rows, ranked.path, ranked.below_floor
        below_listed = ranked.below_listed[:rejected_limit]
    return RecallCandidates(
        actor_pk,
        funnel,
        rows,
        [(int(i), str(c)) for i, c in rejected],
        path,
        previous,
        tip,
        funnel_cached=bool(cached),
        policy_context=context,
        lane=lane,
        token_ok=token_ok,
        below_floor=int(below),
        below_listed=below_listed,
    )


def _json(value: Any) -> Any:
    # Django reads json/jsonb as text on raw cursors.
    return json.loads(value) if isinstance(value, str) else value
