"""Reverting an executed run: exactly what it changed comes back, where nothing changed it
since; the rest is skipped with why; once; operators only; one audit event; and the pages
that preview it, then do it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent, EventType
from maintenance import reverts, services
from maintenance.models import MaintenanceItem, MaintenanceRun
from portal.tasks import app as celery_app
from recall.engine import read as recall_read
from recall.models import FunnelCache, MemoryRecord
from tests.helpers import error_of, recall
from tests.maintenance.helpers import SNAPSHOT_FIELDS, ago, memory, snapshot
from tests.maintenance.test_pages import text_of
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, made_first = module_scoped("workspace_a", "operator")

pytestmark = pytest.mark.django_db

AUTHOR = "user:olga"


def execute(workspace, sweep: str) -> MaintenanceRun:
    run = services.maintenance_start(
        workspace=workspace, sweep=sweep, mode="execute", author=AUTHOR
    )
    assert run.status == "succeeded", run.error
    return run


def revert_url(run_id: Any, mode: str = "", confirm: Any = None) -> str:
    query = "&".join(
        part
        for part in (f"mode={mode}" if mode else "", f"confirm={confirm}" if confirm else "")
        if part
    )
    return f"/v1/maintenance/runs/{run_id}/revert" + (f"?{query}" if query else "")


def without_updated_at(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Every column but ``updated_at``, which a revert writes as any change does."""
    at = SNAPSHOT_FIELDS.index("updated_at")
    return [row[:at] + row[at + 1 :] for row in rows]


def state(workspace) -> tuple[Any, ...]:
    return (
        snapshot(workspace),
        AuditEvent.objects.count(),
        list(MaintenanceRun.objects.values_list("reverted_at", flat=True)),
        list(MaintenanceItem.objects.values_list("revert_outcome", flat=True)),
    )


def decayed(workspace, n: int = 3, actor_id: str = "user:ada") -> list[int]:
    """Memories the decay sweep makes stale: ten days old, never recalled."""
    return [
        memory(
            workspace, f"instruction {n} for {actor_id}", actor_id=actor_id, created_at=ago(days=10)
        )  # fmt: skip
        for n in range(n)
    ]


class RevertEachSweepTests:
    def test_a_decay_run_reverted_puts_back_exactly_what_it_changed(self, operator, workspace_a):
        ids = decayed(workspace_a)
        memory(workspace_a, "recalled yesterday", created_at=ago(days=10),
               last_accessed_at=ago(hours=24))  # fmt: skip
        before = snapshot(workspace_a)
        run = execute(workspace_a, "decay")
        assert set(MemoryRecord.objects.filter(pk__in=ids).values_list(
            "lifecycle_status", flat=True)) == {"stale"}  # fmt: skip

        response = operator.api().post(revert_url(run.pk, "execute", 3))

        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["mode"], body["sweep"], body["runId"]) == ("execute", "decay", run.pk)
        assert body["counts"] == {"changed": 3, "reverted": 3, "skipped": 0}
        assert body["revertedIds"] == [str(pk) for pk in ids]
        assert body["fields"] == ["lifecycle_status", "stale_since"]
        assert without_updated_at(snapshot(workspace_a)) == without_updated_at(before)
        run.refresh_from_db()
        assert (run.reverted_by, run.revert_event_id) == ("token:olga-token", body["auditEventId"])
        event = AuditEvent.objects.get(pk=body["auditEventId"])
        assert event.type == EventType.MAINTENANCE_REVERTED
        assert event.payload == {
            "runId": run.pk,
            "sweep": "decay",
            "counts": {"changed": 3, "reverted": 3, "skipped": 0},
            "fields": ["lifecycle_status", "stale_since"],
            "revertedIds": [str(pk) for pk in ids],
            "revertedIdsTruncated": False,
            "skippedIds": [],
            "skippedIdsTruncated": False,
            "skippedReasons": {},
        }
        assert set(run.items.values_list("revert_outcome", flat=True)) == {"reverted"}

    def test_an_expiry_run_reverted_makes_the_memories_active_again(self, workspace_a):
        was_inactive = memory(workspace_a, "offer", expires_at=ago(hours=1),
                              lifecycle_status="inactive")  # fmt: skip
        was_active = memory(workspace_a, "offer 2", expires_at=ago(hours=1))
        before = snapshot(workspace_a)
        run = execute(workspace_a, "expiry")
        assert run.applied == 2

        done = reverts.maintenance_revert(run=run, author=AUTHOR)

        assert done.restore == [was_inactive, was_active]
        assert without_updated_at(snapshot(workspace_a)) == without_updated_at(before)

    def test_a_promotion_run_reverted_makes_the_memories_short_term_again(self, workspace_a):
        earned = memory(workspace_a, "asked about every week", created_at=ago(days=8),
                        hit_count=12, confidence=1.0, last_accessed_at=ago(hours=1))  # fmt: skip
        before = snapshot(workspace_a)
        run = execute(workspace_a, "promotion")
        assert MemoryRecord.objects.get(pk=earned).tier == "long_term"
        # A recall since counts its hit: no change of what the run wrote.
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE recall_memoryrecord SET hit_count = hit_count + 1 WHERE id = %s", [earned]
            )

        done = reverts.maintenance_revert(run=run, author=AUTHOR)

        assert done.restore == [earned]
        row = MemoryRecord.objects.get(pk=earned)
        assert (row.tier, row.hit_count) == ("short_term", 13)
        at = SNAPSHOT_FIELDS.index("hit_count")
        after = [r[:at] + (r[at] - 1,) + r[at + 1 :] for r in snapshot(workspace_a)]
        assert without_updated_at(after) == without_updated_at(before)

    def test_a_dedup_run_reverted_makes_the_superseded_insight_current_again(self, workspace_a):
        text = "Ada answers faster when the release notes include a deadline"
        older = memory(workspace_a, text, memory_type="insight", created_at=ago(days=3))
        memory(workspace_a, text + ".", memory_type="insight", created_at=ago(days=1))
        before = snapshot(workspace_a)
        run = execute(workspace_a, "dedup")
        assert not MemoryRecord.objects.get(pk=older).is_current

        reverts.maintenance_revert(run=run, author=AUTHOR)

        row = MemoryRecord.objects.get(pk=older)
        assert (row.is_current, row.superseded_by_id) == (True, None)
        assert without_updated_at(snapshot(workspace_a)) == without_updated_at(before)

    def test_each_applied_item_records_the_columns_before_and_after(self, operator, workspace_a):
        (pk,) = decayed(workspace_a, 1)
        run = execute(workspace_a, "decay")
        row = MemoryRecord.objects.get(pk=pk)
        (item,) = operator.api().get(f"/v1/maintenance/runs/{run.pk}/items").json()["results"]
        assert item["before"]["lifecycle_status"] == "active"
        assert item["before"]["stale_since"] is None
        assert item["after"]["lifecycle_status"] == "stale"
        assert item["after"]["stale_since"] is not None
        assert set(item["before"]) == {"lifecycle_status", "stale_since", "updated_at"}
        assert row.stale_since is not None
        assert (item["revertOutcome"], item["revertReason"]) == ("", "")


class RevertSkipsTests:
    def test_memories_changed_deleted_or_erased_since_are_skipped_with_why(
        self, operator, workspace_a
    ):
        kept, edited, deleted = decayed(workspace_a, 3)
        (erased,) = decayed(workspace_a, 1, actor_id="user:bob")
        run = execute(workspace_a, "decay")
        edit = operator.api().patch(
            f"/v1/memory/memories/{edited}", {"confidence": 0.5}, format="json"
        )
        assert edit.status_code == 200, edit.content
        assert operator.api().delete(f"/v1/memory/memories/{deleted}").status_code == 204
        erase = operator.api().post("/v1/memory/actors/user:bob/erase", {}, format="json")
        assert erase.status_code == 200, erase.content

        shown = operator.api().post(revert_url(run.pk)).json()

        assert shown["mode"] == "preview"
        assert shown["counts"] == {"changed": 4, "reverted": 1, "skipped": 3}
        assert shown["revertedIds"] == [str(kept)]
        assert {(s["memoryId"], s["reason"]) for s in shown["skipped"]} == {
            (str(edited), "changed_since"),
            (str(deleted), "deleted"),
            (str(erased), "erased"),
        }
        assert MemoryRecord.objects.get(pk=kept).lifecycle_status == "stale"  # a preview

        done = operator.api().post(revert_url(run.pk, "execute", 1)).json()

        assert done["counts"] == shown["counts"]
        assert MemoryRecord.objects.get(pk=kept).lifecycle_status == "active"
        assert MemoryRecord.objects.get(pk=edited).lifecycle_status == "stale"
        reasons = dict(run.items.values_list("memory_id", "revert_reason"))
        assert reasons == {kept: "", edited: "changed_since", deleted: "deleted",
                           erased: "erased"}  # fmt: skip
        event = AuditEvent.objects.get(pk=done["auditEventId"])
        assert event.payload["skippedReasons"] == {"changed_since": 1, "deleted": 1, "erased": 1}

    def test_a_run_whose_every_memory_changed_since_puts_nothing_back(self, workspace_a):
        (pk,) = decayed(workspace_a, 1)
        run = execute(workspace_a, "decay")
        MemoryRecord.objects.filter(pk=pk).update(lifecycle_status="suppressed")
        before = state(workspace_a)
        with pytest.raises(services.MaintenanceConflict) as refused:
            reverts.maintenance_revert(run=run, author=AUTHOR)
        assert refused.value.code == "NOTHING_TO_REVERT"
        assert state(workspace_a) == before

    def test_items_applied_before_values_were_recorded_are_skipped(self, workspace_a):
        first, second = decayed(workspace_a, 2)
        run = execute(workspace_a, "decay")
        run.items.filter(memory_id=first).update(before=None, after=None)
        done = reverts.maintenance_revert(run=run, author=AUTHOR)
        assert done.restore == [second]
        assert [(s.memory_id, s.reason) for s in done.skipped] == [(first, "not_recorded")]
        assert MemoryRecord.objects.get(pk=first).lifecycle_status == "stale"


class RevertRefusalTests:
    def test_a_run_is_reverted_once(self, operator, workspace_a):
        decayed(workspace_a, 2)
        run = execute(workspace_a, "decay")
        assert operator.api().post(revert_url(run.pk, "execute")).status_code == 200
        before = state(workspace_a)
        for mode in ("preview", "execute"):
            error = error_of(operator.api().post(revert_url(run.pk, mode)), 409, "ALREADY_REVERTED")
            assert "reverted once" in error["message"]
            assert error["details"]["revertedBy"] == "token:olga-token"
        assert state(workspace_a) == before

    def test_a_preview_retention_reembed_or_sessions_run_is_refused_and_says_why(
        self, operator, workspace_a
    ):
        decayed(workspace_a, 1)
        memory(workspace_a, "stale for long", lifecycle_status="stale", stale_since=ago(days=40))
        memory(workspace_a, "other embedder", embedding_model="old-model-384")
        shown = services.maintenance_start(
            workspace=workspace_a, sweep="decay", mode="preview", author=AUTHOR
        )
        retention = services.maintenance_start(
            workspace=workspace_a, sweep="retention", mode="execute", author=AUTHOR, confirm=1
        )
        reembed = execute(workspace_a, "reembed")
        sessions = execute(workspace_a, "sessions")
        before = state(workspace_a)
        cases = [(shown, "preview", "a preview"), (retention, "sweep", "archive"),
                 (reembed, "sweep", "earlier vectors"),
                 (sessions, "sweep", "nothing of them was archived")]  # fmt: skip
        for run, reason, words in cases:
            error = error_of(
                operator.api().post(revert_url(run.pk, "execute")), 409, "NOT_REVERTIBLE"
            )
            assert error["details"] == {"runId": run.pk, "reason": reason}
            assert words in error["message"]
        assert state(workspace_a) == before

    def test_a_run_executed_before_values_were_recorded_cannot_be_reverted(
        self, operator, workspace_a
    ):
        decayed(workspace_a, 2)
        run = execute(workspace_a, "decay")
        run.items.update(before=None, after=None)  # as every run executed before this release
        before = state(workspace_a)
        error = error_of(operator.api().post(revert_url(run.pk)), 409, "NOT_REVERTIBLE")
        assert error["details"]["reason"] == "not_recorded"
        assert "executed before runs recorded the values they change" in error["message"]
        assert state(workspace_a) == before

    def test_a_run_that_changed_nothing_has_nothing_to_revert(self, operator, workspace_a):
        run = execute(workspace_a, "decay")
        error = error_of(operator.api().post(revert_url(run.pk)), 409, "NOT_REVERTIBLE")
        assert error["details"]["reason"] == "nothing_changed"

    def test_an_unfinished_run_is_refused(self, operator, workspace_a):
        decayed(workspace_a, 1)
        was = celery_app.conf.task_always_eager
        celery_app.conf.task_always_eager = False  # stays queued: the test never commits
        try:
            run = services.maintenance_start(
                workspace=workspace_a, sweep="decay", mode="execute", author=AUTHOR
            )
        finally:
            celery_app.conf.task_always_eager = was
        assert run.status == "queued"
        error = error_of(operator.api().post(revert_url(run.pk)), 409, "RUN_NOT_FINISHED")
        assert "queued" in error["message"]

    def test_a_wrong_confirmation_changes_nothing(self, operator, workspace_a):
        decayed(workspace_a, 3)
        run = execute(workspace_a, "decay")
        before = state(workspace_a)
        error = error_of(
            operator.api().post(revert_url(run.pk, "execute", 2)), 409, "CONFIRMATION_MISMATCH"
        )
        assert error["details"] == {"count": 3, "confirm": 2}
        assert state(workspace_a) == before

    @pytest.mark.parametrize(
        ("query", "field"),
        [("?mode=undo", "mode"), ("?mode=execute&confirm=three", "confirm")],
    )
    def test_bad_input_is_a_400(self, operator, workspace_a, query, field):
        decayed(workspace_a, 1)
        run = execute(workspace_a, "decay")
        before = state(workspace_a)
        response = operator.api().post(f"/v1/maintenance/runs/{run.pk}/revert{query}")
        assert field in error_of(response, 400, "INVALID_REQUEST")["details"]["fields"]
        assert state(workspace_a) == before

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_revert(self, request, who, workspace_a):
        decayed(workspace_a, 1)
        run = execute(workspace_a, "decay")
        persona = request.getfixturevalue(who)
        before = state(workspace_a)
        for mode in ("preview", "execute"):
            error = error_of(persona.api().post(revert_url(run.pk, mode)), 403, "PERMISSION_DENIED")
            assert "operator role" in error["message"]
            assert error["details"]["requiredRole"] == "operator"
        assert state(workspace_a) == before

    def test_a_run_of_another_workspace_is_not_found(self, operator, outsider, workspace_b):
        decayed(workspace_b, 1)
        theirs = execute(workspace_b, "decay")
        before = state(workspace_b)
        error_of(operator.api().post(revert_url(theirs.pk, "execute")), 404, "NOT_FOUND")
        error_of(operator.api().post(revert_url("abc")), 404, "NOT_FOUND")
        assert state(workspace_b) == before
        assert outsider.api().post(revert_url(theirs.pk)).status_code == 200


class RevertAndRecallTests:
    def test_recall_carries_the_memories_put_back_though_it_cached_their_absence(
        self, operator, editor, workload_a, workspace_a, monkeypatch
    ):
        monkeypatch.setattr(recall_read, "FUNNEL_CACHE_MIN", 1)  # every recall keeps its funnel
        ids = decayed(workspace_a, 2)
        memory(workspace_a, "release summary preferences, recalled", created_at=ago(days=10),
               last_accessed_at=ago(hours=1))  # fmt: skip
        run = execute(workspace_a, "decay")
        carried = {int(e["id"]) for e in recall(editor, workload_a)["entries"]}
        assert not carried & set(ids)
        assert FunnelCache.objects.filter(actor__name="ada").exists()

        reverts.maintenance_revert(run=run, author=AUTHOR)

        carried = {int(e["id"]) for e in recall(editor, workload_a)["entries"]}
        assert set(ids) <= carried


def client_for(persona) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


def page_url(name: str, *args: Any, slug: str = "team-a") -> str:
    return reverse(f"maintenance:{name}", args=[slug, *args])


class RevertPageTests:
    def test_the_run_page_offers_it_the_confirmation_previews_it_and_the_post_does_it(
        self, operator, workspace_a
    ):
        kept, deleted = decayed(workspace_a, 2)
        run = execute(workspace_a, "decay")
        MemoryRecord.objects.filter(pk=deleted).delete()
        client = client_for(operator)
        assert page_url("revert", run.pk) in client.get(page_url("run", run.pk)).content.decode()

        confirm = client.get(page_url("revert", run.pk))

        assert confirm.status_code == 200
        text = text_of(confirm)
        assert "Put back 1 of the 2 memories it changed" in text
        assert f"#{kept}" in text and "stale → active" in text and "instruction 0" in text
        assert f"#{deleted} deleted since the run" in text
        assert "Can it be undone? A run is reverted once" in text
        assert "due again at the next decay sweep" in text
        assert MemoryRecord.objects.get(pk=kept).lifecycle_status == "stale"

        done = client.post(page_url("revert", run.pk), {"confirm": "1"}, follow=True)

        assert done.redirect_chain[-1][0] == page_url("run", run.pk)
        text = text_of(done)
        assert "Reverted decay run" in text and "put back 1 of 2 memories, skipped 1" in text
        assert "1 memory put back, 1 skipped" in text
        assert MemoryRecord.objects.get(pk=kept).lifecycle_status == "active"
        assert page_url("revert", run.pk) not in done.content.decode()

    def test_a_count_that_changed_since_the_preview_changes_nothing(self, operator, workspace_a):
        decayed(workspace_a, 2)
        run = execute(workspace_a, "decay")
        before = state(workspace_a)
        response = client_for(operator).post(page_url("revert", run.pk), {"confirm": "5"})
        assert response.status_code == 409
        assert "puts back 2 memories, not 5; nothing was changed" in text_of(response)
        assert state(workspace_a) == before

    def test_a_run_that_cannot_be_reverted_says_why(self, operator, workspace_a):
        decayed(workspace_a, 1)
        run = execute(workspace_a, "decay")
        run.items.update(before=None, after=None)
        client = client_for(operator)
        run_page = text_of(client.get(page_url("run", run.pk)))
        assert "executed before runs recorded the values they change" in run_page
        response = client.get(page_url("revert", run.pk))
        assert response.status_code == 409
        assert "This run cannot be reverted" in text_of(response)

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_are_offered_it_or_may_do_it(self, request, who, workspace_a):
        decayed(workspace_a, 1)
        run = execute(workspace_a, "decay")
        client = client_for(request.getfixturevalue(who))
        assert (
            page_url("revert", run.pk) not in client.get(page_url("run", run.pk)).content.decode()
        )
        assert client.get(page_url("revert", run.pk)).status_code == 403
        assert client.post(page_url("revert", run.pk), {"confirm": "1"}).status_code == 403
        assert MemoryRecord.objects.get().lifecycle_status == "stale"

    def test_a_run_of_another_workspace_is_not_found(self, operator, workspace_b):
        decayed(workspace_b, 1)
        theirs = execute(workspace_b, "decay")
        assert client_for(operator).get(page_url("revert", theirs.pk)).status_code == 404
