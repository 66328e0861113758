"""The cached recall funnel of large actors (``recall.models.FunnelCache``).

The cache is only worth having if it can never change an answer, so every test compares a
read served from the cache with a fresh scan of the same rows at the same instant, after each
way the rows or the clock can move: imports, edits, suppress / restore, deletes, writes that
bypass the application, expiry and ageing past ``maxAgeSeconds``. ``FUNNEL_CACHE_MIN`` is
lowered so a handful of memories stands in for the thousands a real large actor has.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from policies.models import Workload
from policies.selectors import effective_policy_for
from policies.services import workload_create, workload_policy_save
from portal.db.cursors import PreparedStatement, prepared_cursor
from recall.engine import funnel_cache
from recall.engine import read as selectors
from recall.hits import hits_fold
from recall.models import Actor, FunnelCache, MemoryChange, MemoryRecord
from recall.runtime import embedder
from tests.helpers import database_owner, owner_execute
from tests.recall import factories

QUERY = "release summary preferences"
ADA = "user:ada"


@pytest.fixture
def cached_from_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selectors, "FUNNEL_CACHE_MIN", 1)
    # every read that merged a row stores the entry again (the test below lets them gather)
    monkeypatch.setattr(selectors, "FUNNEL_REFILL_MIN", 1)


@pytest.fixture
def hnsw_index_rebuilt(db: None) -> None:
    """The HNSW index rebuilt, inside the test's transaction, from the rows it can see.

    Left as the suite leaves it, the index holds an entry for every row that earlier tests
    wrote and rolled back, many with these tests' very contents (so their vectors), until
    autovacuum gets to it. How far a scan must go, and where it ends, then depends on the
    rest of the run: late in one CI run the scan ended, unbounded and all, before reaching
    these rows, and each read took its exact fallback. Rebuilt, the index holds only what the
    test wrote, and a read that should take the hnsw path takes it.
    """
    factories.hnsw_index_rebuilt()


STRICT = {
    "memoryTypeAllowed": ["fact", "decision"],
    "sensitivityCeiling": "internal",
    "confidenceMin": 0.5,
}


@pytest.fixture
def strict(workload_a: Workload) -> Workload:
    """Facts and decisions only, nothing above internal, no inferred or observed memory below
    confidence 0.5: three ways for a row to fail."""
    workload_policy_save(
        workload=workload_a, environment="prod", document=STRICT, author="system:test"
    )
    return workload_a


@pytest.fixture
def ada_rows(workspace_a: Any) -> list[MemoryRecord]:
    return factories.memories(
        workspace_a,
        {"content": "ship the release on fridays"},
        {"content": "release notes go to the wiki", "memory_type": "decision"},
        {"content": "prefers short summaries", "memory_type": "preference"},
        {"content": "salary details", "sensitivity": "confidential"},
        {"content": "summary format is bullet points"},
        {"content": "old suppressed note", "lifecycle_status": "suppressed"},
    )


def read(
    workload: Workload, *, now: datetime | None = None, cache: bool = True
) -> selectors.RecallCandidates:
    """What recall reads for ada, from the cache when ``cache`` (and it is current)."""
    policy = effective_policy_for(workload=workload, environment="prod").policy
    saved = selectors.FUNNEL_CACHE_MIN
    if not cache:
        selectors.FUNNEL_CACHE_MIN = 10**12
    try:
        return selectors.recall_read(
            fill_cache=True,
            workspace_id=workload.workspace_id,
            workload_id=workload.id,
            environment="prod",
            actor_id=ADA,
            policy=policy,
            query_vector=embedder().embed([QUERY])[0],
            limit=30,
            rejected_limit=selectors.REJECTED_KEEP,
            now=now or timezone.now(),
        )
    finally:
        selectors.FUNNEL_CACHE_MIN = saved


def answer(found: selectors.RecallCandidates) -> tuple[Any, ...]:
    return (found.funnel, [row.id for row in found.rows], found.rejections, found.path)


def fresh_scan(workload: Workload, now: datetime | None = None) -> selectors.RecallCandidates:
    """A scan that neither reads nor writes the cache (the cache rows are moved aside)."""
    with connection.cursor() as cursor:
        cursor.execute("SAVEPOINT fresh_scan")
        cursor.execute("DELETE FROM recall_funnelcache")
        found = read(workload, now=now, cache=False)
        cursor.execute("ROLLBACK TO SAVEPOINT fresh_scan")
    return found


def assert_cached_equals_fresh(workload: Workload, now: datetime | None = None) -> Any:
    """Fill (or reuse) the cache, then read from it, and compare both with a fresh scan."""
    now = now or timezone.now()
    read(workload, now=now)
    cached = read(workload, now=now)
    assert cached.funnel_cached
    assert answer(cached) == answer(fresh_scan(workload, now))
    return cached


def _subplan(plan: dict[str, Any], name: str) -> dict[str, Any]:
    """The node of an ``EXPLAIN (FORMAT JSON)`` plan that computes the CTE or InitPlan
    ``name``."""
    for child in plan.get("Plans", []):
        if child.get("Subplan Name") == name:
            return child
        found = _subplan(child, name)
        if found:
            return found
    return {}


def ada() -> Actor:
    return Actor.objects.get(kind="user", name="ada")


@pytest.mark.usefixtures("cached_from_one_row")
class FunnelCacheTests:
    def test_the_second_read_comes_from_the_cache_with_the_same_answer(self, strict, ada_rows):
        first = read(strict)
        second = read(strict)

        assert not first.funnel_cached and second.funnel_cached
        assert answer(first) == answer(second)
        assert first.funnel.candidates == 6
        assert first.funnel.after_policy == 3
        assert first.funnel.reasons == {
            "memory_type_not_allowed": 1,
            "sensitivity_above_ceiling": 1,
        }
        entry = FunnelCache.objects.get(actor=ada())
        assert entry.memory_version == ada().memory_version
        assert sorted(entry.eligible) == sorted(
            m.pk for m in ada_rows if m.content in {
                "ship the release on fridays", "release notes go to the wiki",
                "summary format is bullet points",
            }
        )  # fmt: skip

    def test_small_actors_are_not_cached(self, monkeypatch, strict, ada_rows):
        monkeypatch.setattr(selectors, "FUNNEL_CACHE_MIN", 7)

        assert not read(strict).funnel_cached
        assert not read(strict).funnel_cached
        assert not FunnelCache.objects.exists()

    def test_an_actor_found_small_is_read_without_the_fill_until_it_grows(
        self, monkeypatch, strict, ada_rows
    ):
        monkeypatch.setattr(selectors, "FUNNEL_CACHE_MIN", 7)  # ada has six memories
        read(strict)
        assert selectors._FUNNEL_SIZES[(strict.workspace_id, ADA)] == 6
        factories.memories(strict.workspace, {"content": "the seventh"})

        read(strict)  # read without the fill (it was small), and found large now
        assert not FunnelCache.objects.exists()
        read(strict)  # so this one stores the funnel
        assert FunnelCache.objects.filter(actor=ada()).exists()
        assert read(strict).funnel_cached

    def test_each_policy_filter_has_its_own_entry(self, strict, ada_rows):
        other = workload_create(workspace=strict.workspace, name="open", author="system:test")
        read(strict)
        read(other)

        assert FunnelCache.objects.filter(actor=ada()).count() == 2
        assert answer(read(strict)) == answer(fresh_scan(strict))
        assert answer(read(other)) == answer(fresh_scan(other))
        assert read(strict).funnel.after_policy != read(other).funnel.after_policy

    def test_a_funnel_stored_under_other_rules_is_never_read(self, monkeypatch, strict, ada_rows):
        read(strict)
        # A release that changes the filter (as confidenceMin's did) finds the funnels the
        # rules before it stored, keyed by the same policy values.
        changed = funnel_cache._DECISION.replace("'passes_policy'", "'passes_every_rule'")
        monkeypatch.setattr(funnel_cache, "_DECISION", changed)

        assert not read(strict).funnel_cached
        assert FunnelCache.objects.filter(actor=ada()).count() == 2

    def test_an_actor_keeps_only_its_most_recent_funnels(self, strict, ada_rows):
        policy = effective_policy_for(workload=strict, environment="prod").policy
        for n in range(selectors.FUNNEL_CACHE_PER_ACTOR + 3):
            selectors.recall_read(fill_cache=True, 
                workspace_id=strict.workspace_id, workload_id=strict.id, environment="prod",
                actor_id=ADA, policy={**policy, "confidenceMin": n / 100},
                query_vector=embedder().embed([QUERY])[0], limit=30, rejected_limit=0,
                now=timezone.now(),
            )  # fmt: skip

        kept = FunnelCache.objects.filter(actor=ada())
        assert kept.count() == selectors.FUNNEL_CACHE_PER_ACTOR
        assert answer(read(strict)) == answer(fresh_scan(strict))

    def test_recall_itself_leaves_the_cache_current(self, editor, strict, ada_rows):
        """Recording hits updates memory rows, but never a column the funnel reads."""
        read(strict)
        counters = (ada().memory_version, ada().memory_changes)
        response = editor.api().post(
            f"/v1/memory/actors/{ADA}/recall",
            {"workloadId": str(strict.id), "environment": "prod", "query": QUERY, "topK": 5},
            format="json",
        )
        assert response.status_code == 200, response.content
        hits_fold(workspace_id=editor.workspace.pk)  # the recall's hits counted into the rows
        assert MemoryRecord.objects.filter(hit_count__gt=0).exists()

        assert (ada().memory_version, ada().memory_changes) == counters
        assert read(strict).funnel_cached

    @pytest.mark.parametrize(
        "change",
        [
            "import",
            "edit a label",
            "edit only the content",
            "suppress",
            "restore",
            "delete",
            "write around the application",
            "move a memory to another actor",
            "truncate the table",
        ],
    )
    def test_every_change_to_the_rows_is_seen(self, editor, strict, ada_rows, change):
        read(strict)
        before, version_before = ada().memory_changes, ada().memory_version
        target = next(m for m in ada_rows if m.content == "ship the release on fridays")
        suppressed = next(m for m in ada_rows if m.lifecycle_status == "suppressed")
        client = editor.api()
        url = f"/v1/memory/memories/{target.pk}"
        if change == "import":
            response = client.post(
                f"/v1/memory/actors/{ADA}/memories",
                {
                    "content": "a new fact",
                    "memoryType": "fact",
                    "sourceKind": "user",
                    "confirmationStatus": "user_confirmed",
                    "confidence": 0.9,
                    "sensitivity": "internal",
                    "consentPolicy": "explicit",
                },
                format="json",
            )
        elif change == "edit a label":
            response = client.patch(url, {"sensitivity": "restricted"}, format="json")
        elif change == "edit only the content":
            response = client.patch(url, {"content": "ship on thursdays"}, format="json")
        elif change == "suppress":
            response = client.post(f"{url}/suppress")
        elif change == "restore":
            response = client.post(f"/v1/memory/memories/{suppressed.pk}/restore")
        elif change == "delete":
            response = client.delete(url)
        elif change == "write around the application":
            MemoryRecord.objects.filter(pk=target.pk).update(memory_type="preference")
            response = None
        elif change == "truncate the table":
            with database_owner(), connection.cursor() as cursor:
                # TRUNCATE refuses to run while deferred foreign-key checks are pending.
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                cursor.execute("TRUNCATE recall_memoryrecord CASCADE")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            factories.memories(strict.workspace, {"content": "the only one left"})
            response = None
        else:
            bob = factories.actor(strict.workspace, "user:bob")
            MemoryRecord.objects.filter(pk=target.pk).update(actor=bob)
            response = None
        if response is not None:
            assert response.status_code in (200, 201, 204), response.content

        now = timezone.now()
        first = read(strict, now=now)
        assert answer(first) == answer(fresh_scan(strict, now))
        # The first read after the change already comes from the cached funnel, the change
        # merged in (after a truncate, the cache was emptied with the table).
        assert first.funnel_cached == (change != "truncate the table")
        found = assert_cached_equals_fresh(strict)

        if change == "edit only the content":
            # An edited memory waits for its new embedding, which the funnel filters on: a
            # change, and the re-embedded memory is found with its new text.
            assert ada().memory_changes > before
            assert any(row.content == "ship on thursdays" for row in found.rows)
        elif change in ("import", "truncate the table"):
            # Added rows are counted as inserts, not changes.
            assert ada().memory_changes == before
        else:
            assert ada().memory_changes > before
        # moves with the changes (once per statement), for a process still running the code
        # before migration 0015 (which keys its funnels on it); this code merges them instead
        assert (ada().memory_version > version_before) == (ada().memory_changes > before)
        expected_after_policy = {
            "import": 4,
            "edit a label": 2,
            "edit only the content": 3,
            "suppress": 2,
            "restore": 4,
            "delete": 2,
            "write around the application": 2,
            "move a memory to another actor": 2,
            "truncate the table": 1,
        }[change]
        assert found.funnel.after_policy == expected_after_policy

    def test_an_expiry_ends_the_entry_at_that_moment(self, strict, ada_rows):
        now = timezone.now()
        target = next(m for m in ada_rows if m.content == "ship the release on fridays")
        MemoryRecord.objects.filter(pk=target.pk).update(expires_at=now + timedelta(hours=1))
        assert_cached_equals_fresh(strict, now)
        assert FunnelCache.objects.get(actor=ada()).valid_until == now + timedelta(hours=1)

        before = read(strict, now=now + timedelta(minutes=59))
        after = read(strict, now=now + timedelta(hours=1))

        assert before.funnel_cached and before.funnel.after_policy == 3
        assert not after.funnel_cached
        assert after.funnel.after_policy == 2
        assert after.funnel.lifecycle_excluded == 2
        assert answer(after) == answer(fresh_scan(strict, now + timedelta(hours=1)))

    def test_ageing_past_max_age_ends_the_entry(self, strict, ada_rows):
        workload_policy_save(
            workload=strict,
            environment="prod",
            document={**STRICT, "maxAgeSeconds": 3600},
            author="system:test",
        )
        now = timezone.now()
        target = next(m for m in ada_rows if m.content == "ship the release on fridays")
        MemoryRecord.objects.filter(pk=target.pk).update(created_at=now - timedelta(minutes=50))
        others = MemoryRecord.objects.exclude(pk=target.pk)
        others.update(created_at=now - timedelta(seconds=30))
        assert_cached_equals_fresh(strict, now)

        later = now + timedelta(minutes=11)
        aged = read(strict, now=later)

        assert not aged.funnel_cached
        assert aged.funnel.reasons["older_than_max_age"] == 1
        assert answer(aged) == answer(fresh_scan(strict, later))

    def test_a_fill_from_an_older_snapshot_never_replaces_a_newer_entry(self, strict, ada_rows):
        read(strict)
        entry = FunnelCache.objects.get(actor=ada())
        newer = {
            "memory_version": entry.memory_version + 5,
            "memory_changes": entry.memory_changes + 5,
        }
        FunnelCache.objects.filter(pk=entry.pk).update(**newer)

        # cannot use it (its changes are not in the log): tries to store its own
        found = read(strict)

        assert not found.funnel_cached
        stored = FunnelCache.objects.get(pk=entry.pk)
        assert {k: getattr(stored, k) for k in newer} == newer

    @pytest.mark.usefixtures("hnsw_index_rebuilt")
    def test_an_entry_stored_without_ids_is_not_used_once_changes_could_make_it_exact(
        self, monkeypatch, strict, ada_rows
    ):
        """Stored without ids (more eligible rows than exact search takes), an entry cannot
        serve a read whose eligible rows may have fallen within the exact limit by changes
        since: the funnel is computed again, ids and all."""
        monkeypatch.setattr(selectors, "EXACT_SEARCH_MAX", 2)
        read(strict)  # three eligible rows: stored without ids
        assert FunnelCache.objects.get(actor=ada()).eligible is None
        passing = next(m for m in ada_rows if m.content == "ship the release on fridays")
        MemoryRecord.objects.filter(pk=passing.pk).delete()

        found = read(strict)

        assert not found.funnel_cached
        assert answer(found) == answer(fresh_scan(strict))
        assert found.path == "exact" and len(found.rows) == 2
        assert sorted(FunnelCache.objects.get(actor=ada()).eligible) == sorted(
            row.id for row in found.rows
        )

    def test_an_entry_without_ids_is_not_used_once_the_exact_path_wants_them(
        self, monkeypatch, strict, ada_rows
    ):
        monkeypatch.setattr(selectors, "EXACT_SEARCH_MAX", 2)
        read(strict)  # stored without ids: three eligible rows are above the exact limit
        monkeypatch.setattr(selectors, "EXACT_SEARCH_MAX", 20_000)

        found = read(strict)

        assert not found.funnel_cached and found.path == "exact" and len(found.rows) == 3
        assert answer(found) == answer(fresh_scan(strict))
        assert FunnelCache.objects.get(actor=ada()).eligible is not None

    @pytest.mark.usefixtures("hnsw_index_rebuilt")
    def test_the_hnsw_path_keeps_counts_but_no_ids(self, monkeypatch, strict, ada_rows):
        monkeypatch.setattr(selectors, "EXACT_SEARCH_MAX", 2)
        first = read(strict)
        second = read(strict)

        assert second.funnel_cached and second.path == "hnsw"
        assert answer(first) == answer(second)
        assert FunnelCache.objects.get(actor=ada()).eligible is None

    def test_added_memories_extend_the_cached_funnel(self, editor, strict, ada_rows):
        read(strict)
        entry = FunnelCache.objects.get(actor=ada())
        added = factories.memories(
            strict.workspace,
            {"content": "release checklist lives in the repo"},
            {"content": "a preference", "memory_type": "preference"},
        )

        extended = read(strict)

        assert extended.funnel_cached  # from the cache, plus the two rows added
        assert answer(extended) == answer(fresh_scan(strict))
        assert extended.funnel.candidates == 8
        assert extended.funnel.reasons["memory_type_not_allowed"] == 2
        assert added[0].pk in {row.id for row in extended.rows}
        stored = FunnelCache.objects.get(pk=entry.pk)
        assert stored.max_id == max(m.pk for m in added)
        assert stored.memory_inserts == ada().memory_inserts == entry.memory_inserts + 2
        assert read(strict).funnel_cached  # and the extended entry is stored

    def test_a_row_committed_late_with_a_smaller_id_forces_a_rescan(self, strict, ada_rows):
        """Ids are handed out before commit, so a row can appear below the cached max id; the
        count of inserted rows tells, and the funnel is scanned again."""
        read(strict)
        entry = FunnelCache.objects.get(actor=ada())
        late_id = min(m.pk for m in ada_rows) - 1
        assert not MemoryRecord.objects.filter(pk=late_id).exists()
        columns = [
            f.column for f in MemoryRecord._meta.concrete_fields if f.column != "id"
        ]  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO recall_memoryrecord (id, {', '.join(columns)})"
                f" SELECT %s, {', '.join(columns)} FROM recall_memoryrecord WHERE id = %s",
                [late_id, ada_rows[0].pk],
            )
        assert late_id < entry.max_id

        rescanned = read(strict)

        assert not rescanned.funnel_cached
        assert rescanned.funnel.after_policy == 4
        assert late_id in {row.id for row in rescanned.rows}
        assert answer(rescanned) == answer(fresh_scan(strict))

    def test_changes_are_logged_only_while_a_funnel_can_use_them(self, strict, ada_rows):
        target = ada_rows[0]
        MemoryRecord.objects.filter(pk=target.pk).update(sensitivity="public")
        assert ada().memory_changes == 1
        assert not MemoryChange.objects.exists()  # no funnel cached yet: counted, not logged

        read(strict)
        MemoryRecord.objects.filter(pk=target.pk).update(sensitivity="restricted")
        MemoryRecord.objects.filter(pk=target.pk).update(sensitivity="internal")
        logged = list(MemoryChange.objects.order_by("seq"))
        assert [(c.memory_id, c.seq, c.sensitivity) for c in logged] == [
            (target.pk, 2, "public"),
            (target.pk, 3, "restricted"),
        ]

        merged = read(strict)

        assert merged.funnel_cached
        assert answer(merged) == answer(fresh_scan(strict))
        assert FunnelCache.objects.get(actor=ada()).memory_changes == 3
        assert not MemoryChange.objects.exists()  # no funnel needs them any more

    def test_rows_merged_are_stored_again_once_enough_gathered(self, monkeypatch, strict, ada_rows):
        monkeypatch.setattr(selectors, "FUNNEL_REFILL_MIN", 3)
        read(strict)
        entry = FunnelCache.objects.get(actor=ada())
        factories.memories(strict.workspace, {"content": "one more fact"})
        MemoryRecord.objects.filter(pk=ada_rows[0].pk).update(sensitivity="restricted")

        merged = read(strict)  # two rows to merge: read from the entry, which stays as it was

        assert merged.funnel_cached
        assert answer(merged) == answer(fresh_scan(strict))
        stored = FunnelCache.objects.get(pk=entry.pk)
        assert (stored.max_id, stored.memory_changes) == (entry.max_id, entry.memory_changes)
        assert MemoryChange.objects.count() == 1

        MemoryRecord.objects.filter(pk=ada_rows[1].pk).delete()
        merged = read(strict)  # three: merged, and stored again

        assert merged.funnel_cached
        assert answer(merged) == answer(fresh_scan(strict))
        stored = FunnelCache.objects.get(pk=entry.pk)
        assert stored.memory_changes == ada().memory_changes == 2
        assert stored.max_id > entry.max_id
        assert not MemoryChange.objects.exists()

    def test_rows_added_then_changed_or_deleted_before_a_refill_are_merged(
        self, monkeypatch, strict, ada_rows
    ):
        """Rows inserted since the entry and then deleted, edited or moved away (the inserts
        counter saw them, the range above ``max_id`` no longer holds them all) are told apart
        by the log from a row committed late with a smaller id: merged, not scanned again."""
        monkeypatch.setattr(selectors, "FUNNEL_REFILL_MIN", 100)
        read(strict)
        added = factories.memories(strict.workspace, *({"content": f"added {n}"} for n in range(4)))
        bob = factories.actor(strict.workspace, "user:bob")
        MemoryRecord.objects.filter(pk=added[0].pk).delete()
        MemoryRecord.objects.filter(pk=added[1].pk).update(sensitivity="restricted")
        MemoryRecord.objects.filter(pk=added[2].pk).update(actor=bob)
        moved_in = factories.memories(strict.workspace, {"content": "bob's"}, actor_id="user:bob")
        MemoryRecord.objects.filter(pk=moved_in[0].pk).update(actor=ada())

        merged = read(strict)

        assert merged.funnel_cached
        assert answer(merged) == answer(fresh_scan(strict))
        assert merged.funnel.candidates == 6 + 2 + 1

    def test_a_delete_logs_every_row_it_removes(self, strict, ada_rows):
        read(strict)
        MemoryRecord.objects.filter(pk__in=[m.pk for m in ada_rows[:3]]).delete()

        assert sorted(MemoryChange.objects.values_list("memory_id", flat=True)) == sorted(
            m.pk for m in ada_rows[:3]
        )
        assert ada().memory_changes == 3
        merged = read(strict)
        assert merged.funnel_cached and merged.funnel.candidates == 3
        assert answer(merged) == answer(fresh_scan(strict))

    def test_a_funnel_too_many_changes_behind_is_computed_again(self, strict, ada_rows):
        read(strict)
        with connection.cursor() as cursor:  # as if thousands of rows had changed since
            cursor.execute(
                "UPDATE recall_actor SET memory_changes = memory_changes + %s WHERE id = %s",
                [funnel_cache.CHANGES_MAX + 1, ada().pk],
            )
        MemoryRecord.objects.filter(pk=ada_rows[0].pk).update(sensitivity="public")
        assert not MemoryChange.objects.exists()  # no funnel is near enough to use it

        rescanned = read(strict)

        assert not rescanned.funnel_cached
        assert answer(rescanned) == answer(fresh_scan(strict))
        assert read(strict).funnel_cached  # and stored again, current

    def test_the_rows_to_merge_are_read_by_id_whatever_the_planner_makes_of_a_join(
        self, monkeypatch, strict, ada_rows
    ):
        """The rows changed since the cached funnel are read by their ids, never by reading
        every row of the actor: a generic plan of the benchmark's, after an ANALYZE, hashed
        all 100,000 rows of its large actor to find eight (24 ms of a 5 ms read). With nested
        loops off, a join of the changed ids to the memory table can only be answered that
        way. The actor has many rows, and the planner knows it (an ANALYZE), so reading them
        all by the actor's index is never the cheaper plan by accident of a small table."""
        factories.memories(strict.workspace, *({"content": f"note {i}"} for i in range(2000)))
        owner_execute("ANALYZE recall_memoryrecord")
        read(strict)
        MemoryRecord.objects.filter(pk=ada_rows[0].pk).update(sensitivity="public")
        executed: list[tuple[str, tuple[Any, ...]]] = []
        original = PreparedStatement._args

        def recorded(statement: PreparedStatement, params: Any) -> tuple[Any, ...]:
            args = original(statement, params)
            executed.append((statement.native, args))
            return args

        monkeypatch.setattr(PreparedStatement, "_args", recorded)
        assert read(strict).funnel_cached
        sql, args = executed[-1]

        with transaction.atomic(), prepared_cursor(native=True) as cursor:
            cursor.execute("SET LOCAL enable_nestloop = off")
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", args)
            explained = cursor.fetchone()[0]
        plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]

        # the changed rows, and the rows that waited for their embedding
        for name in ("CTE revised", "CTE rechecked"):
            node = _subplan(plan, name)
            if node["Node Type"] == "Bitmap Heap Scan":  # the ids' bitmap, then their pages
                # Its outer child is the bitmap; an InitPlan (the ids' CTE) may come first.
                [node] = [c for c in node["Plans"] if c["Parent Relationship"] == "Outer"]
                assert node["Node Type"] == "Bitmap Index Scan", (name, node)
            else:
                assert node["Node Type"] in {"Index Scan", "Index Only Scan"}, (name, node)
            assert "= ANY" in node["Index Cond"], (name, node)  # by the ids, not the actor alone

    def test_a_truncated_rejected_list_that_loses_a_row_is_computed_again(self, strict):
        """The entry keeps the first ``REJECTED_KEEP`` rejected ids: when a row it lists
        passes now, the next rejected row is not known, so the funnel is scanned again; a
        change past the list is merged."""
        keep = selectors.REJECTED_KEEP
        rows = factories.memories(
            strict.workspace,
            {"content": "a fact that passes"},
            *({"content": f"preference {n}", "memory_type": "preference"} for n in range(keep + 5)),
        )
        rejected = rows[1:]
        read(strict)
        MemoryRecord.objects.filter(pk=rejected[-1].pk).update(memory_type="fact")
        merged = read(strict)
        assert merged.funnel_cached
        assert answer(merged) == answer(fresh_scan(strict))

        MemoryRecord.objects.filter(pk=rejected[0].pk).update(memory_type="fact")
        rescanned = read(strict)

        assert not rescanned.funnel_cached
        assert answer(rescanned) == answer(fresh_scan(strict))
        assert rejected[keep].pk in {i for i, _ in rescanned.rejections}

    def test_the_log_goes_with_its_actor(self, strict, ada_rows):
        read(strict)
        MemoryRecord.objects.filter(pk=ada_rows[0].pk).update(sensitivity="public")
        assert MemoryChange.objects.exists()

        ada().delete()

        assert not MemoryChange.objects.exists()

    @pytest.mark.usefixtures("hnsw_index_rebuilt")
    @pytest.mark.parametrize("seed", [1, 2, 3])
    @pytest.mark.parametrize("refill", [1, 6], ids=["stored-each-read", "merged-until-six"])
    @pytest.mark.parametrize("exact_max", [20_000, 3], ids=["exact", "hnsw-above-three"])
    def test_a_random_run_of_changes_never_makes_the_cache_disagree(
        self, monkeypatch, strict, seed, refill, exact_max
    ):
        """Forty random steps (adds, label edits, suppressions, deletes, time passing),
        each followed by a recall read compared with a fresh scan at the same instant; the
        entry stored again after every read that merged rows, or only once six gathered; with
        the exact path, or the HNSW path (entries without ids) above three eligible rows."""
        monkeypatch.setattr(selectors, "FUNNEL_REFILL_MIN", refill)
        # above three eligible rows: ranked by the HNSW index, stored without ids
        monkeypatch.setattr(selectors, "EXACT_SEARCH_MAX", exact_max)
        rng = random.Random(seed)
        labels = {
            "memory_type": ["fact", "decision", "preference"],
            "sensitivity": ["public", "internal", "confidential"],
            "lifecycle_status": ["active", "active", "suppressed"],
            # the confidence minimum holds inferred and observed memories only
            "confirmation_status": ["user_confirmed", "inferred", "observed"],
            "confidence": [0.3, 0.9],
        }
        now = timezone.now()
        # the HNSW variant starts above three eligible rows, so that it ranks by the index
        seeds = 4 if exact_max == 3 else 1
        factories.memories(strict.workspace, *({"content": f"seed row {n}"} for n in range(seeds)))
        paths: set[str] = set()
        used_cache = False
        for step in range(40):
            action = rng.choice(["add", "add", "edit", "edit", "delete", "move", "time"])
            rows = list(MemoryRecord.objects.filter(actor__name="ada"))
            if action == "add" or not rows:
                factories.memories(
                    strict.workspace,
                    *(
                        {
                            "content": f"step {step} row {n}",
                            **{k: rng.choice(v) for k, v in labels.items()},
                            "expires_at": rng.choice(
                                [None, now + timedelta(minutes=rng.randint(1, 120))]
                            ),
                        }
                        for n in range(rng.randint(1, 3))
                    ),
                )
            elif action == "edit":
                field = rng.choice(list(labels))
                picked = [rng.choice(rows).pk for _ in range(rng.randint(1, 3))]
                MemoryRecord.objects.filter(pk__in=picked).update(
                    **{field: rng.choice(labels[field])}
                )
            elif action == "move":
                # to another actor and, as often, back from it
                other = factories.actor(strict.workspace, "user:bob")
                MemoryRecord.objects.filter(pk=rng.choice(rows).pk).update(actor=other)
                back = MemoryRecord.objects.filter(actor=other).first()
                if back is not None and rng.random() < 0.5:
                    MemoryRecord.objects.filter(pk=back.pk).update(actor=ada())
            elif action == "delete":
                MemoryRecord.objects.filter(pk=rng.choice(rows).pk).delete()
            else:
                now += timedelta(minutes=rng.randint(1, 40))
            fresh = answer(fresh_scan(strict, now))
            first = read(strict, now=now)  # the cache with the step merged in, stored again
            cached = read(strict, now=now)
            assert answer(first) == fresh, (seed, step, action)
            assert answer(cached) == fresh, (seed, step, action)
            paths.add(first.path)
            used_cache = used_cache or cached.funnel_cached
        # each variant ran the path it names, and the cache was used, not only filled
        assert ("hnsw" in paths) == (exact_max == 3), paths
        assert used_cache
