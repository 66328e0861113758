"""The recall engine's seams (``recall.engine``): one filter for every reader, reads that do
not write, the funnel cache's triggers as the migrations installed them, one registry of the
statements that run prepared."""

from __future__ import annotations

import re
from importlib import import_module
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.algebra import VOCABULARIES, default_floor
from policies.selectors import effective_policy_for
from portal.db.cursors import prepared_statement, prepared_statements
from recall.engine import funnel_cache, policy_filter, read
from recall.engine.impact import memory_policy_impact
from recall.models import FunnelCache, MemoryRecord
from recall.page_selectors import recall_preview
from recall.runtime import embedder
from tests.properties import examples
from tests.recall import factories

QUERY = "release summary preferences"


def migration(name: str) -> Any:
    return import_module(f"recall.migrations.{name}")


class PolicyFilterTests:
    def test_the_filter_reads_exactly_the_columns_the_covering_index_includes(self):
        read_columns = {
            column
            for part in policy_filter.PARTS
            if part not in policy_filter.RANKING_PARTS  # over the ranked rows' distances
            for column in re.findall(r"\bm\.(\w+)", policy_filter.policy_filter_sql(part))
        }
        index = next(i for i in MemoryRecord._meta.indexes if i.name == "memory_recall_cover_idx")

        assert read_columns == set(policy_filter.FILTER_COLUMNS)
        assert list(index.include) == [*policy_filter.FILTER_COLUMNS, "workspace"]

    def test_the_covering_index_is_the_one_the_last_migration_built(self):
        [added] = [
            op
            for op in migration("0013_recall_cover_index_with_workspace").Migration.operations
            if op.__class__.__name__ == "AddIndex"
        ]

        assert tuple(added.index.include) == (*policy_filter.FILTER_COLUMNS, "workspace")

    def test_a_suffix_renames_every_parameter_and_only_those(self):
        plain = policy_filter.policy_filter_sql("axes")
        suffixed = policy_filter.policy_filter_sql("axes", suffix="_p2")
        params = policy_filter.policy_params(_policy(), timezone.now(), suffix="_p2")

        assert suffixed == re.sub(r"%\((\w+)\)s", r"%(\1_p2)s", plain)
        assert set(re.findall(r"%\((\w+)\)s", suffixed)) <= set(params)

    def test_the_orm_form_binds_one_value_per_placeholder_in_order(self):
        now = timezone.now()
        expression = policy_filter.policy_filter_expression(
            _policy(), now, part="decision_explained", model=MemoryRecord
        )
        named = policy_filter.policy_filter_sql("decision_explained")
        values = policy_filter.policy_params(_policy(), now)

        assert expression.sql.count("%s") == len(expression.params)
        assert list(expression.params) == [
            values[name] for name in re.findall(r"%\((\w+)\)s", named)
        ]
        assert '"recall_memoryrecord".lifecycle_status' in expression.sql


def held_to_confidence_min(status: str | None, confidence: float | None, minimum: float) -> bool:
    """Seed 001's words, apart from the SQL: ``confidenceMin`` is the "minimum confidence for
    inferred or observed memory"; a NULL never passes a rule."""
    if status is None or confidence is None:
        return False
    return status not in ("inferred", "observed") or confidence >= minimum


@pytest.mark.django_db
class ConfidenceRuleTests:
    @settings(
        max_examples=examples(120), suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        status=st.none() | st.sampled_from(VOCABULARIES["confirmationStatus"]),
        confidence=st.none() | st.floats(0.0, 1.0),
        minimum=st.floats(0.0, 1.0),
    )
    def test_the_sql_holds_inferred_and_observed_memories_only_and_fails_nulls(
        self, status, confidence, minimum
    ):
        check = dict(policy_filter.POLICY_CHECKS)["confidence_below_min"]
        sql = check.format(m="m.", confidence_min="%s")
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {sql} FROM (VALUES (%s::text, %s::float8)) AS m(confirmation_status,"
                " confidence)",
                [minimum, status, confidence],
            )
            [(passed,)] = cursor.fetchall()

        assert passed is held_to_confidence_min(status, confidence, minimum)

    def test_the_impact_preview_counts_only_inferred_and_observed_memories_as_stopped(
        self, workspace_a
    ):
        statuses = VOCABULARIES["confirmationStatus"]
        factories.memories(
            workspace_a,
            *({"content": f"{s} note", "confirmation_status": s, "confidence": 0.3}
              for s in statuses),
        )  # fmt: skip
        floor = default_floor()

        [(recallable, stopped)] = memory_policy_impact(
            workspace=workspace_a,
            pairs=[(floor, {**floor, "confidenceMin": 0.5})],
            now=timezone.now(),
        )

        assert (recallable, stopped) == (len(statuses), 2)


class FunnelCacheTriggerTests:
    """The constants are the triggers' SQL as migrations 0007-0011, 0015 and 0016 left it."""

    def test_the_insert_function_is_migration_0008s(self):
        assert funnel_cache.INSERTED_FUNCTION in migration("0008_funnel_cache_inserts").TRIGGERS

    def test_the_delete_trigger_is_migration_0008s(self):
        assert funnel_cache.DELETED_TRIGGER in migration("0008_funnel_cache_inserts").TRIGGERS

    def test_the_insert_trigger_is_migration_0007s(self):
        assert funnel_cache.INSERTED_TRIGGER in migration("0007_funnel_cache").TRIGGERS

    def test_the_update_trigger_is_migration_0011s(self):
        m = migration("0011_memory_lifecycle")

        assert funnel_cache.TRIGGER_COLUMNS == m.FUNNEL_COLUMNS
        assert funnel_cache.UPDATED_TRIGGER in m._trigger(m.FUNNEL_COLUMNS, embedding=True)

    def test_the_truncate_trigger_is_migration_0009s(self):
        installed = migration("0009_funnel_cache_truncate").TRIGGER

        assert funnel_cache.TRUNCATED_TRIGGER in installed

    def test_the_truncate_function_is_migration_0015s(self):
        assert funnel_cache.TRUNCATED_FUNCTION in migration("0015_funnel_cache_changes").CHANGES

    def test_the_functions_that_count_and_log_changes_are_migration_0016s(self):
        installed = migration("0016_funnel_cache_versions").FUNCTIONS

        assert funnel_cache.DELETED_FUNCTION in installed
        assert funnel_cache.UPDATED_FUNCTION in installed


class PreparedStatementRegistryTests:
    def test_the_hot_paths_statements_are_declared(self):
        names = {statement.name for statement in prepared_statements()}

        assert {"policies.context", "recall.read", "recall.read_and_fill"} <= names

    def test_a_name_cannot_be_declared_again_with_other_sql(self):
        with pytest.raises(ValueError, match="recall.read"):
            prepared_statement("recall.read", "SELECT 1")

        assert prepared_statement("recall.read", read.RECALL_READ.sql) is read.RECALL_READ


@pytest.mark.django_db
class ReadsThatDoNotWriteTests:
    @pytest.fixture(autouse=True)
    def cached_from_one_row(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(read, "FUNNEL_CACHE_MIN", 1)

    @pytest.fixture
    def ada(self, workspace_a: Any) -> list[MemoryRecord]:
        return factories.memories(
            workspace_a,
            {"content": "ship the release on fridays"},
            {"content": "prefers short summaries", "memory_type": "preference"},
            {"content": "old suppressed note", "lifecycle_status": "suppressed"},
        )

    def candidates(self, workload: Any, *, fill: bool) -> read.RecallCandidates:
        policy = effective_policy_for(workload=workload, environment="prod").policy
        return read.recall_read(
            fill_cache=fill,
            workspace_id=workload.workspace_id, workload_id=workload.id, environment="prod",
            actor_id="user:ada", policy=policy, query_vector=embedder().embed([QUERY])[0],
            limit=30, rejected_limit=read.REJECTED_KEEP, now=timezone.now(),
        )  # fmt: skip

    def test_the_read_writes_no_funnel_and_answers_as_the_read_that_fills(self, workload_a, ada):
        plain = self.candidates(workload_a, fill=False)

        assert not FunnelCache.objects.exists()
        filled = self.candidates(workload_a, fill=True)
        assert FunnelCache.objects.count() == 1
        assert (plain.funnel, plain.rows, plain.rejections, plain.path) == (
            filled.funnel, filled.rows, filled.rejections, filled.path,
        )  # fmt: skip

    def test_the_read_uses_a_funnel_the_fill_stored(self, workload_a, ada):
        self.candidates(workload_a, fill=True)

        assert self.candidates(workload_a, fill=False).funnel_cached

    def test_the_sandbox_preview_fills_no_funnel(self, workload_a, ada):
        recall_preview(
            workspace=workload_a.workspace, workload=workload_a, environment="prod",
            actor_id="user:ada", query=QUERY, top_k=5, override=None,
        )  # fmt: skip

        assert not FunnelCache.objects.exists()


def _policy() -> dict[str, Any]:
    return {
        "memoryTypeAllowed": ["fact", "decision"],
        "sourceKindAllowed": ["user"],
        "confirmationStatusAllowed": ["user_confirmed"],
        "confidenceMin": 0.5,
        "sensitivityCeiling": "internal",
        "consentPolicyAllowed": ["explicit"],
        "maxAgeSeconds": 3600,
        "similarityMin": None,
    }
