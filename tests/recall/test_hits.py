"""A recall's hits (recall/hits.py): recorded by its audit event, never by rewriting the
memories it carried, and seen by every reader as if each recall had counted its own.

The memory API and pages and the recall read add the hits not counted yet; the fold counts
them into the rows (beat, and the maintenance sweeps first); concurrent recalls and folds
count every hit exactly once; a fold waits for appends in flight.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from audit.models import AuditEvent, EventType, Injection
from audit.services import ChainTip, _append, _locked_tip, audit_event_append
from maintenance.services import maintenance_start
from recall import tasks
from recall.hits import RANKED_HITS_SQL, hits_fold, hits_fold_due, with_hits
from recall.models import HitFold, MemoryRecord
from tests import helpers
from tests.helpers import release_once_blocked, run_in_threads
from tests.recall import factories
from tests.worker_support import sending_to

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hits_fold_unasked")]


def recall(persona: Any, workload: Any, top_k: int = 3) -> dict[str, Any]:
    """``tests.helpers.recall`` of the top 3 (or ``top_k``)."""
    return helpers.recall(persona, workload, topK=top_k)


def carried(envelope: dict[str, Any]) -> list[int]:
    return [int(entry["id"]) for entry in envelope["entries"]]


def ranked_hits(memory_id: int) -> int:
    """The hit count the recall read ranks the memory with."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {RANKED_HITS_SQL} FROM recall_memoryrecord m WHERE m.id = %s", [memory_id]
        )
        return int(cursor.fetchone()[0])


def counted() -> dict[int, int]:
    """The hit counts in the rows (counted by a fold), of the memories with any."""
    return dict(MemoryRecord.objects.filter(hit_count__gt=0).values_list("pk", "hit_count"))


def row_version(memory_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM recall_memoryrecord WHERE id = %s", [memory_id])
        return str(cursor.fetchone()[0])


@pytest.fixture
def rows(editor: Any) -> list[MemoryRecord]:
    return factories.memories(
        editor.workspace, *({"content": f"release summary preferences {n}"} for n in range(4))
    )


class RecordedNotRewrittenTests:
    def test_a_recall_leaves_the_memories_it_carried_as_they_were(self, editor, workload_a, rows):
        versions = {row.pk: row_version(row.pk) for row in rows}

        envelope = recall(editor, workload_a)

        assert carried(envelope)
        assert {row.pk: row_version(row.pk) for row in rows} == versions
        assert not MemoryRecord.objects.filter(hit_count__gt=0).exists()
        # its hits are its event's injections
        event = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("id")
        assert sorted(
            Injection.objects.filter(event_id=event.pk, truncated=False).values_list(
                "memory_id", flat=True
            )
        ) == sorted(carried(envelope))

    def test_the_api_shows_the_hits_before_they_are_counted_into_the_rows(
        self, editor, workload_a, rows
    ):
        first = carried(recall(editor, workload_a))
        second = carried(recall(editor, workload_a))
        memory = first[0]
        assert memory in second  # the same query: carried by both
        expected = 2
        latest = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("id").occurred_at

        detail = editor.api().get(f"/v1/memory/memories/{memory}").json()
        listed = {
            int(m["id"]): m
            for m in editor.api().get("/v1/memory/actors/user:ada/memories").json()["results"]
        }

        assert detail["hitCount"] == listed[memory]["hitCount"] == expected
        assert (
            detail["lastAccessedAt"]
            == listed[memory]["lastAccessedAt"]
            == (latest.isoformat().replace("+00:00", "Z"))
        )
        assert MemoryRecord.objects.get(pk=memory).hit_count == 0  # not counted yet

        hits_fold(workspace_id=editor.workspace.pk)

        row = MemoryRecord.objects.get(pk=memory)
        assert (row.hit_count, row.last_accessed_at) == (expected, latest)
        assert editor.api().get(f"/v1/memory/memories/{memory}").json() == detail

    def test_the_memory_page_shows_them_too(self, editor, workload_a, rows):
        from tests.helpers import csrf_session

        memory = carried(recall(editor, workload_a))[0]
        recall(editor, workload_a)
        client = csrf_session(editor)

        html = client.get(f"/w/{editor.workspace.slug}/memories/{memory}/").content.decode()

        assert 'Recalled</dt><dd id="memory-hits">2 times, last' in html

    def test_the_recall_read_ranks_with_every_earlier_recall(self, editor, workload_a, rows):
        memory = carried(recall(editor, workload_a))[0]
        recall(editor, workload_a)
        before = ranked_hits(memory)

        hits_fold(workspace_id=editor.workspace.pk)

        assert before == ranked_hits(memory) == MemoryRecord.objects.get(pk=memory).hit_count == 2

    def test_with_hits_adds_nothing_once_counted(self, editor, workload_a, rows):
        recall(editor, workload_a)
        hits_fold(workspace_id=editor.workspace.pk)

        annotated = with_hits(MemoryRecord.objects.filter(workspace=editor.workspace))

        assert all(row.hits_pending == 0 and row.accessed_pending is None for row in annotated)
        assert {row.pk: row.hits for row in annotated} == dict(
            MemoryRecord.objects.values_list("pk", "hit_count")
        )


class FoldTests:
    def test_a_fold_counts_each_hit_once_and_moves_the_mark(self, editor, workload_a, rows):
        envelopes = [recall(editor, workload_a) for _ in range(3)]

        changed = hits_fold(workspace_id=editor.workspace.pk)

        expected: dict[int, int] = {}
        for envelope in envelopes:
            for pk in carried(envelope):
                expected[pk] = expected.get(pk, 0) + 1
        assert changed == len(expected)
        assert counted() == expected
        last = AuditEvent.objects.filter(workspace=editor.workspace).latest("id").pk
        assert HitFold.objects.get(workspace=editor.workspace).event_id == last
        assert hits_fold(workspace_id=editor.workspace.pk) == 0  # nothing left
        assert counted() == expected

    def test_the_beat_task_folds_every_workspace_with_recalls_since_its_mark(
        self, editor, workload_a, rows, outsider, workload_b
    ):
        factories.memories(outsider.workspace, {"content": "release summary preferences b"})
        recall(editor, workload_a)
        recall(outsider, workload_b)

        assert tasks.fold_hits() == 3 + 1  # a's top 3 of its 4 rows, and b's one row

        def mark(workspace: Any) -> int:
            return HitFold.objects.get(workspace=workspace).event_id

        def latest(workspace: Any) -> int:
            return AuditEvent.objects.filter(workspace=workspace).latest("id").pk

        assert mark(editor.workspace) == latest(editor.workspace)
        assert mark(outsider.workspace) == latest(outsider.workspace)
        b_mark = mark(outsider.workspace)

        recall(editor, workload_a)  # only workspace a has a recall to count now
        assert tasks.fold_hits() == 3
        assert mark(editor.workspace) == latest(editor.workspace)
        assert mark(outsider.workspace) == b_mark
        assert tasks.fold_hits() == 0

    def test_a_maintenance_run_counts_the_recalls_hits_first(self, operator, workload_a, rows):
        envelope = recall(operator, workload_a)
        assert counted() == {}

        maintenance_start(
            workspace=operator.workspace, sweep="promotion", mode="preview", author="t"
        )

        assert counted() == {pk: 1 for pk in carried(envelope)}

    def test_hits_older_than_the_mark_are_not_counted_again(self, editor, workload_a, rows):
        """As after the migration: the events before it were counted by their recalls."""
        recall(editor, workload_a)
        last = AuditEvent.objects.filter(workspace=editor.workspace).latest("id").pk
        HitFold.objects.update_or_create(workspace=editor.workspace, defaults={"event_id": last})

        assert hits_fold(workspace_id=editor.workspace.pk) == 0
        assert not MemoryRecord.objects.filter(hit_count__gt=0).exists()
        assert ranked_hits(rows[0].pk) == 0


@pytest.mark.django_db(transaction=True)
class ConcurrentFoldTests:
    def test_recalls_and_folds_at_once_count_every_hit_exactly_once(self, editor, workload_a, rows):
        """A stress test of the whole: recalls on three threads while a fourth folds without
        pause. That a fold never skips an event still in flight is the next test's."""
        stop = threading.Event()
        fold_errors: list[BaseException] = []

        def folds() -> None:
            try:
                while not stop.is_set():
                    hits_fold(workspace_id=editor.workspace.pk)
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                fold_errors.append(exc)
            finally:
                connection.close()

        def recalls(n: int) -> None:
            for _ in range(12):
                recall(editor, workload_a, top_k=2)

        folder = threading.Thread(target=folds, daemon=True)
        folder.start()
        try:
            outcomes = run_in_threads(recalls, 3)
        finally:
            stop.set()
            folder.join(60)
        hits_fold(workspace_id=editor.workspace.pk)

        assert outcomes == [None] * 3
        assert not folder.is_alive() and fold_errors == []
        expected: dict[int, int] = {}
        for memory_id in Injection.objects.filter(
            workspace_id=editor.workspace.pk, truncated=False
        ).values_list("memory_id", flat=True):
            expected[memory_id] = expected.get(memory_id, 0) + 1
        assert sum(expected.values()) == 3 * 12 * 2
        assert counted() == expected

    def test_the_fold_waits_for_an_append_in_flight(self, editor, rows):
        """An append holds its lane's head until it commits; the fold settles the trail (every
        head held for an instant) before it reads how far it may count, so an event still
        being appended, with a greater id than one already committed, is counted, not
        skipped."""
        workspace = editor.workspace
        # committed first, on the lane the slow append then takes (its head exists already)
        audit_event_append(
            workspace=workspace, tip=ChainTip.of(None, 1), type=EventType.ASSEMBLED,
            author="token:done", payload={"memoryIds": [str(rows[1].pk)]},
        )  # fmt: skip
        appended, release = threading.Event(), threading.Event()
        in_flight: list[int] = []
        failures: list[BaseException] = []

        def slow_append() -> None:
            try:
                with transaction.atomic():
                    event = _append(
                        _locked_tip(workspace, 1), workspace=workspace,
                        type=EventType.ASSEMBLED, author="token:slow",
                        payload={"memoryIds": [str(rows[0].pk)]},
                        workload_id=None, environment="", actor_id="", work=(),
                    )  # fmt: skip
                    in_flight.append(event.pk)
                    appended.set()
                    release.wait(30)
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                failures.append(exc)
            finally:
                connection.close()

        appender = threading.Thread(target=slow_append)
        appender.start()
        assert appended.wait(10), failures
        releaser = release_once_blocked(release, failures)

        changed = hits_fold(workspace_id=workspace.pk)

        appender.join(30)
        releaser.join(30)
        assert not appender.is_alive() and not releaser.is_alive()
        assert failures == []  # the fold did wait for the append's lock
        assert changed == 2
        assert counted() == {rows[0].pk: 1, rows[1].pk: 1}
        assert HitFold.objects.get(workspace=workspace).event_id == in_flight[0]


def test_hits_count_against_the_clock_of_their_events(editor, workload_a, rows):
    start = timezone.now()
    memory = carried(recall(editor, workload_a))[0]
    event = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("id")

    hits_fold(workspace_id=editor.workspace.pk)

    accessed = MemoryRecord.objects.get(pk=memory).last_accessed_at
    assert start <= accessed == event.occurred_at <= timezone.now()


class FoldWithoutABrokerTests:
    """Without a broker nothing schedules the fold: the recall endpoint folds its workspace
    itself, at most every RECALL_HITS_FOLD_SECONDS per process."""

    def test_a_recall_folds_its_workspace_once_the_interval_has_passed(
        self, editor, workload_a, rows, settings
    ):
        settings.RECALL_HITS_FOLD_SECONDS = 0

        memory = carried(recall(editor, workload_a))[0]

        assert MemoryRecord.objects.get(pk=memory).hit_count == 1

    def test_a_workspaces_first_recall_only_starts_the_clock(self, editor, workload_a, rows):
        recall(editor, workload_a)
        recall(editor, workload_a)

        assert not MemoryRecord.objects.filter(hit_count__gt=0).exists()

    def test_a_workspace_is_folded_after_so_many_of_its_recalls(
        self, editor, workload_a, rows, settings
    ):
        # Each read counts the hits since the fold one by one: a hot actor's must not wait
        # for the clock.
        settings.RECALL_HITS_FOLD_RECALLS = 3
        memory = carried(recall(editor, workload_a))[0]
        recall(editor, workload_a)
        assert counted() == {}

        recall(editor, workload_a)

        assert counted()[memory] == 3
        assert ranked_hits(memory) == 3
        recall(editor, workload_a)
        recall(editor, workload_a)
        assert counted()[memory] == 3  # the count starts again after a fold
        recall(editor, workload_a)
        assert counted()[memory] == 6

    @pytest.mark.django_db(transaction=True)
    def test_a_fold_that_fails_in_the_request_is_logged_and_the_recall_answered(
        self, editor, workload_a, rows, settings, caplog
    ):
        # The recall's event is committed before the fold: an error escaping from the fold
        # would answer 503 for a recall that was recorded, and a client's retry would record
        # it twice. Here the fold waits too long for the mark's row, locked elsewhere.
        settings.RECALL_HITS_FOLD_RECALLS = 2
        memory = carried(recall(editor, workload_a))[0]
        HitFold.objects.get_or_create(workspace=editor.workspace)
        locked, release = threading.Event(), threading.Event()

        def hold_the_mark(_: int) -> None:
            with transaction.atomic():
                HitFold.objects.select_for_update().get(workspace=editor.workspace)
                locked.set()
                release.wait(30)

        holder = threading.Thread(target=helpers.run_in_threads, args=(hold_the_mark, 1))
        holder.start()
        assert locked.wait(30)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '200ms'")
            with caplog.at_level("WARNING"):
                assert memory in carried(recall(editor, workload_a))  # answered: 200
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
            release.set()
            holder.join(30)

        assert f"The hits of workspace {editor.workspace.pk} were not folded" in caplog.text
        assert counted() == {}
        assert AuditEvent.objects.filter(type=EventType.ASSEMBLED).count() == 2
        assert hits_fold(workspace_id=editor.workspace.pk) >= 1
        assert counted()[memory] == 2  # the next fold counts them, once

    def test_with_a_broker_the_recall_leaves_the_fold_to_beat(
        self, editor, workload_a, rows, settings
    ):
        settings.RECALL_HITS_FOLD_SECONDS = 0

        with sending_to("redis://127.0.0.1:1/0"):  # a broker, never reached
            assert carried(recall(editor, workload_a))
            hits_fold_due(workspace_id=editor.workspace.pk)

        assert counted() == {}
        schedule = settings.CELERY_BEAT_SCHEDULE["recall-fold-hits"]
        assert schedule["task"] == tasks.fold_hits.name
