"""The similarity floor (``similarityMin``): the recall axis that depends on the query.

It is checked where the rows are ranked, on each row's distance to the query: rows below it
are left out under ``similarity_below_min`` (counted, and at verbosity ``full`` listed with
their similarity), the nearest rows that pass fill ``topK``, and the funnel, which the cache
keeps per policy whatever the query, never depends on it.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from policies.selectors import effective_policy_for
from policies.services import workload_policy_save, workspace_policy_save
from recall.engine import funnel_cache
from recall.engine import read as engine
from recall.engine.policy_filter import policy_params
from recall.models import FunnelCache, MemoryRecord
from recall.runtime import query_embedding
from tests.helpers import QUERY, error_of, post_recall, recall
from tests.module_personas import module_scoped
from tests.recall import factories
from tests.recall.test_recall import set_floor

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "workload_a"
)

# Share the query's words: similar to it (0.5 or more with the hashing embedder).
SIMILAR = "Ada's release summary preferences, note {n}"
# Share none of them: about 0.
UNRELATED = "Invoices for Northwind go out on Tuesdays, batch {n}"
# Share one word: low but positive (about 0.16).
WEAK = "Northwind invoice preferences, batch {n}"


def rows(workspace: Any, text: str, count: int, **fields: Any) -> list[MemoryRecord]:
    return factories.memories(
        workspace, *({"content": text.format(n=n), **fields} for n in range(count))
    )


def ids(memories: list[MemoryRecord]) -> set[str]:
    return {str(m.pk) for m in memories}


def similarity_of(memory: MemoryRecord, query: str = QUERY) -> float:
    """The memory's similarity to the query, computed as recall computes it."""
    vector = "[" + ",".join(repr(v) for v in query_embedding(query)) + "]"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(1 - (embedding <=> %s::vector), 0) FROM recall_memoryrecord"
            " WHERE id = %s",
            [vector, memory.pk],
        )
        (value,) = cursor.fetchone()
    return float(value)


def set_workload(workload: Any, environment: str = "prod", **axes: Any) -> None:
    workload_policy_save(
        workload=workload, environment=environment, document=axes, author="system:test"
    )


class SimilarityFloorRecallTests:
    def test_memories_below_the_floor_are_left_out_counted_and_listed_nearest_first(
        self, editor, workload_a
    ):
        set_floor(editor.workspace, similarityMin=0.3, diagnosticsVerbosity="full")
        kept = rows(editor.workspace, SIMILAR, 3)
        dropped = rows(editor.workspace, UNRELATED, 4)

        envelope = recall(editor, workload_a)

        diagnostics = envelope["diagnostics"]
        assert {e["id"] for e in envelope["entries"]} == ids(kept)
        assert all(e["similarity"] >= 0.3 for e in envelope["entries"])
        assert diagnostics["counts"] == {
            "candidates": 7, "afterPolicy": 3, "afterRanking": 3, "afterBudgetAllocation": 3,
        }  # fmt: skip
        assert diagnostics["reasons"] == {
            "similarity_below_min": 4, "passes_policy": 3, "included": 3,
        }  # fmt: skip
        below = [d for d in diagnostics["decisions"] if d["code"] == "similarity_below_min"]
        assert {d["id"] for d in below} == ids(dropped)
        assert all(set(d) == {"id", "code", "similarity"} for d in below)
        assert all(d["similarity"] < 0.3 for d in below)
        assert [d["similarity"] for d in below] == sorted(
            (d["similarity"] for d in below), reverse=True
        )
        assert diagnostics["decisions"][:3] == [
            d for d in diagnostics["decisions"] if d["code"] == "included"
        ]
        assert "Invoices" not in str(envelope)

    def test_at_summary_the_floor_is_counted_and_nothing_is_listed(self, editor, workload_a):
        set_floor(editor.workspace, similarityMin=0.3)
        rows(editor.workspace, SIMILAR, 2)
        rows(editor.workspace, UNRELATED, 2)

        diagnostics = recall(editor, workload_a)["diagnostics"]

        assert diagnostics["verbosity"] == "summary"
        assert diagnostics["reasons"]["similarity_below_min"] == 2
        assert diagnostics["decisions"] == []

    def test_a_memory_exactly_at_the_floor_passes_and_one_a_hair_below_does_not(
        self, editor, workload_a
    ):
        [memory] = rows(editor.workspace, SIMILAR, 1)
        exact = similarity_of(memory)

        set_workload(workload_a, similarityMin=exact)
        at_floor = recall(editor, workload_a)
        set_workload(workload_a, similarityMin=math.nextafter(exact, 1.0))
        above_it = recall(editor, workload_a)

        assert [e["id"] for e in at_floor["entries"]] == [str(memory.pk)]
        assert above_it["entries"] == []
        assert above_it["diagnostics"]["reasons"] == {"similarity_below_min": 1}
        assert above_it["diagnostics"]["accessPath"] == "exact"

    def test_without_a_floor_even_an_unrelated_memory_is_recalled(self, editor, workload_a):
        [memory] = rows(editor.workspace, UNRELATED, 1)

        envelope = recall(editor, workload_a)

        assert [e["id"] for e in envelope["entries"]] == [str(memory.pk)]
        assert "similarity_below_min" not in envelope["diagnostics"]["reasons"]

    def test_the_nearest_memories_that_pass_the_floor_fill_top_k_whatever_is_newer(
        self, editor, workload_a
    ):
        # Relevant memories of three weeks ago, and many brand-new ones barely related: without
        # a floor the new ones win on recency (the inclusion score's age factor); with it,
        # they are kept out and the topK entries are all relevant.
        old = timezone.now() - timedelta(days=20)
        relevant = rows(editor.workspace, SIMILAR, 12, created_at=old)
        rows(editor.workspace, WEAK, 40)

        without = recall(editor, workload_a)
        set_workload(workload_a, similarityMin=0.3)
        with_floor = recall(editor, workload_a)

        assert ids(relevant).isdisjoint(e["id"] for e in without["entries"])
        assert len(with_floor["entries"]) == 10
        assert {e["id"] for e in with_floor["entries"]} <= ids(relevant)
        assert with_floor["diagnostics"]["reasons"] == {
            "similarity_below_min": 40, "passes_policy": 12, "below_top_k": 2, "included": 10,
        }  # fmt: skip

    def test_an_override_may_lower_the_workloads_floor_down_to_the_operators_not_past_it(
        self, editor, workload_a
    ):
        set_floor(editor.workspace, relaxable=["similarityMin"], similarityMin=0.05)
        set_workload(workload_a, similarityMin=0.9)
        similar = rows(editor.workspace, SIMILAR, 2)

        narrowed = recall(editor, workload_a)
        relaxed = recall(editor, workload_a, policyOverride={"similarityMin": 0.3})
        refused = post_recall(editor, workload_a, policyOverride={"similarityMin": 0.01})
        no_floor = post_recall(editor, workload_a, policyOverride={"similarityMin": None})

        assert narrowed["entries"] == []
        assert {e["id"] for e in relaxed["entries"]} == ids(similar)
        for response in (refused, no_floor):
            error = error_of(response, 403, "USER_OVERRIDE_NOT_PERMITTED")
            assert error["details"] == {"axes": ["similarityMin"]}

    @pytest.mark.parametrize("value", [1.5, -0.1, "high", True])
    def test_an_out_of_range_floor_in_an_override_is_a_400_naming_it(
        self, editor, workload_a, value
    ):
        set_floor(editor.workspace, relaxable=["similarityMin"])

        response = post_recall(editor, workload_a, policyOverride={"similarityMin": value})

        error = error_of(response, 400)
        assert "similarityMin" in str(error["details"])


@pytest.mark.usefixtures("hnsw_above_50")
class SimilarityFloorOnTheHnswPathTests:
    @pytest.fixture
    def hnsw_above_50(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(engine, "EXACT_SEARCH_MAX", 50)

    def test_once_a_ranked_row_is_below_the_floor_every_farther_row_is_counted_below_it(
        self, editor, workload_a, workspace_a
    ):
        ada = factories.actor(workspace_a, "user:ada")
        with factories.hnsw_index_built_afterwards():
            # Random unit vectors: similarity to any query about 0 (|s| < 0.25).
            factories.random_table(workspace_a, ada, 200, seed=0.17)
            relevant = rows(workspace_a, SIMILAR, 5)
        set_workload(workload_a, similarityMin=0.3)

        envelope = recall(editor, workload_a)

        diagnostics = envelope["diagnostics"]
        assert diagnostics["accessPath"] == "hnsw"
        assert {e["id"] for e in envelope["entries"]} == ids(relevant)
        assert diagnostics["counts"]["afterPolicy"] == 5
        assert diagnostics["reasons"]["similarity_below_min"] == 200

    def test_when_every_ranked_row_passes_the_rows_past_them_are_below_top_k(
        self, editor, workload_a, workspace_a
    ):
        ada = factories.actor(workspace_a, "user:ada")
        with factories.hnsw_index_built_afterwards():
            factories.random_table(workspace_a, ada, 200, seed=0.17)
            rows(workspace_a, SIMILAR, 40)
        set_workload(workload_a, similarityMin=0.3)

        envelope = recall(editor, workload_a)

        diagnostics = envelope["diagnostics"]
        assert diagnostics["accessPath"] == "hnsw"
        assert len(envelope["entries"]) == 10
        # The nearest 30 all pass: the 210 past them are not known to be below the floor.
        assert "similarity_below_min" not in diagnostics["reasons"]
        assert diagnostics["reasons"]["below_top_k"] == 230


class SimilarityFloorFunnelTests:
    def test_policies_that_differ_only_in_the_floor_share_their_funnel(self):
        from policies.algebra import default_floor

        now = timezone.now()
        plain = policy_params(default_floor(), now)
        floored = policy_params({**default_floor(), "similarityMin": 0.4}, now)

        assert floored["similarity_min"] == 0.4
        assert funnel_cache.filter_key(plain) == funnel_cache.filter_key(floored)

    def test_a_cached_funnel_still_counts_the_floor_for_each_query(
        self, editor, workload_a, workspace_a, monkeypatch
    ):
        monkeypatch.setattr(engine, "FUNNEL_CACHE_MIN", 1)
        monkeypatch.setattr(engine, "FUNNEL_REFILL_MIN", 1)
        kept = rows(workspace_a, SIMILAR, 2)
        rows(workspace_a, UNRELATED, 3)
        set_workload(workload_a, similarityMin=0.3)

        first = recall(editor, workload_a)
        second = recall(editor, workload_a)
        other_query = recall(editor, workload_a, query="Invoices for Northwind on Tuesdays")

        assert FunnelCache.objects.count() == 1  # one funnel, whatever the query
        for envelope in (first, second):
            assert {e["id"] for e in envelope["entries"]} == ids(kept)
            assert envelope["diagnostics"]["reasons"]["similarity_below_min"] == 3
        assert ids(kept).isdisjoint(e["id"] for e in other_query["entries"])
        assert other_query["diagnostics"]["reasons"]["similarity_below_min"] == 2

    def test_the_effective_policy_carries_the_floor_and_its_hash_changes_with_it(
        self, editor, workload_a
    ):
        before = effective_policy_for(workload=workload_a, environment="prod")
        set_workload(workload_a, similarityMin=0.3)
        after = effective_policy_for(workload=workload_a, environment="prod")

        assert before.policy["similarityMin"] is None
        assert after.policy["similarityMin"] == 0.3
        assert after.policy_hash != before.policy_hash
        assert after.budget_hash == before.budget_hash


class SimilarityFloorApiTests:
    @pytest.mark.parametrize("value", [1.01, -0.5, "0.3", False])
    def test_a_floor_out_of_range_is_a_400_naming_the_axis(self, operator, value):
        from policies.algebra import default_floor

        response = operator.api().put(
            f"/v1/workspaces/{operator.workspace.slug}/policy",
            {**default_floor(), "similarityMin": value},
            format="json",
        )

        error = error_of(response, 400, "INVALID_POLICY")
        assert list(error["details"]["fields"]) == ["similarityMin"]

    def test_a_floor_may_leave_it_out_and_then_has_none(self, operator):
        from policies.algebra import default_floor

        document = {k: v for k, v in default_floor().items() if k != "similarityMin"}
        document["comment"] = "No similarity floor"
        response = operator.api().put(
            f"/v1/workspaces/{operator.workspace.slug}/policy", document, format="json"
        )

        assert response.status_code == 200, response.content
        assert response.json()["policy"]["similarityMin"] is None

    def test_a_workload_below_the_floor_is_refused_and_one_above_it_saved(self, editor, workload_a):
        set_floor(editor.workspace, similarityMin=0.3)
        url = f"/v1/workloads/{workload_a.id}/policy?environment=prod"

        below = editor.api().put(url, {"similarityMin": 0.2}, format="json")
        no_floor = editor.api().put(url, {"similarityMin": None}, format="json")
        out_of_range = editor.api().put(url, {"similarityMin": 2}, format="json")
        above = editor.api().put(url, {"similarityMin": 0.45}, format="json")

        for response in (below, no_floor):
            error = error_of(response, 422, "WORKLOAD_RELAXES_OPERATOR_FLOOR")
            assert error["details"]["axes"] == ["similarityMin"]
            assert error["details"]["floor"] == {"similarityMin": 0.3}
        error_of(out_of_range, 400, "INVALID_POLICY")
        assert above.status_code in (200, 201), above.content

    def test_the_axis_registry_lists_it(self, viewer):
        axes = viewer.api().get("/v1/policy/axes").json()["axes"]

        [axis] = [a for a in axes if a["name"] == "similarityMin"]
        assert (axis["group"], axis["kind"]) == ("recall", "optional_min")


@pytest.fixture
def floor_saved_before_the_axis(workspace_a: Any) -> None:
    """The workspace's floor as saved before ``similarityMin`` existed: without the key."""
    version = workspace_a.policy_versions.order_by("-version").first()
    document = {k: v for k, v in version.document.items() if k != "similarityMin"}
    workspace_policy_save(
        workspace=workspace_a, document=document, author="system:test", comment="Test floor"
    )
    version = workspace_a.policy_versions.order_by("-version").first()
    version.document = document
    version.save(update_fields=["document"])


class StoredFloorWithoutTheAxisTests:
    def test_recall_works_under_it_with_no_floor(
        self, editor, workload_a, floor_saved_before_the_axis
    ):
        [memory] = rows(editor.workspace, UNRELATED, 1)

        envelope = recall(editor, workload_a)

        assert [e["id"] for e in envelope["entries"]] == [str(memory.pk)]

    def test_saving_it_again_with_a_null_floor_changes_nothing(
        self, operator, floor_saved_before_the_axis
    ):
        versions = operator.workspace.policy_versions.count()
        current = operator.workspace.policy_versions.order_by("-version").first()

        response = operator.api().put(
            f"/v1/workspaces/{operator.workspace.slug}/policy",
            {**current.document, "similarityMin": None, "comment": "Saved again"},
            format="json",
        )

        assert response.status_code == 200, response.content
        assert operator.workspace.policy_versions.count() == versions
