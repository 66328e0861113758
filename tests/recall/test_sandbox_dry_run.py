"""The sandbox's recall is a dry run: recorded like any (the audit shows it, marked as the
sandbox's), but it counts no hit and touches no lifecycle field, so testing a policy never
changes which memories go stale. Replay and compare stay read-only. Agents' recalls count as
before.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from audit.models import AuditEvent, EventType, Injection
from policies.services import workload_policy_save
from recall.hits import RANKED_HITS_SQL, hits_fold
from recall.models import MemoryRecord
from tests import helpers
from tests.module_personas import module_scoped
from tests.recall import factories
from tests.recall.test_pages import HTMX, client_for, recall_form

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hits_fold_unasked")]


@pytest.fixture
def rows(editor: Any) -> list[MemoryRecord]:
    return factories.memories(
        editor.workspace, *({"content": f"release summary preferences {n}"} for n in range(4))
    )


def lifecycle(rows: list[MemoryRecord]) -> dict[int, tuple[Any, ...]]:
    """What a recall could change of each memory: its hits, its decay clock, its state."""
    return {
        pk: rest
        for pk, *rest in MemoryRecord.objects.filter(pk__in=[r.pk for r in rows]).values_list(
            "pk", "hit_count", "last_accessed_at", "lifecycle_status", "tier", "updated_at"
        )
    }


def ranked_hits(memory_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {RANKED_HITS_SQL} FROM recall_memoryrecord m WHERE m.id = %s", [memory_id]
        )
        return int(cursor.fetchone()[0])


def sandbox_run(persona: Any, workload: Any, **extra: Any) -> AuditEvent:
    response = client_for(persona).post(
        "/w/team-a/sandbox/", recall_form(workload, **extra), **HTMX
    )
    assert response.status_code == 200, response.content
    return AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("id")


class SandboxDryRunTests:
    def test_it_is_recorded_as_the_sandboxs_and_counts_no_hit(self, editor, workload_a, rows):
        before = lifecycle(rows)

        event = sandbox_run(editor, workload_a)
        hits_fold(workspace_id=editor.workspace.pk)

        assert event.payload["origin"] == "sandbox"
        carried = [int(pk) for pk in event.payload["memoryIds"]]
        assert carried
        # provenance still lists what it carried, marked as a dry run's
        assert set(
            Injection.objects.filter(event_id=event.pk).values_list("memory_id", "dry_run")
        ) == {(pk, True) for pk in carried}
        assert lifecycle(rows) == before
        assert all(ranked_hits(pk) == 0 for pk in carried)

    def test_an_agent_s_next_recall_compares_its_prefix_with_its_own_last_one(
        self, editor, workload_a, rows
    ):
        body = {"workloadId": str(workload_a.pk), "environment": "prod", "query": "release"}
        url = "/v1/memory/actors/user:ada/recall"
        first = editor.api().post(url, body, format="json").json()
        # An operator tries another policy in the sandbox (another prefix), then puts it back.
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"confidenceMin": 0.3},
            author="system:test",
        )
        event = sandbox_run(editor, workload_a)
        assert event.payload["prefixFingerprint"] != first["prefixFingerprint"]
        workload_policy_save(
            workload=workload_a, environment="prod", document={}, author="system:test"
        )

        second = editor.api().post(url, body, format="json").json()

        assert second["prefixFingerprint"] == first["prefixFingerprint"]
        assert second["reused"] is True

    def test_the_memory_api_shows_no_hit_and_no_access(self, editor, workload_a, rows):
        sandbox_run(editor, workload_a)

        memory = editor.api().get(f"/v1/memory/memories/{rows[0].pk}").json()

        assert memory["hitCount"] == 0 and memory["lastAccessedAt"] is None

    def test_an_agents_recall_still_counts(self, editor, workload_a, rows):
        sandbox_run(editor, workload_a)
        envelope = helpers.recall(editor, workload_a, topK=3)
        hits_fold(workspace_id=editor.workspace.pk)

        counted = dict(MemoryRecord.objects.filter(hit_count__gt=0).values_list("pk", "hit_count"))
        assert counted == {int(entry["id"]): 1 for entry in envelope["entries"]}
        assert all(
            m.last_accessed_at is not None
            for m in MemoryRecord.objects.filter(pk__in=list(counted))
        )
        agent = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("id")
        assert "origin" not in agent.payload

    def test_compare_mode_records_one_dry_run_and_nothing_else(self, editor, workload_a, rows):
        before = lifecycle(rows)

        sandbox_run(editor, workload_a, compare="on")
        hits_fold(workspace_id=editor.workspace.pk)

        events = AuditEvent.objects.filter(type=EventType.ASSEMBLED)
        assert [e.payload.get("origin") for e in events] == ["sandbox"]
        assert lifecycle(rows) == before

    def test_a_replay_of_a_sandbox_run_changes_nothing(self, editor, workload_a, rows):
        event = sandbox_run(editor, workload_a)
        before, events = lifecycle(rows), AuditEvent.objects.count()

        response = editor.api().post(
            f"/v1/audit/events/{event.pk}/replay", {"query": helpers.QUERY}, format="json"
        )
        hits_fold(workspace_id=editor.workspace.pk)

        assert response.status_code == 200, response.content
        assert AuditEvent.objects.count() == events
        assert lifecycle(rows) == before

    def test_the_event_says_so_in_words(self, editor, workload_a, rows):
        event = sandbox_run(editor, workload_a)

        html = client_for(editor).get(f"/w/team-a/audit/{event.pk}/").content.decode()
        listing = client_for(editor).get("/w/team-a/audit/").content.decode()

        assert "the sandbox (a dry run: it counted no hits and changed no memory)" in html
        assert "Run in the sandbox: a dry run that counted no hits." in listing
