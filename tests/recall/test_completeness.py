"""SPEC §5 completeness: recall returns ``topK`` rows whenever ``topK`` are eligible.

A filtered approximate-index scan can silently return fewer rows (or the wrong ones) once
PostgreSQL filters after the HNSW scan, typically when a prepared statement switches to a
generic plan. These tests build tables on which ``recall.engine.read`` takes its HNSW path
(``EXACT_SEARCH_MAX`` is lowered so a few thousand rows suffice), with a filter only 2% of the
actor's rows pass, and compare every recall with a brute-force cosine ranking in Python.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql.base import ServerBindingCursor
from django.utils import timezone

from policies.models import Workload
from policies.selectors import effective_policy_for
from policies.services import workload_policy_save
from recall.engine import read as selectors
from recall.hits import hits_fold
from recall.models import Actor, MemoryRecord
from recall.runtime import embedder
from tests.helpers import recall
from tests.module_personas import module_scoped
from tests.recall import factories

# The workspace, editor and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

QUERY = "release summary preferences"
TOP_K = 10
# One row in fifty is a decision: the only memory type the workload policy lets through.
EVERY_50TH_IS_A_DECISION = {
    "memory_type": "CASE WHEN mod(g, 50) = 0 THEN 'decision' ELSE 'fact' END"
}


@pytest.fixture
def hnsw_above_50(monkeypatch: pytest.MonkeyPatch) -> None:
    # Production switches at 20,000 eligible rows; the logic is the same at 50.
    monkeypatch.setattr(selectors, "EXACT_SEARCH_MAX", 50)


@pytest.fixture
def decisions_only(workload_a: Workload) -> Workload:
    workload_policy_save(
        workload=workload_a,
        environment="prod",
        document={"memoryTypeAllowed": ["decision"]},
        author="system:test",
    )
    return workload_a


@pytest.fixture
def prepared_statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make this connection bind server-side and prepare every statement on first use.

    This is what ``OPTIONS={"server_side_binding": True, "prepare_threshold": ...}`` does
    for a deployment; threshold 0 reaches the plan-cache behaviour in the fewest calls.
    """
    connection.ensure_connection()
    raw = connection.connection
    # Start with no prepared statement, so the counts read at the end are this test's alone;
    # the test's rollback makes psycopg deallocate what it prepared.
    raw.execute("DEALLOCATE ALL", prepare=False)
    monkeypatch.setattr(raw, "cursor_factory", ServerBindingCursor)
    monkeypatch.setattr(raw, "prepare_threshold", 0)
    yield


def exact_top_k(owner: Actor, k: int, **eligible: Any) -> list[str]:
    """Brute force: cosine of the query with every eligible row, best first, ties by id."""
    query = embedder().embed([QUERY])[0]
    query_norm = math.sqrt(sum(v * v for v in query))
    scored = []
    for pk, vector in MemoryRecord.objects.filter(actor=owner, **eligible).values_list(
        "id", "embedding"
    ):
        values = list(vector)
        norm = math.sqrt(sum(v * v for v in values))
        similarity = sum(a * b for a, b in zip(query, values, strict=True)) / (query_norm * norm)
        scored.append((-similarity, pk))
    return [str(pk) for _, pk in sorted(scored)[:k]]


def entry_ids(envelope: dict[str, Any]) -> list[str]:
    return [entry["id"] for entry in envelope["entries"]]


def plan_of(sql: str, params: dict[str, Any]) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def generic_plan_of(sql: str) -> str:
    """The plan PostgreSQL caches for a prepared statement once it stops re-planning."""
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    # Sent as is (never prepared: the statement has placeholders but no values).
    with psycopg.ClientCursor(connection.connection) as cursor:
        cursor.execute("EXPLAIN (GENERIC_PLAN) " + re.sub(r"%\((\w+)\)s", placeholder, sql))
        return "\n".join(row[0] for row in cursor.fetchall())


def push_planner_onto_the_hnsw_index(workload: Workload, owner: Actor) -> None:
    """Make PostgreSQL walk the HNSW graph and filter, as it does on a large table.

    On a few thousand rows the planner rightly prefers reading the actor's rows and sorting
    them, which is always complete; the index scan is the path that can come up short.
    """
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
    # The premise of the tests that call this: the ranking query really uses the index.
    plan = plan_of(selectors.HNSW_SQL, ranking_params(workload, owner))
    assert "Index Scan using memory_embedding_hnsw" in plan


def ranking_params(workload: Workload, owner: Actor) -> dict[str, Any]:
    """The parameters recall binds to its ranking query (pool of 30 for topK 10)."""
    policy = effective_policy_for(workload=workload, environment="prod").policy
    return {
        **selectors.policy_params(policy, timezone.now()),
        "actor": owner.pk,
        "query": selectors.vector_literal(embedder().embed([QUERY])[0]),
        "limit": 30,
    }


@pytest.mark.usefixtures("hnsw_above_50")
class HnswCompletenessTests:
    # Made once for the class (~1.6 s: the rows and the index built over them); each test's
    # writes are rolled back at its end. Twelve rows the tie test writes leave dead entries
    # in the index, near the query: only the last test, which wants a short scan, comes after.
    @pytest.fixture(scope="class")
    @classmethod
    def ada_with_5000_rows(cls, class_db: None, workspace_a: Any) -> Actor:
        ada = factories.actor(workspace_a, "user:ada")
        with factories.hnsw_index_built_afterwards():
            factories.random_table(
                workspace_a, ada, 5000, seed=0.42, columns=EVERY_50TH_IS_A_DECISION
            )
        return ada

    @pytest.mark.parametrize("planner", ["left alone", "pushed onto the index"])
    def test_it_returns_the_exact_top_k_when_only_two_percent_of_the_rows_pass(
        self, editor, decisions_only, ada_with_5000_rows, planner
    ):
        if planner == "pushed onto the index":
            push_planner_onto_the_hnsw_index(decisions_only, ada_with_5000_rows)
        expected = exact_top_k(ada_with_5000_rows, TOP_K, memory_type="decision")

        envelope = recall(editor, decisions_only, query=QUERY, topK=TOP_K)

        assert envelope["diagnostics"]["accessPath"] == "hnsw"
        assert envelope["diagnostics"]["counts"] == {
            "candidates": 5000,
            "afterPolicy": 100,
            "afterRanking": TOP_K,
            "afterBudgetAllocation": TOP_K,
        }
        assert entry_ids(envelope) == expected
        assert {e["memoryType"] for e in envelope["entries"]} == {"decision"}

    @pytest.mark.parametrize("plan_cache_mode", ["auto", "force_generic_plan"])
    def test_it_returns_the_exact_top_k_ten_times_over_with_prepared_statements(
        self, editor, decisions_only, ada_with_5000_rows, prepared_statements, plan_cache_mode
    ):
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL plan_cache_mode = {plan_cache_mode}")
        if plan_cache_mode == "force_generic_plan":
            # The premise: the generic plan walks the HNSW index and filters afterwards, the
            # plan under which a peer returned 0.23 of 10 rows.
            assert "Index Scan using memory_embedding_hnsw" in generic_plan_of(selectors.HNSW_SQL)
        expected = exact_top_k(ada_with_5000_rows, TOP_K, memory_type="decision")

        runs = [recall(editor, decisions_only, query=QUERY, topK=TOP_K) for _ in range(10)]

        assert [entry_ids(run) for run in runs] == [expected] * 10
        assert {run["diagnostics"]["accessPath"] for run in runs} == {"hnsw"}
        # The premise: the ranking statement was prepared once and executed by every run.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans + custom_plans, generic_plans FROM pg_prepared_statements"
                " WHERE statement LIKE %s",
                ["%ORDER BY m.embedding <=>%"],
            )
            executions = cursor.fetchall()
        assert len(executions) == 1
        total, generic = executions[0]
        assert total == 10
        if plan_cache_mode == "force_generic_plan":
            assert generic == 10

    def test_its_rows_come_in_the_exact_paths_order_ties_by_id(
        self, decisions_only, ada_with_5000_rows, workspace_a
    ):
        """The iterative scan's relaxed order may return rows out of order; the HNSW path
        orders what it found as the exact path does: nearest first, then by id. Twelve
        decisions share the query's own embedding, so they tie, nearest of all."""
        twins = factories.memories(
            workspace_a, *({"content": QUERY, "memory_type": "decision"} for _ in range(12))
        )
        push_planner_onto_the_hnsw_index(decisions_only, ada_with_5000_rows)
        params = ranking_params(decisions_only, ada_with_5000_rows)

        rows = selectors.hnsw_nearest(params)

        assert len(rows) == 30
        ids = [row.id for row in rows]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, embedding <=> %s::vector FROM recall_memoryrecord WHERE id = ANY(%s)",
                [params["query"], ids],
            )
            distance = dict(cursor.fetchall())
        assert ids == sorted(ids, key=lambda pk: (distance[pk], pk))
        assert ids[:12] == sorted(twin.pk for twin in twins)

    def test_it_falls_back_to_an_exact_scan_when_the_index_scan_comes_up_short(
        self, editor, decisions_only, ada_with_5000_rows, monkeypatch
    ):
        push_planner_onto_the_hnsw_index(decisions_only, ada_with_5000_rows)
        # A one-candidate search list that stops after 60 tuples finds about one decision.
        monkeypatch.setattr(selectors, "HNSW_EF_SEARCH", 1)
        monkeypatch.setattr(selectors, "HNSW_MAX_SCAN_TUPLES", 60)
        params = ranking_params(decisions_only, ada_with_5000_rows)
        assert len(selectors.hnsw_nearest(params)) < 30  # the premise: the index scan is short
        expected = exact_top_k(ada_with_5000_rows, TOP_K, memory_type="decision")

        envelope = recall(editor, decisions_only, query=QUERY, topK=TOP_K)

        assert envelope["diagnostics"]["accessPath"] == "exact"
        assert envelope["diagnostics"]["counts"]["afterRanking"] == TOP_K
        assert entry_ids(envelope) == expected


@pytest.mark.usefixtures("hnsw_above_50")
class OtherActorsRowsTests:
    @pytest.mark.parametrize("planner", ["left alone", "pushed onto the index"])
    def test_it_finds_the_exact_top_k_of_an_actor_whose_rows_are_two_percent_of_the_index(
        self, workspace_a, editor, decisions_only, planner
    ):
        ada = factories.actor(workspace_a, "user:ada")
        bob = factories.actor(workspace_a, "user:bob")
        with factories.hnsw_index_built_afterwards():
            # Bob's rows all pass the policy: only the actor filter keeps them out.
            factories.random_table(
                workspace_a, bob, 4900, seed=0.17, columns={"memory_type": "'decision'"}
            )
            factories.random_table(
                workspace_a,
                ada,
                100,
                seed=-0.3,
                columns={"memory_type": "CASE WHEN mod(g, 5) = 0 THEN 'fact' ELSE 'decision' END"},
            )
        if planner == "pushed onto the index":
            push_planner_onto_the_hnsw_index(decisions_only, ada)
        expected = exact_top_k(ada, TOP_K, memory_type="decision")

        runs = [recall(editor, decisions_only, query=QUERY, topK=TOP_K) for _ in range(3)]

        for envelope in runs:
            assert envelope["diagnostics"]["accessPath"] == "hnsw"
            assert envelope["diagnostics"]["counts"]["afterPolicy"] == 80
            assert entry_ids(envelope) == expected
        hits_fold(workspace_id=editor.workspace.pk)  # the recalls' hits counted into the rows
        assert not MemoryRecord.objects.filter(actor=bob, hit_count__gt=0).exists()


class SmallTableCompletenessTests:
    @pytest.mark.parametrize("eligible", [TOP_K - 1, TOP_K, TOP_K + 1, 3 * TOP_K + 5])
    def test_it_returns_min_of_top_k_and_the_eligible_rows_on_the_exact_path(
        self, workspace_a, editor, decisions_only, eligible
    ):
        ada = factories.actor(workspace_a, "user:ada")
        factories.random_table(
            workspace_a,
            ada,
            eligible * 10,
            seed=0.5,
            columns={"memory_type": "CASE WHEN mod(g, 10) = 0 THEN 'decision' ELSE 'fact' END"},
        )

        envelope = recall(editor, decisions_only, query=QUERY, topK=TOP_K)

        assert envelope["diagnostics"]["accessPath"] == "exact"
        assert envelope["diagnostics"]["counts"]["afterPolicy"] == eligible
        assert entry_ids(envelope) == exact_top_k(ada, TOP_K, memory_type="decision")
        assert len(envelope["entries"]) == min(TOP_K, eligible)
