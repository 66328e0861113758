"""Each sweep on the real database: preview writes no memory, execute changes exactly what
its preview listed, rows changed in between are skipped, every run is audited."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditEvent, EventType
from maintenance import archives, schedule, selectors, services
from maintenance.models import ArchiveChunk, MaintenanceItem, MaintenanceRun
from recall.models import MemoryRecord
from tests.maintenance.helpers import ago, memory, snapshot
from tests.module_personas import module_scoped

# The workspace the tests here act on, made once per module.
workspace_a, made_first = module_scoped("workspace_a")

pytestmark = pytest.mark.django_db

AUTHOR = "user:olga"


def preview(workspace, sweep: str) -> MaintenanceRun:
    run = services.maintenance_start(
        workspace=workspace, sweep=sweep, mode="preview", author=AUTHOR
    )
    assert run.status == "succeeded", run.error
    return run


def execute(workspace, sweep: str, **kwargs: Any) -> MaintenanceRun:
    return services.maintenance_start(
        workspace=workspace, sweep=sweep, mode="execute", author=AUTHOR, **kwargs
    )


def listed(run: MaintenanceRun) -> set[int]:
    return set(run.items.values_list("memory_id", flat=True))


def status_of(pk: int) -> str:
    return MemoryRecord.objects.get(pk=pk).lifecycle_status


class ExpirySweepTests:
    def test_a_preview_lists_the_expired_memories_and_writes_no_memory(self, workspace_a):
        gone = memory(workspace_a, "old offer", expires_at=ago(hours=1))
        memory(workspace_a, "still valid", expires_at=ago(hours=-1))
        memory(workspace_a, "no expiry")
        memory(workspace_a, "suppressed", expires_at=ago(hours=1), lifecycle_status="suppressed")
        before = snapshot(workspace_a)

        run = preview(workspace_a, "expiry")

        assert listed(run) == {gone}
        assert run.total == 1
        assert snapshot(workspace_a) == before
        item = run.items.get()
        assert (item.reason, item.outcome, item.actor_id) == ("past_expiry", "listed", "user:ada")

    def test_execute_with_the_preview_expires_exactly_what_it_listed(self, workspace_a):
        gone = memory(workspace_a, "old offer", expires_at=ago(hours=1))
        kept = memory(workspace_a, "still valid", expires_at=ago(hours=-1))
        shown = preview(workspace_a, "expiry")

        run = execute(workspace_a, "expiry", preview_id=shown.pk)

        assert run.status == "succeeded"
        assert (run.total, run.applied, run.skipped) == (1, 1, 0)
        assert status_of(gone) == "expired"
        assert status_of(kept) == "active"
        event = AuditEvent.objects.get(pk=run.event_id)
        assert event.type == EventType.MAINTENANCE_EXECUTED
        assert event.payload["preview"] == shown.pk
        assert event.payload["counts"] == {"listed": 1, "applied": 1, "skipped": 0}
        assert event.payload["appliedIds"] == [str(gone)]
        assert AuditEvent.objects.get(pk=shown.event_id).type == EventType.MAINTENANCE_PREVIEWED

    def test_a_row_changed_since_the_preview_is_skipped_and_reported(self, workspace_a):
        edited = memory(workspace_a, "offer one", expires_at=ago(hours=1))
        untouched = memory(workspace_a, "offer two", expires_at=ago(hours=1))
        shown = preview(workspace_a, "expiry")
        MemoryRecord.objects.filter(pk=edited).update(lifecycle_status="suppressed")

        run = execute(workspace_a, "expiry", preview_id=shown.pk)

        assert (run.applied, run.skipped) == (1, 1)
        assert status_of(edited) == "suppressed"
        assert status_of(untouched) == "expired"
        skipped = run.items.get(memory_id=edited)
        assert (skipped.outcome, skipped.note) == ("skipped", "changed since it was listed")

    def test_a_row_deleted_since_the_preview_is_skipped(self, workspace_a):
        gone = memory(workspace_a, "offer", expires_at=ago(hours=1))
        shown = preview(workspace_a, "expiry")
        MemoryRecord.objects.filter(pk=gone).delete()

        run = execute(workspace_a, "expiry", preview_id=shown.pk)

        assert run.items.get().note == "deleted since it was listed"

    def test_execute_without_a_preview_lists_and_executes_in_one_go(self, workspace_a):
        gone = memory(workspace_a, "old offer", expires_at=ago(minutes=5))
        run = execute(workspace_a, "expiry")
        assert run.preview is None
        assert listed(run) == {gone}
        assert status_of(gone) == "expired"


class DecaySweepTests:
    def test_it_makes_stale_what_decayed_below_the_threshold_and_is_old_enough(self, workspace_a):
        old = memory(workspace_a, "not recalled for a week", created_at=ago(days=10),
                     last_accessed_at=ago(hours=168))  # fmt: skip
        recent = memory(workspace_a, "recalled yesterday", created_at=ago(days=10),
                        last_accessed_at=ago(hours=24))  # fmt: skip
        young = memory(workspace_a, "new", created_at=ago(hours=2))
        long_term = memory(workspace_a, "promoted", created_at=ago(days=60), tier="long_term")

        run = execute(workspace_a, "decay")

        assert listed(run) == {old}
        item = run.items.get()
        assert item.score == pytest.approx(0.186, abs=1e-3)
        assert status_of(old) == "stale"
        assert MemoryRecord.objects.get(pk=old).stale_since is not None
        for pk in (recent, young, long_term):
            assert status_of(pk) == "active"

    def test_a_recall_between_preview_and_execute_saves_the_memory(self, workspace_a):
        old = memory(workspace_a, "not recalled", created_at=ago(days=10))
        shown = preview(workspace_a, "decay")
        assert listed(shown) == {old}
        with connection.cursor() as cursor:  # what recall's hit update does
            cursor.execute(
                "UPDATE recall_memoryrecord SET hit_count = hit_count + 1, last_accessed_at = now()"
                " WHERE id = %s",
                [old],
            )

        run = execute(workspace_a, "decay", preview_id=shown.pk)

        assert (run.applied, run.skipped) == (0, 1)
        assert status_of(old) == "active"


class RetentionSweepTests:
    def test_it_archives_then_deletes_and_the_archive_restores_them_as_they_were(self, workspace_a):
        for n in range(20):
            memory(workspace_a, f"keep {n}")
        doomed = memory(workspace_a, "stale since spring", lifecycle_status="stale",
                        stale_since=ago(days=31), hit_count=4, tier="long_term")  # fmt: skip
        fresh_stale = memory(workspace_a, "stale last week", lifecycle_status="stale",
                             stale_since=ago(days=7))  # fmt: skip
        row_before = snapshot(workspace_a)
        [before] = [r for r in row_before if r[0] == doomed]

        run = execute(workspace_a, "retention")

        assert run.status == "succeeded", run.error
        assert not MemoryRecord.objects.filter(pk=doomed).exists()
        assert MemoryRecord.objects.filter(pk=fresh_stale).exists()
        manifest = selectors.archive_manifest(run)
        assert manifest["count"] == 1
        text = "".join(selectors.archive_text(run))
        line = json.loads(text)
        assert line["id"] == str(doomed)
        assert line["actorId"] == "user:ada"
        assert line["content"] == "stale since spring"
        event = AuditEvent.objects.get(pk=run.event_id)
        assert event.payload["archive"]["sha256"] == manifest["sha256"]
        assert "stale since spring" not in json.dumps(event.payload)

        result = archives.maintenance_archive_restore(run=run, author=AUTHOR)
        again = archives.maintenance_archive_restore(run=run, author=AUTHOR)

        assert (result.restored, result.already_present) == (1, 0)
        assert (again.restored, again.already_present) == (0, 1)
        [after] = [r for r in snapshot(workspace_a) if r[0] == doomed]
        fields = MemoryRecord._meta.concrete_fields
        names = [f.attname for f in fields if f.attname != "embedding"]
        same = {"id", "workspace_id", "actor_id", "content", "memory_type", "source_kind",
                "confirmation_status", "confidence", "sensitivity", "consent_policy",
                "segment_kind", "lifecycle_status", "tier", "is_current", "expires_at",
                "stale_since", "created_at", "last_accessed_at", "hit_count", "token_count",
                "embedding_model"}  # fmt: skip
        for name, old_value, new_value in zip(names, before, after, strict=False):
            if name in same:
                assert new_value == old_value, name

    def test_the_archive_is_written_in_the_transaction_that_deletes(self, workspace_a):
        for n in range(5):
            memory(workspace_a, f"stale {n}", lifecycle_status="stale", stale_since=ago(days=40))
        for n in range(50):
            memory(workspace_a, f"keep {n}")
        run = execute(workspace_a, "retention")
        chunks = ArchiveChunk.objects.filter(run=run)
        assert sum(c.count for c in chunks) == 5 == run.applied
        assert MemoryRecord.objects.filter(lifecycle_status="stale").count() == 0

    def test_a_run_deleting_more_than_the_allowed_share_needs_the_exact_count(self, workspace_a):
        for n in range(3):
            memory(workspace_a, f"stale {n}", lifecycle_status="stale", stale_since=ago(days=40))
        memory(workspace_a, "keep")
        before = snapshot(workspace_a)

        with pytest.raises(services.MaintenanceConflict) as refused:
            execute(workspace_a, "retention")
        assert refused.value.code == "CONFIRMATION_REQUIRED"
        assert refused.value.details["count"] == 3
        with pytest.raises(services.MaintenanceConflict):
            execute(workspace_a, "retention", confirm=2)
        assert snapshot(workspace_a) == before
        assert not MaintenanceRun.objects.exists()

        run = execute(workspace_a, "retention", confirm=3)
        assert run.applied == 3

    def test_a_superseding_memory_can_be_deleted(self, workspace_a):
        newer = memory(workspace_a, "newer", lifecycle_status="stale", stale_since=ago(days=40))
        older = memory(workspace_a, "older", is_current=False)
        MemoryRecord.objects.filter(pk=older).update(superseded_by_id=newer)
        for n in range(30):
            memory(workspace_a, f"keep {n}")
        run = execute(workspace_a, "retention")
        assert run.applied == 1
        assert MemoryRecord.objects.get(pk=older).superseded_by_id is None


class PromotionSweepTests:
    def test_it_promotes_the_short_term_memories_that_earned_it(self, workspace_a):
        earned = memory(workspace_a, "asked about every week", created_at=ago(days=8),
                        hit_count=12, confidence=1.0, last_accessed_at=ago(hours=1))  # fmt: skip
        new = memory(workspace_a, "said once", created_at=ago(hours=3), confidence=0.6)
        run = execute(workspace_a, "promotion")
        assert listed(run) == {earned}
        item = run.items.get()
        assert item.details["signals"] == {"age": 1.0, "access": 1.0, "confidence": 1.0,
                                           "connections": 0.0}  # fmt: skip
        assert MemoryRecord.objects.get(pk=earned).tier == "long_term"
        assert MemoryRecord.objects.get(pk=new).tier == "short_term"

    def test_connections_lift_a_memory_over_the_threshold(self, workspace_a):
        # Age 1 (0.2) + access ln(6)/ln(11) (0.299) + confidence 0.9 (0.18) = 0.679 < 0.7:
        # one connection (0.2 / 5 = 0.04) promotes it.
        text = "Ada prefers release notes as short bullet points every Friday"
        central = memory(workspace_a, text, created_at=ago(days=8), hit_count=5)
        alone = memory(workspace_a, "The quarterly roadmap lives in the ops wiki",
                       created_at=ago(days=8), hit_count=5)  # fmt: skip
        memory(workspace_a, text + " please")  # a near-duplicate: cosine well above 0.8
        run = execute(workspace_a, "promotion")
        assert central in listed(run)
        assert alone not in listed(run)
        assert run.items.get(memory_id=central).details["connections"] == 1


class DedupSweepTests:
    def test_the_older_duplicate_insight_is_superseded_by_the_newer(self, workspace_a):
        text = "Ada answers faster when the release notes include a deadline"
        older = memory(workspace_a, text, memory_type="insight", created_at=ago(days=3))
        newer = memory(workspace_a, text + ".", memory_type="insight", created_at=ago(days=1))
        other = memory(workspace_a, "Grace reviews code in the mornings", memory_type="insight")
        bob = memory(workspace_a, text, actor_id="user:bob", memory_type="insight")

        run = execute(workspace_a, "dedup")

        assert listed(run) == {older}
        row = MemoryRecord.objects.get(pk=older)
        assert (row.is_current, row.superseded_by_id) == (False, newer)
        for pk in (newer, other, bob):
            assert MemoryRecord.objects.get(pk=pk).is_current
        assert run.items.get().score >= 0.9

    def test_only_insights_are_compared(self, workspace_a):
        text = "Ada answers faster when the release notes include a deadline"
        memory(workspace_a, text, memory_type="fact", created_at=ago(days=3))
        memory(workspace_a, text, memory_type="fact")
        assert preview(workspace_a, "dedup").total == 0


class ReembedSweepTests:
    def test_it_embeds_what_the_configured_embedder_has_not(self, workspace_a):
        pending = memory(workspace_a, "waiting", embedding_model="", embedding=None)
        other = memory(workspace_a, "other model", embedding_model="old-model-384")
        done = memory(workspace_a, "done")
        run = execute(workspace_a, "reembed")
        assert listed(run) == {pending, other}
        reasons = dict(run.items.values_list("memory_id", "reason"))
        assert reasons == {pending: "not_embedded", other: "other_embedder"}
        models = set(MemoryRecord.objects.values_list("embedding_model", flat=True))
        assert models == {MemoryRecord.objects.get(pk=done).embedding_model}
        assert MemoryRecord.objects.get(pk=pending).embedding is not None


class RunRulesTests:
    def test_a_second_execute_of_a_workspace_is_refused_while_one_is_in_progress(self, workspace_a):
        active = MaintenanceRun.objects.create(
            workspace=workspace_a, sweep="decay", mode="execute", status="running",
            settings_version=0, settings={}, embedder="x", author=AUTHOR,
        )  # fmt: skip
        with pytest.raises(services.MaintenanceConflict) as refused:
            execute(workspace_a, "expiry")
        assert refused.value.code == "MAINTENANCE_IN_PROGRESS"
        assert refused.value.details == {"runId": active.pk}
        preview(workspace_a, "expiry")  # previews are not held up

    def test_a_preview_is_executed_once(self, workspace_a):
        memory(workspace_a, "offer", expires_at=ago(hours=1))
        shown = preview(workspace_a, "expiry")
        execute(workspace_a, "expiry", preview_id=shown.pk)
        with pytest.raises(services.MaintenanceConflict) as refused:
            execute(workspace_a, "expiry", preview_id=shown.pk)
        assert refused.value.code == "PREVIEW_ALREADY_EXECUTED"

    def test_a_preview_made_under_older_settings_is_stale(self, workspace_a):
        shown = preview(workspace_a, "decay")
        services.lifecycle_settings_patch(
            workspace=workspace_a, changes={"decayThreshold": 0.3}, author=AUTHOR
        )
        with pytest.raises(services.MaintenanceConflict) as refused:
            execute(workspace_a, "decay", preview_id=shown.pk)
        assert refused.value.code == "PREVIEW_STALE"

    def test_a_preview_older_than_the_settings_allow_is_stale(self, workspace_a):
        shown = preview(workspace_a, "decay")
        MaintenanceRun.objects.filter(pk=shown.pk).update(as_of=ago(hours=25))
        with pytest.raises(services.MaintenanceConflict) as refused:
            execute(workspace_a, "decay", preview_id=shown.pk)
        assert refused.value.code == "PREVIEW_STALE"

    def test_the_preview_of_another_sweep_or_workspace_is_refused(self, workspace_a, workspace_b):
        decay = preview(workspace_a, "decay")
        elsewhere = preview(workspace_b, "expiry")
        with pytest.raises(services.ValidationFailed):
            execute(workspace_a, "expiry", preview_id=decay.pk)
        with pytest.raises(services.NotFoundError):
            execute(workspace_a, "expiry", preview_id=elsewhere.pk)

    def test_processing_a_finished_run_again_changes_nothing(self, workspace_a):
        gone = memory(workspace_a, "offer", expires_at=ago(hours=1))
        run = execute(workspace_a, "expiry")
        events = AuditEvent.objects.count()
        assert services.maintenance_run_process(run_id=run.pk) == "succeeded"
        assert AuditEvent.objects.count() == events
        assert status_of(gone) == "expired"

    def test_a_run_cut_short_resumes_where_it_stopped(self, workspace_a, settings):
        settings.MAINTENANCE_BATCH_SIZE = 2
        ids = [memory(workspace_a, f"offer {n}", expires_at=ago(hours=1)) for n in range(5)]
        shown = preview(workspace_a, "expiry")
        # An execute whose worker died after its first batch: listed, 2 applied, running.
        run = MaintenanceRun.objects.create(
            workspace=workspace_a, sweep="expiry", mode="execute", status="running",
            preview=shown, settings_version=shown.settings_version, settings=shown.settings,
            embedder=shown.embedder, author=AUTHOR,
        )  # fmt: skip
        services._list(run)
        first = list(MaintenanceItem.objects.filter(run=run).order_by("memory_id")[:2])
        from django.utils import timezone

        from maintenance.sweeps import apply_batch

        apply_batch(run, first, timezone.now())

        assert services.maintenance_run_process(run_id=run.pk) == "succeeded"
        run.refresh_from_db()
        assert (run.done, run.applied, run.skipped) == (5, 5, 0)
        assert {status_of(pk) for pk in ids} == {"expired"}
        assert AuditEvent.objects.filter(type=EventType.MAINTENANCE_EXECUTED).count() == 1

    def test_a_run_that_breaks_is_recorded_as_failed_with_its_event(self, workspace_a):
        memory(workspace_a, "offer", expires_at=ago(hours=1))
        # Settings a run cannot work with (written around the service): the decay sweep
        # finds no threshold.
        run = MaintenanceRun.objects.create(
            workspace=workspace_a, sweep="decay", mode="execute", settings_version=0,
            settings={"schedule": {}}, embedder="x", author=AUTHOR,
        )  # fmt: skip
        assert services.maintenance_run_process(run_id=run.pk) == "failed"
        run.refresh_from_db()
        assert (run.error_code, run.error) == ("RUN_FAILED", "KeyError: 'decayThreshold'")
        event = AuditEvent.objects.get(pk=run.event_id)
        assert event.payload["status"] == "failed"
        assert event.payload["error"]["code"] == "RUN_FAILED"

    def test_cancelling_a_queued_run_records_it(self, workspace_a):
        run = MaintenanceRun.objects.create(
            workspace=workspace_a, sweep="decay", mode="execute", settings_version=0,
            settings={}, embedder="x", author=AUTHOR,
        )  # fmt: skip
        cancelled = services.maintenance_cancel(run=run, author=AUTHOR)
        assert cancelled.status == "cancelled"
        assert AuditEvent.objects.get(pk=cancelled.event_id).payload["status"] == "cancelled"
        assert services.maintenance_run_process(run_id=run.pk) == "cancelled"
        with pytest.raises(services.MaintenanceConflict):
            services.maintenance_cancel(run=cancelled, author=AUTHOR)


class ScheduleTests:
    def test_the_tick_previews_each_scheduled_sweep_once_per_interval(self, workspace_a):
        started = schedule.maintenance_tick()
        runs = MaintenanceRun.objects.filter(workspace=workspace_a)
        assert {r.sweep for r in runs} == {
            "expiry", "decay", "retention", "promotion", "dedup", "sessions"
        }  # fmt: skip
        assert {(r.mode, r.trigger, r.author) for r in runs} == {
            ("preview", "schedule", "system:schedule")
        }
        assert len(started) == runs.count()
        assert schedule.maintenance_tick() == []

    def test_the_tick_reads_every_workspace_in_one_query(self, workspace_a, workspace_b):
        from django.test.utils import CaptureQueriesContext

        from policies.services import workspace_create

        services.lifecycle_settings_patch(
            workspace=workspace_b,
            changes={"scheduleEveryHours": 1, "schedule": {"decay": "off"}},
            author=AUTHOR,
        )
        first = schedule.maintenance_tick()
        # Nothing is due now: the tick only reads. Twice the workspaces, the same queries.
        with CaptureQueriesContext(connection) as two:
            assert schedule.maintenance_tick() == []
        for n in range(2):
            workspace_create(slug=f"team-{n}", name=f"Team {n}", author="system:test")
        second = schedule.maintenance_tick()
        with CaptureQueriesContext(connection) as four:
            assert schedule.maintenance_tick() == []
        assert len(four) == len(two)
        # Each workspace's own settings were read: team-b runs no decay, and sweeps every hour.
        runs = MaintenanceRun.objects.filter(pk__in=first)
        assert {r.sweep for r in runs.filter(workspace=workspace_b)} == {
            "expiry", "retention", "promotion", "dedup", "sessions"
        }  # fmt: skip
        assert len(first) == 11 and len(second) == 12
        later = timezone.now() + timedelta(hours=2)
        again = MaintenanceRun.objects.filter(pk__in=schedule.maintenance_tick(now=later))
        assert {r.workspace_id for r in again} == {workspace_b.pk}

    def test_a_schedule_no_run_can_start_is_logged_and_the_rest_still_runs(
        self, workspace_a, workspace_b, caplog
    ):
        from maintenance.lifecycle import default_settings
        from maintenance.models import LifecycleSettingsVersion

        # Written around the service (which refuses both): a sweep this release does not
        # have, and a mode that is not one.
        document = default_settings()
        document["schedule"] = {**document["schedule"], "compact": "preview", "decay": "often"}
        LifecycleSettingsVersion.objects.create(
            workspace=workspace_a, version=1, document=document, author=AUTHOR
        )

        with caplog.at_level("WARNING", logger="maintenance.schedule"):
            started = MaintenanceRun.objects.filter(pk__in=schedule.maintenance_tick())

        assert {r.sweep for r in started.filter(workspace=workspace_a)} == {
            "expiry", "retention", "promotion", "dedup", "sessions"
        }  # fmt: skip
        assert started.filter(workspace=workspace_b).count() == 6
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 2, warnings
        assert all(f"workspace {workspace_a.slug}" in w for w in warnings)
        assert any("'compact' (preview)" in w for w in warnings)
        assert any("'decay' (often)" in w for w in warnings)

    def test_a_scheduled_execute_over_the_share_is_refused_and_shown(self, workspace_a):
        services.lifecycle_settings_patch(
            workspace=workspace_a,
            changes={"schedule": {s: "off" for s in ("expiry", "decay", "promotion", "dedup",
                                                     "sessions")}
                     | {"retention": "execute"}},
            author=AUTHOR,
        )  # fmt: skip
        stale = memory(workspace_a, "stale", lifecycle_status="stale", stale_since=ago(days=40))
        [run_id] = schedule.maintenance_tick()
        run = MaintenanceRun.objects.get(pk=run_id)
        assert (run.status, run.error_code) == ("refused", "CONFIRMATION_REQUIRED")
        assert MemoryRecord.objects.filter(pk=stale).exists()

    def test_each_workspace_purges_after_its_own_retention_and_finding_them_is_two_queries(
        self, workspace_a, workspace_b
    ):
        from django.test.utils import CaptureQueriesContext

        services.lifecycle_settings_patch(
            workspace=workspace_b, changes={"archiveRetentionDays": 30}, author=AUTHOR
        )
        runs = {}
        for workspace in (workspace_a, workspace_b):
            memory(workspace, "stale", lifecycle_status="stale", stale_since=ago(days=40))
            for n in range(30):
                memory(workspace, f"keep {n}")
            runs[workspace.pk] = execute(workspace, "retention")
            MaintenanceRun.objects.filter(pk=runs[workspace.pk].pk).update(finished_at=ago(days=40))
        with CaptureQueriesContext(connection) as finding:
            assert archives.archives_purge(now=ago(days=39)) == 0  # 1 day old: nothing due
        assert len(finding) == 2
        assert archives.archives_purge() == 1  # 40 days: past team-b's 30, not team-a's 90
        for workspace, purged in ((workspace_a, False), (workspace_b, True)):
            runs[workspace.pk].refresh_from_db()
            assert (runs[workspace.pk].archive_purged_at is not None) is purged
            assert ArchiveChunk.objects.filter(run=runs[workspace.pk]).exists() is not purged

    def test_old_archives_are_purged(self, workspace_a):
        for n in range(2):
            memory(workspace_a, f"stale {n}", lifecycle_status="stale", stale_since=ago(days=40))
        for n in range(30):
            memory(workspace_a, f"keep {n}")
        run = execute(workspace_a, "retention")
        MaintenanceRun.objects.filter(pk=run.pk).update(finished_at=ago(days=91))
        assert archives.archives_purge() == 1
        run.refresh_from_db()
        assert run.archive_purged_at is not None
        with pytest.raises(services.MaintenanceConflict) as refused:
            archives.maintenance_archive_restore(run=run, author=AUTHOR)
        assert refused.value.code == "NO_ARCHIVE"


class SettingsSavedBeforeTheSessionsSweepTests:
    """A workspace whose settings were saved before the sessions sweep existed: their stored
    document has neither its schedule entry nor its retention; both read at their defaults."""

    @pytest.fixture
    def saved_before(self, workspace_a):
        from maintenance.lifecycle import default_settings
        from maintenance.models import LifecycleSettingsVersion

        document = default_settings()
        del document["sessionRetentionDays"]
        del document["schedule"]["sessions"]
        document["schedule"]["decay"] = "off"
        return LifecycleSettingsVersion.objects.create(
            workspace=workspace_a, version=1, document=document, author=AUTHOR
        )

    def test_the_current_settings_have_the_sessions_defaults(self, workspace_a, saved_before):
        document = selectors.lifecycle_settings_current(workspace=workspace_a).document

        assert document["schedule"]["sessions"] == "preview"
        assert document["schedule"]["decay"] == "off"  # what was saved stands
        assert document["sessionRetentionDays"] == 30
        saved_before.refresh_from_db()
        assert "sessions" not in saved_before.document["schedule"]  # the record stays as saved

    def test_the_tick_previews_the_sessions_sweep(self, workspace_a, saved_before):
        started = MaintenanceRun.objects.filter(pk__in=schedule.maintenance_tick())

        assert {r.sweep for r in started.filter(workspace=workspace_a)} == {
            "expiry", "retention", "promotion", "dedup", "sessions"
        }  # fmt: skip

    def test_the_maintenance_page_shows_its_schedule(self, operator, saved_before):
        response = operator.session().get(f"/w/{operator.workspace.slug}/maintenance/")

        assert response.status_code == 200
        assert "Session retention" in response.content.decode()
