"""Provenance benchmark: the readers of the injection trail at 1M ``context.assembled`` events,
each against a hand-written index-only statement doing the same work, in the same run.

    python bench/provenance_bench.py --events 1000000        # generates once, then measures

The dataset lives in its own embedded PostgreSQL (``bench/data/pg-provenance-<label>``), so it
disturbs neither the recall datasets nor anybody's ``.pgdata``. After ``migrate``, one
workspace gets ``--events`` assembled events and their injection rows, loaded with set-based
SQL (``INSERT ... SELECT generate_series``) straight into the tables the migrations made, with
all their indexes. Each event carries 4-6 memories (5 on average): in slot 0 one of five
*hot* memories half of the time (~100k events each at 1M), else a rare one; in slots 1-2 a
*typical* memory (~50 events each); in slots 3-5 rare ones (Poisson, mean 3: most carried by
1-5 events). Slot 3 is sent as a truncated ref one time in ten. Memory ids are drawn
independently of the event's actor: the readers look rows up by memory or by event, never by
actor. The memories exist in ``recall_memoryrecord`` (not embedded: recall never reads them
here), except one in forty, absent as if deleted or erased.

The events' hashes are well-formed and each names the previous one, but are **not** the
SHA-256 of their fields: the chain does not verify, and nothing here reads it.

Measured warm (five unrecorded runs first), each reader and its bare statement alternating run
by run, median and p95: (1) a memory's injections page 1 with the paginator's COUNT,
(2) ``memory_injection_summary``, (3) the audit filter ``?memory=`` page 1 with its COUNT,
(4) ``memories_present`` for the latest event; then the same through HTTP (Django's test
client, in process), and the append with and without the injections CTE. The appended rows are
removed afterwards, so every run measures the same dataset. Writes
``bench/results/latest/provenance-<label>.json`` (git-ignored; ``bench/update_docs.py``
publishes it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import RESULTS, ROOT, configure  # noqa: E402

SLUG = "bench-provenance"
HOT = 5  # hot memories, each in ~10% of the events (slot 0, half of the time)
TYPICAL_EVENTS = 50  # events per typical memory
RARE_EVENTS = 3  # mean events per rare memory
MISSING_EVERY = 40  # one memory in 40 is gone (deleted or erased)
ACTORS = 2000
WORKLOADS = ("support-agent", "sales-assistant", "onboarding-bot")
PAGE = 50  # the injections API's and the audit page's page size


def pools(events: int) -> dict[str, tuple[int, int]]:
    """Memory id ranges (first, size) for the hot, typical and per-slot rare pools.

    Slots draw from disjoint ranges, so no event carries a memory twice (the primary key)."""
    sizes = {
        "hot": HOT,
        "typical1": max(1, events // TYPICAL_EVENTS),
        "typical2": max(1, events // TYPICAL_EVENTS),
        "rare0": max(1, events // 2 // RARE_EVENTS),  # slot 0 when it is not hot
        "rare3": max(1, events // RARE_EVENTS),  # slot 3, always there
        "rare4": max(1, events // 2 // RARE_EVENTS),  # slot 4, half of the events
        "rare5": max(1, events // 2 // RARE_EVENTS),  # slot 5, half of the events
    }
    first, out = 1, {}
    for name, size in sizes.items():
        out[name] = (first, size)
        first += size
    return out


def _h(slot_expr: str, salt: int) -> str:
    """A deterministic, uniform non-negative int per (event, slot): reruns get the same data."""
    return f"(hashint8extended(e * 8 + {slot_expr}, {salt}) & 2147483647)"


def carried_sql(events: int, event_base: int) -> str:
    """Every (event, slot, memory, truncated) row: the injections, and the payloads' ids."""
    p = pools(events)

    def pick(pool: str) -> str:
        first, size = p[pool]
        return f"{first} + {_h('s', 1)} % {size}"

    return f"""
    SELECT {event_base} + e AS event_id, s AS slot,
        CASE s
            WHEN 0 THEN CASE WHEN {_h("0", 2)} % 2 = 0
                THEN {p["hot"][0]} + {_h("0", 3)} % {HOT} ELSE {pick("rare0")} END
            WHEN 1 THEN {pick("typical1")}
            WHEN 2 THEN {pick("typical2")}
            WHEN 3 THEN {pick("rare3")}
            WHEN 4 THEN {pick("rare4")}
            ELSE {pick("rare5")}
        END::bigint AS memory_id,
        (s = 3 AND {_h("3", 4)} % 10 = 0) AS truncated
    FROM generate_series(1, {events}) e, generate_series(0, 5) s
    WHERE s < 4 OR (s = 4 AND {_h("4", 5)} % 2 = 0) OR (s = 5 AND {_h("5", 6)} % 2 = 0)
    """


def load(events: int, marker: Path) -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connection

    from audit.models import AuditChainHead, AuditEvent, Injection
    from policies import algebra, services
    from portal.models import Workspace
    from recall.models import Actor, MemoryRecord

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    if Workspace.objects.filter(slug=SLUG).exists():
        sys.exit(f"workspace {SLUG} exists but {marker} does not: remove the data folder")
    workspace = services.workspace_create(slug=SLUG, name="Provenance benchmark", author="bench")
    workloads = [
        services.workload_create(workspace=workspace, name=name, author="bench")
        for name in WORKLOADS
    ]
    vocab = algebra.VOCABULARIES
    ws = int(workspace.pk)
    p = pools(events)
    memories = sum(size for _, size in p.values())
    timings: dict[str, float] = {}

    # Statements without parameters (so the modulo signs stay as written): the only values
    # inlined are integers and a hex hash.
    def step(name: str, sql: str) -> None:
        t0 = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(sql)
        timings[name] = round(time.perf_counter() - t0, 1)
        print(f"  {name}: {timings[name]}s", flush=True)

    def arr(values: Any) -> str:
        return "ARRAY[" + ", ".join(f"'{v}'" for v in values) + "]"

    def one_of(values: Any, salt: int) -> str:
        values = list(values)
        return f"({arr(values)})[1 + ((hashint8extended(g, {salt}) & 65535) % {len(values)})::int]"

    mem, actor, event, inj = (
        MemoryRecord._meta.db_table,
        Actor._meta.db_table,
        AuditEvent._meta.db_table,
        Injection._meta.db_table,
    )
    print(f"loading {events} events, {memories} memories", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SET work_mem = '1GB'")
        cursor.execute("SET maintenance_work_mem = '2GB'")
    step(
        "actors",
        f"INSERT INTO {actor} (workspace_id, kind, name, created_at, memory_version,"
        " memory_inserts, erased_by)"
        f" SELECT {ws}, 'user', 'u' || lpad(g::text, 5, '0'), now(), 0, 0, ''"
        f" FROM generate_series(1, {ACTORS}) g",
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(id) FROM {actor} WHERE workspace_id = %s", [workspace.pk])
        first_actor = cursor.fetchone()[0]
    # Ids given explicitly so the pools are known ranges; the sequence is moved past them.
    step(
        "memories",
        f"""INSERT INTO {mem} (id, workspace_id, actor_id, content, memory_type, source_kind,
            confirmation_status, confidence, sensitivity, consent_policy, segment_kind,
            lifecycle_status, tier, is_current, created_at, updated_at, hit_count, token_count,
            embedding_model)
        SELECT g, {ws}, {first_actor} + g % {ACTORS},
            'note ' || g || ' about the customer''s preferences and plans',
            {one_of(vocab["memoryType"], 11)}, {one_of(vocab["sourceKind"], 12)},
            {one_of(vocab["confirmationStatus"], 13)},
            0.2 + 0.8 * ((hashint8extended(g, 14) & 65535) / 65535.0),
            {one_of(vocab["sensitivity"], 15)}, {one_of(vocab["consentPolicy"], 16)},
            'memory', 'active', 'short_term', true,
            now() - interval '120 days', now() - interval '120 days', 0, 14, ''
        FROM generate_series(1, {memories}) g
        WHERE g <= {HOT} OR g % {MISSING_EVERY} <> 0""",
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{mem}', 'id'), {memories})")
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {event}")
        event_base = cursor.fetchone()[0]
        cursor.execute(
            f"SELECT last_hash FROM {AuditChainHead._meta.db_table}"
            " WHERE workspace_id = %s AND lane = 0",
            [workspace.pk],
        )
        tip = cursor.fetchone()[0]
    assert re.fullmatch("[0-9a-f]{64}", tip), tip
    step(
        "carried (staging)",
        f"CREATE UNLOGGED TABLE bench_carried AS {carried_sql(events, event_base)}",
    )
    wl = arr(str(w.id) for w in workloads)
    fake_hash = "encode(sha256(convert_to('bench-provenance:' || {}, 'UTF8')), 'hex')"
    # Policy and budget hashes are the workload's (one policy each); the prefix fingerprint is
    # the actor's pinned set; digest and query hash are the event's own.
    step(
        "events",
        f"""INSERT INTO {event} (id, workspace_id, type, occurred_at, author, workload_id,
            environment, actor_id, payload, prev_hash, hash)
        SELECT c.event_id, {ws}, 'context.assembled',
            now() - interval '90 days' + (c.event_id - {event_base}) * interval '90 days' / {events},
            'token:agent-' || (1 + c.w), ({wl})[1 + c.w]::uuid,
            CASE WHEN c.a % 10 = 0 THEN 'staging' ELSE 'prod' END,
            'user:u' || lpad((1 + c.a)::text, 5, '0'),
            jsonb_build_object(
                'envelopeId', gen_random_uuid()::text,
                'effectivePolicyHash', encode(sha256(convert_to('policy:' || c.w, 'UTF8')), 'hex'),
                'effectiveBudgetHash', encode(sha256(convert_to('budget:' || c.w, 'UTF8')), 'hex'),
                'prefixFingerprint', encode(sha256(convert_to('prefix:' || c.a, 'UTF8')), 'hex'),
                'digest', encode(sha256(convert_to('digest:' || c.event_id, 'UTF8')), 'hex'),
                'tokenCounts', jsonb_build_object(
                    'entries', 38 * c.n, 'truncatedRefs', c.t, 'used', 38 * c.n + 8,
                    'budget', 4000, 'query', 9,
                    'perKind', jsonb_build_object('memory', 38 * c.n, 'system_policy', 8)),
                'reused', c.a % 3 = 0,
                'counts', jsonb_build_object(
                    'candidates', 120 + c.a % 880, 'afterPolicy', 60 + c.a % 400,
                    'afterRanking', 10, 'afterBudgetAllocation', c.n + c.t),
                'topK', 10, 'accessPath', 'exact',
                'queryHash', encode(sha256(convert_to('query:' || c.event_id, 'UTF8')), 'hex'),
                'memoryIds', c.ids, 'truncatedIds', c.tids,
                'policyVersions', jsonb_build_object(
                    'floor', 1, 'workload', 1, 'workloadEnvironment', '', 'override', false)
            ),
            CASE WHEN c.event_id = {event_base} + 1 THEN '{tip}'
                ELSE {fake_hash.format("(c.event_id - 1)")} END,
            {fake_hash.format("c.event_id")}
        FROM (
            SELECT event_id,
                ((hashint8extended(event_id, 21) & 65535) % {len(workloads)})::int AS w,
                ((hashint8extended(event_id, 22) & 65535) % {ACTORS})::int AS a,
                count(*) FILTER (WHERE NOT truncated) AS n,
                count(*) FILTER (WHERE truncated) AS t,
                coalesce(jsonb_agg(memory_id::text ORDER BY slot) FILTER (WHERE NOT truncated),
                    '[]') AS ids,
                coalesce(jsonb_agg(memory_id::text ORDER BY slot) FILTER (WHERE truncated),
                    '[]') AS tids
            FROM bench_carried GROUP BY event_id
        ) c
        ORDER BY c.event_id""",
    )
    # In event order, as the appends write them: one memory's rows are spread over the heap.
    step(
        "injections",
        f"INSERT INTO {inj} (memory_id, event_id, workspace_id, truncated)"
        f" SELECT memory_id, event_id, {ws}, truncated FROM bench_carried ORDER BY event_id, slot",
    )
    step("drop staging", "DROP TABLE bench_carried")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{event}', 'id'), {event_base + events})"
        )
        cursor.execute(
            f"UPDATE {AuditChainHead._meta.db_table} SET length = length + {events},"
            f" last_hash = (SELECT hash FROM {event} WHERE id = {event_base + events})"
            " WHERE workspace_id = %s AND lane = 0",
            [workspace.pk],
        )
    connection.connection.autocommit = True  # VACUUM cannot run in a transaction block
    for table in (event, inj, mem, actor):
        step(f"vacuum analyze {table}", f"VACUUM ANALYZE {table}")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {inj}")
        injections = cursor.fetchone()[0]
        cursor.execute(f"SELECT count(*) FROM {mem} WHERE workspace_id = %s", [workspace.pk])
        present = cursor.fetchone()[0]
        sizes = {}
        for table in (event, inj, mem):
            cursor.execute(
                "SELECT pg_size_pretty(pg_table_size(%s)), pg_size_pretty(pg_indexes_size(%s))",
                [table, table],
            )
            heap, indexes = cursor.fetchone()
            sizes[table] = {"table": heap, "indexes": indexes}
    info = {
        "events": events,
        "firstEventId": event_base + 1,
        "lastEventId": event_base + events,
        "injections": injections,
        "memories": present,
        "memoryIds": memories,
        "pools": {name: {"first": first, "size": size} for name, (first, size) in p.items()},
        "sizes": sizes,
        "loadSeconds": round(time.perf_counter() - started, 1),
        "steps": timings,
        "chain": "hashes well-formed and linked, not computed from the fields: does not verify",
        # Where the chain ended after the load: each run puts the head back here.
        "head": dict(
            zip(
                ("lastHash", "length"),
                AuditChainHead.objects.filter(workspace=workspace, lane=0)
                .values_list("last_hash", "length")
                .get(),
                strict=True,
            )
        ),
    }
    marker.write_text(json.dumps(info, indent=2) + "\n")
    return info


# --- measuring --------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def stats(ms: list[float]) -> dict[str, float]:
    return {"p50Ms": round(statistics.median(ms), 3), "p95Ms": round(pct(ms, 95), 3)}


def paired(ours: Callable[[], Any], bare: Callable[[], Any], runs: int) -> dict[str, Any]:
    """Ours, the statements ours sends (run alone, without the ORM around them) and the bare
    statement, one after the other in every run, so a slow stretch of the machine hits all
    three."""
    sent = statements(ours)

    def ours_sql() -> None:
        for sql in sent:
            rows(sql, None)

    timed: dict[str, list[float]] = {"ours": [], "oursSql": [], "bare": []}
    fns = {"ours": ours, "oursSql": ours_sql, "bare": bare}
    for i in range(5 + runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            if i >= 5:
                timed[name].append((time.perf_counter() - t0) * 1000)
    row: dict[str, Any] = {name: stats(ms) for name, ms in timed.items()}
    row["ratio"] = round(row["ours"]["p50Ms"] / row["bare"]["p50Ms"], 1)
    row["sqlRatio"] = round(row["oursSql"]["p50Ms"] / row["bare"]["p50Ms"], 1)
    row["statements"] = len(sent)
    return row


def alone(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    for _ in range(5):
        fn()
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1000)
    return stats(ms)


def rows(sql: str, params: Any) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def statements(run: Callable[[], Any]) -> list[str]:
    """The SQL ``run`` sends, values inlined, as Django sent it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        run()
    return [query["sql"] for query in captured.captured_queries]


def explained(run: Callable[[], Any]) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of every statement ``run`` sends."""
    plans = []
    for sql in statements(run):
        plan = rows(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", None)
        plans.append(sql + "\n" + "\n".join(line for (line,) in plan))
    return plans


# The bare statements: what each reader must do, written by hand so every access is an index
# (-only, where the index holds the columns) scan. A memory's rows are all in its workspace
# (ids are global and the caller checked the memory), so none filters injections by workspace.
BARE_PAGE = """
SELECT i.event_id, i.truncated, e.occurred_at, e.author, e.workload_id, e.environment,
    e.payload->>'envelopeId'
FROM audit_injection i JOIN audit_auditevent e ON e.id = i.event_id
WHERE i.memory_id = %(m)s ORDER BY i.event_id DESC LIMIT 50
"""
BARE_COUNT = "SELECT count(*) FROM audit_injection WHERE memory_id = %(m)s"
BARE_SUMMARY = """
SELECT a.n, e.occurred_at FROM (
    SELECT count(*) AS n, max(event_id) AS last FROM audit_injection WHERE memory_id = %(m)s
) a LEFT JOIN audit_auditevent e ON e.id = a.last
"""
BARE_EVENTS_PAGE = """
SELECT e.* FROM audit_injection i JOIN audit_auditevent e ON e.id = i.event_id
WHERE i.memory_id = %(m)s AND e.workspace_id = %(ws)s ORDER BY i.event_id DESC LIMIT 50
"""
BARE_PRESENT = (
    "SELECT id FROM recall_memoryrecord WHERE workspace_id = %(ws)s AND id = ANY(%(ids)s)"
)


def samples(info: dict[str, Any]) -> dict[str, int]:
    """A hot, a typical and a rare memory: present, with about the pool's usual count."""
    pools = info["pools"]

    def near(pool: str, target: int) -> int:
        first = pools[pool]["first"]
        found = rows(
            "SELECT memory_id, count(*) FROM audit_injection"
            " WHERE memory_id BETWEEN %s AND %s AND memory_id %% %s <> 0"
            " GROUP BY memory_id ORDER BY abs(count(*) - %s), memory_id LIMIT 1",
            [first, first + 2000, MISSING_EVERY, target],
        )
        return int(found[0][0])

    return {
        "hot": pools["hot"]["first"],
        "typical": near("typical1", TYPICAL_EVENTS),
        "rare": near("rare3", RARE_EVENTS),
    }


def warm_cache() -> float:
    """Read the tables and the indexes the readers use into shared buffers, as on a server
    that has been serving for a while (each is smaller than a quarter of shared_buffers, so a
    sequential scan stays in the buffer cache)."""
    from django.db import connection, transaction

    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table in ("audit_auditevent", "audit_injection", "recall_memoryrecord"):
            cursor.execute(f"SELECT count(*) FROM {table}")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SELECT count(*) FROM audit_injection WHERE memory_id > 0")
        cursor.execute("SELECT count(*) FROM audit_auditevent WHERE id > 0")
        cursor.execute("SELECT count(*) FROM audit_auditevent WHERE workspace_id > 0")
        cursor.execute("SELECT count(*) FROM recall_memoryrecord WHERE workspace_id > 0")
    return round(time.perf_counter() - started, 1)


def readers(workspace: Any, memory_id: int, runs: int) -> dict[str, Any]:
    from django.core.paginator import Paginator
    from django.http import QueryDict

    from audit.selectors import (
        audit_events,
        memory_injection_summary,
        memory_injections,
        with_events,
    )
    from recall.api.serializers import InjectionSerializer

    bind = {"m": memory_id, "ws": workspace.pk}

    def injections_page() -> Any:
        # What MemoryInjectionsView does below HTTP: DRF's paginator is Django's Paginator.
        paginator = Paginator(memory_injections(workspace=workspace, memory_id=memory_id), PAGE)
        page = paginator.page(1)
        return paginator.count, InjectionSerializer(
            with_events(list(page.object_list)), many=True
        ).data

    def summary() -> Any:
        return memory_injection_summary(workspace=workspace, memory_id=memory_id)

    def events_page() -> Any:
        filters = QueryDict(f"memory={memory_id}")
        paginator = Paginator(audit_events(workspace=workspace, filters=filters), PAGE)
        page = paginator.get_page(1)
        return paginator.count, list(page.object_list)

    out: dict[str, Any] = {}
    out["injectionsPage"] = paired(
        injections_page, lambda: (rows(BARE_COUNT, bind), rows(BARE_PAGE, bind)), runs
    )
    out["summary"] = paired(summary, lambda: rows(BARE_SUMMARY, bind), runs)
    out["auditFilterPage"] = paired(
        events_page, lambda: (rows(BARE_COUNT, bind), rows(BARE_EVENTS_PAGE, bind)), runs
    )
    out["carriedBy"] = rows(BARE_COUNT, bind)[0][0]
    out["explain"] = {
        "injectionsPage": explained(injections_page),
        "summary": explained(summary),
        "auditFilterPage": explained(events_page),
    }
    return out


def http(workspace: Any, memory_ids: dict[str, int], event_id: int, runs: int) -> dict[str, Any]:
    """The pages and endpoints, in process through Django's test client (no network)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from portal.models import Membership, Role
    from team.services import api_token_create

    _, token = api_token_create(workspace=workspace, name="bench", role="viewer", replace=True)
    user, _ = get_user_model().objects.get_or_create(username="bench-provenance")
    Membership.objects.get_or_create(user=user, workspace=workspace, defaults={"role": Role.VIEWER})
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    pages = Client()
    pages.force_login(user)

    def get(client: Client, url: str) -> Callable[[], None]:
        def run() -> None:
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return run

    slug = workspace.slug
    out: dict[str, Any] = {}
    for label, m in memory_ids.items():
        out[label] = {
            "apiInjections": alone(get(api, f"/v1/memory/memories/{m}/injections"), runs),
            "apiAuditEvents": alone(get(api, f"/v1/audit/events/?memory={m}"), runs),
            "auditPage": alone(get(pages, f"/w/{slug}/audit/?memory={m}"), runs),
            "memoryPage": alone(get(pages, f"/w/{slug}/memories/{m}/"), runs),
        }
    out["eventPage"] = alone(get(pages, f"/w/{slug}/audit/{event_id}/"), runs)
    return out


def appends(workspace: Any, info: dict[str, Any], count: int) -> dict[str, Any]:
    """The recall's write, two ways, interleaved: the event alone, and with its injections (the
    write now; hits are folded in later, recall/hits.py, so the append writes no hit counts).

    Autocommit, as the recall path runs it (one statement, one commit per recall)."""
    import random

    from audit.models import AuditChainHead, EventType
    from audit.services import AppendWork, AuditEvent, ChainTip, Injections, _append
    from policies.models import Workload

    rng = random.Random(7)
    p = info["pools"]
    workload = Workload.objects.filter(workspace=workspace).order_by("name").first()
    assert workload is not None

    def draw(pool: str) -> int:
        while True:
            m = p[pool]["first"] + rng.randrange(p[pool]["size"])
            if m % MISSING_EVERY:
                return m

    tip = ChainTip(AuditChainHead.objects.get(workspace=workspace, lane=0).last_hash)
    variants = ("event", "eventInjections")
    ms: dict[str, list[float]] = {v: [] for v in variants}
    for i in range(count * len(variants) + 30):
        variant = variants[i % len(variants)]
        ids = [
            p["hot"]["first"] + rng.randrange(HOT) if rng.random() < 0.5 else draw("rare0"),
            draw("typical1"), draw("typical2"), draw("rare3"),
        ] + [draw(pool) for pool in ("rare4", "rare5") if rng.random() < 0.5]  # fmt: skip
        included, truncated = ids[:-1], ids[-1:]
        work: list[AppendWork] = []
        if variant == "eventInjections":
            work.append(Injections(included, truncated))
        payload = {
            "envelopeId": f"bench-{i}", "effectivePolicyHash": "0" * 64,
            "effectiveBudgetHash": "1" * 64, "prefixFingerprint": "2" * 64, "digest": "3" * 64,
            "tokenCounts": {"entries": 190, "truncatedRefs": 1, "used": 198, "budget": 4000},
            "reused": False, "counts": {"candidates": 400, "afterPolicy": 200},
            "topK": 10, "accessPath": "exact", "queryHash": "4" * 64,
            "memoryIds": [str(m) for m in included], "truncatedIds": [str(m) for m in truncated],
            "policyVersions": {"floor": 1, "workload": 1, "workloadEnvironment": "",
                               "override": False},
        }  # fmt: skip
        t0 = time.perf_counter()
        event = _append(
            tip, workspace=workspace, type=EventType.ASSEMBLED, author="token:bench",
            payload=payload, workload_id=workload.id, environment="prod",
            actor_id="user:u00001", work=work,
        )  # fmt: skip
        elapsed = (time.perf_counter() - t0) * 1000
        assert isinstance(event, AuditEvent), "the chain moved: is something else appending?"
        tip = ChainTip(event.hash)
        if i >= 30:  # the first rounds prepare the statements
            ms[variant].append(elapsed)
    out: dict[str, Any] = {v: stats(ms[v]) for v in variants}
    out["appendsEach"] = count
    out["injectionsCostMs"] = round(out["eventInjections"]["p50Ms"] - out["event"]["p50Ms"], 3)
    return out


def removed(workspace: Any, info: dict[str, Any], head: tuple[str, int]) -> None:
    """The events written during the run (the appends, the bench token's), their injections,
    and the chain head put back: the next run measures the same dataset."""
    from django.db import connection, transaction

    last = info["lastEventId"]
    with transaction.atomic(), connection.cursor() as cursor:
        # Without the foreign-key triggers: nothing indexes audit_injection.event_id (the app
        # never deletes events), so the checked DELETE scans every injection once per event,
        # ~200 ms each at 1M events. The injections go first, so nothing is left dangling.
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("DELETE FROM audit_injection WHERE event_id > %s", [last])
        cursor.execute("DELETE FROM audit_auditevent WHERE id > %s", [last])
        cursor.execute(
            "UPDATE audit_auditchainhead SET last_hash = %s, length = %s"
            " WHERE workspace_id = %s AND lane = 0",
            [*head, workspace.pk],
        )
    with connection.cursor() as cursor:
        for table in ("audit_auditevent", "audit_injection", "recall_memoryrecord"):
            cursor.execute(f"VACUUM ANALYZE {table}")


def size_label(events: int) -> str:
    return f"{events // 1_000_000}m" if events % 1_000_000 == 0 else f"{events // 1000}k"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--appends", type=int, default=2000, help="appends of each variant")
    args = parser.parse_args()
    label = size_label(args.events)
    pgdata = configure(f"provenance-{label}")
    from django.core.management import call_command

    marker = pgdata.parent / f"provenance-{label}.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        print(f"dataset provenance-{label} already loaded ({info['loadSeconds']}s)")
    else:
        from portal.db.roles import as_owner

        with as_owner():  # bulk loads, DDL and VACUUM are the database owner's to do
            info = load(args.events, marker)
        print(f"loaded in {info['loadSeconds']}s", flush=True)

    from portal.models import Workspace

    call_command("migrate", verbosity=0)  # the checkout's schema may have moved since the load
    workspace = Workspace.objects.get(slug=SLUG)
    loaded_head = (info["head"]["lastHash"], info["head"]["length"])
    try:
        out = measure(args, info, label, workspace)
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"provenance-{label}.json"
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"written to {path.relative_to(ROOT)}")
    finally:
        from portal.db.roles import as_owner

        with as_owner():  # deleting audit rows is the owner's alone
            removed(workspace, info, loaded_head)


def measure(args: Any, info: dict[str, Any], label: str, workspace: Any) -> dict[str, Any]:
    from recall.page_selectors import memories_present

    load_before = os.getloadavg()
    warm = warm_cache()
    chosen = samples(info)
    results: dict[str, Any] = {}
    for name, memory_id in chosen.items():
        results[name] = {"memoryId": memory_id, **readers(workspace, memory_id, args.runs)}
        r = results[name]
        print(
            name, memory_id, r["carriedBy"],
            {k: (r[k]["ours"]["p50Ms"], r[k]["oursSql"]["p50Ms"], r[k]["bare"]["p50Ms"])
             for k in ("injectionsPage", "summary", "auditFilterPage")},
            flush=True,
        )  # fmt: skip
    latest = info["lastEventId"]
    payload = rows("SELECT payload FROM audit_auditevent WHERE id = %s", [latest])[0][0]
    payload = json.loads(payload) if isinstance(payload, str) else payload
    ids = [int(pk) for key in ("memoryIds", "truncatedIds") for pk in payload[key]]
    results["present"] = {
        "eventId": latest,
        "ids": len(ids),
        **paired(
            lambda: memories_present(workspace=workspace, ids=ids),
            lambda: rows(BARE_PRESENT, {"ws": workspace.pk, "ids": ids}),
            args.runs,
        ),
        "explain": explained(lambda: memories_present(workspace=workspace, ids=ids)),
    }
    print("present", results["present"]["ours"], results["present"]["bare"], flush=True)
    results["http"] = http(workspace, chosen, latest, args.runs)
    print("http", json.dumps(results["http"]), flush=True)
    results["append"] = appends(workspace, info, args.appends)
    print("append", results["append"], flush=True)
    return {
        "label": label,
        "measuredAt": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "dataset": info,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "postgres": rows("SHOW server_version", None)[0][0],
            "sharedBuffers": os.environ["EMBEDDED_PG_SHARED_BUFFERS"],
            "fsync": rows("SHOW fsync", None)[0][0],
            # 1-minute load before and after: the 2 cores are shared with whatever else runs.
            "loadAverage": [round(load_before[0], 1), round(os.getloadavg()[0], 1)],
        },
        "cacheWarmSeconds": warm,
        "runs": args.runs,
        "results": results,
        "note": "warm; ours and bare alternate run by run; ratio = ours p50 / bare p50."
        " The dataset's hash chain does not verify (generated rows).",
    }


if __name__ == "__main__":
    main()
