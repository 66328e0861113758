"""Provenance: every ``context.assembled`` event names the memories it carried and the policy
versions it was built from; the injection index answers "which envelopes carried this memory?"
from the API, the audit filter, the event page and the memory page.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent, EventType, Injection
from recall.models import MemoryRecord
from recall.services import memory_delete, memory_set_status
from tests.helpers import recall
from tests.module_personas import module_scoped
from tests.recall import factories
from tests.recall.test_recall import set_floor, set_workload

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer", "workload_a"
)

pytestmark = pytest.mark.django_db


def assembled_events(workspace: Any) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(workspace=workspace, type=EventType.ASSEMBLED).order_by("id")
    )


def client_for(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


def injections(persona: Any, memory: MemoryRecord, **params: Any) -> Any:
    return persona.api().get(f"/v1/memory/memories/{memory.pk}/injections", params)


@pytest.fixture
def four(editor: Any) -> list[MemoryRecord]:
    return factories.memories(
        editor.workspace, *({"content": f"release summary preferences {n}"} for n in range(4))
    )


class EventRecordsWhatTheEnvelopeCarriedTests:
    def test_its_ids_are_the_envelopes_and_its_rows_match(self, editor, workload_a, four):
        envelope = recall(editor, workload_a)

        [event] = assembled_events(editor.workspace)
        assert event.payload["memoryIds"] == [entry["id"] for entry in envelope["entries"]]
        assert event.payload["truncatedIds"] == [ref["id"] for ref in envelope["truncatedRefs"]]
        assert len(event.payload["memoryIds"]) == 4
        rows = Injection.objects.filter(event=event)
        assert {(str(r.memory_id), r.truncated) for r in rows} == {
            (pk, False) for pk in event.payload["memoryIds"]
        }
        assert {r.workspace_id for r in rows} == {editor.workspace.pk}

    def test_a_truncated_ref_is_recorded_as_truncated(self, editor, workload_a):
        set_floor(editor.workspace, perSegmentReservation={}, pinned=[])
        set_workload(workload_a, totalTokenBudget=40)
        factories.memories(
            editor.workspace,
            *(
                {"content": f"release summary preferences, memory number {n:02d}..."}
                for n in range(5)
            ),
        )

        envelope = recall(editor, workload_a)

        [event] = assembled_events(editor.workspace)
        [ref] = envelope["truncatedRefs"]
        assert event.payload["truncatedIds"] == [ref["id"]]
        flags = dict(Injection.objects.filter(event=event).values_list("memory_id", "truncated"))
        assert flags[int(ref["id"])] is True
        assert sum(flags.values()) == 1 and len(flags) == len(envelope["entries"]) + 1

    def test_an_empty_context_records_no_rows(self, editor, workload_a):
        factories.actor(editor.workspace)
        recall(editor, workload_a)

        [event] = assembled_events(editor.workspace)
        assert event.payload["memoryIds"] == [] and event.payload["truncatedIds"] == []
        assert not Injection.objects.filter(event=event).exists()

    def test_the_versions_name_the_floor_the_workload_policy_and_the_override(
        self, editor, workload_a, four
    ):
        recall(editor, workload_a)
        set_floor(editor.workspace, relaxable=["confidenceMin"], confidenceMin=0.5)  # floor v2
        set_workload(workload_a, confidenceMin=0.8)  # the prod policy, v1
        recall(editor, workload_a)
        recall(editor, workload_a, policyOverride={"confidenceMin": 0.5})
        recall(editor, workload_a, environment="staging")

        versions = [e.payload["policyVersions"] for e in assembled_events(editor.workspace)]
        assert versions == [
            {"floor": 1, "workload": None, "workloadEnvironment": None, "override": False},
            {"floor": 2, "workload": 1, "workloadEnvironment": "prod", "override": False},
            {"floor": 2, "workload": 1, "workloadEnvironment": "prod", "override": True},
            # staging has no policy of its own and the workload no all-environments default
            {"floor": 2, "workload": None, "workloadEnvironment": None, "override": False},
        ]

    def test_the_all_environments_default_is_named_as_such(self, editor, workload_a, four):
        from policies.services import workload_policy_save

        workload_policy_save(
            workload=workload_a,
            environment="",
            document={"confidenceMin": 0.8},
            author="system:test",
        )
        recall(editor, workload_a, environment="staging")

        [event] = assembled_events(editor.workspace)
        assert event.payload["policyVersions"]["workloadEnvironment"] == ""
        assert event.payload["policyVersions"]["workload"] == 1

    def test_provenance_adds_no_statement_to_the_hot_path(
        self, editor, workload_a, four, django_assert_num_queries
    ):
        recall(editor, workload_a)  # prepares the statements, remembers the policy
        # token, the read, the append (which writes the injections too)
        with django_assert_num_queries(3):
            recall(editor, workload_a)


class InjectionsOfAMemoryTests:
    def test_it_lists_exactly_the_envelopes_that_carried_it_newest_first(
        self, editor, viewer, workload_a, four
    ):
        kept, dropped = four[0], four[1]
        first = recall(editor, workload_a)
        memory_set_status(memory=dropped, status="suppressed", author="system:test")
        second = recall(editor, workload_a, environment="staging")

        events = assembled_events(editor.workspace)
        body = injections(viewer, kept).json()
        assert body["count"] == 2
        assert [row["eventId"] for row in body["results"]] == [events[1].pk, events[0].pk]
        assert [row["envelopeId"] for row in body["results"]] == [
            second["envelopeId"],
            first["envelopeId"],
        ]
        newest = body["results"][0]
        assert newest == {
            "eventId": events[1].pk,
            "envelopeId": second["envelopeId"],
            "occurredAt": newest["occurredAt"],
            "workloadId": str(workload_a.id),
            "environment": "staging",
            "caller": events[1].author,
            "truncated": False,
        }
        body = injections(viewer, dropped).json()
        assert [row["eventId"] for row in body["results"]] == [events[0].pk]

    def test_it_paginates(self, editor, viewer, workload_a, four):
        for _ in range(3):
            recall(editor, workload_a)
        body = injections(viewer, four[0], pageSize=2).json()
        assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
        body = injections(viewer, four[0], pageSize=2, page=2).json()
        assert len(body["results"]) == 1 and body["next"] is None

    def test_a_memory_never_carried_has_none(self, viewer, four):
        body = injections(viewer, four[0]).json()
        assert body["count"] == 0 and body["results"] == []

    def test_an_outsider_and_an_unknown_id_get_404(self, editor, outsider, workload_a, four):
        recall(editor, workload_a)
        for path in (f"{four[0].pk}", "999999999", "not-a-number"):
            response = outsider.api().get(f"/v1/memory/memories/{path}/injections")
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "NOT_FOUND"

    def test_it_is_in_the_schema(self, viewer):
        schema = viewer.api().get("/v1/schema/", {"format": "json"}).json()
        path = schema["paths"]["/v1/memory/memories/{memory_id}/injections"]
        assert "get" in path

    def test_the_audit_filter_lists_the_same_contexts_and_its_changes(
        self, editor, viewer, workload_a, four
    ):
        recall(editor, workload_a)
        memory_set_status(memory=four[1], status="suppressed", author="system:test")
        suppressed = AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).latest("id")
        recall(editor, workload_a)

        events = assembled_events(editor.workspace)
        api = viewer.api().get("/v1/audit/events/", {"memory": four[1].pk})
        assert api.status_code == 200, api.content
        assert [e["id"] for e in api.json()["results"]] == [suppressed.pk, events[0].pk]
        page = client_for(viewer).get(
            reverse("audit:events", args=[editor.workspace.slug]), {"memory": four[1].pk}
        )
        assert page.status_code == 200
        html = page.content.decode()
        carried, not_carried = (
            reverse("audit:event", args=[editor.workspace.slug, e.pk]) for e in events
        )
        assert f'href="{carried}"' in html and f'href="{not_carried}"' not in html


class ProvenancePageTests:
    def test_the_event_page_links_each_memory_or_says_it_is_gone(
        self, editor, viewer, workload_a, four
    ):
        recall(editor, workload_a)
        gone = four[2].pk
        memory_delete(memory=four[2], author="system:test")
        [event] = assembled_events(editor.workspace)

        html = (
            client_for(viewer)
            .get(reverse("audit:event", args=[editor.workspace.slug, event.pk]))
            .content.decode()
        )
        slug = editor.workspace.slug
        for memory in (four[0], four[1], four[3]):
            assert f'href="{reverse("recall:memory", args=[slug, memory.pk])}"' in html
        assert f"#{gone} (erased or deleted)" in html
        assert f'href="{reverse("recall:memory", args=[slug, gone])}"' not in html
        assert "floor v1" in html and "no workload policy" in html and "no override" in html

    def test_the_memory_page_says_in_how_many_contexts_and_when_last(
        self, editor, viewer, workload_a, four
    ):
        slug = editor.workspace.slug
        url = reverse("recall:memory", args=[slug, four[0].pk])
        html = client_for(viewer).get(url).content.decode()
        assert "in no context of this portal's audit trail yet" in html
        recall(editor, workload_a)
        recall(editor, workload_a)
        last = assembled_events(editor.workspace)[-1]

        html = client_for(viewer).get(url).content.decode()
        assert "in 2 contexts" in html
        assert f"?memory={four[0].pk}" in html
        assert last.occurred_at.strftime("%Y-%m-%d %H:%M") in html


class QueryStoragePageTests:
    def test_an_operator_switches_it_on_the_audit_page(self, operator, viewer):
        from portal.models import Workspace

        url = reverse("audit:events", args=[operator.workspace.slug])
        switch = reverse("policies:query-storage", args=[operator.workspace.slug])
        page = client_for(operator).get(url).content.decode()
        assert "Not stored (a query may be personal data)" in page
        assert f'action="{switch}"' in page
        assert f'action="{switch}"' not in client_for(viewer).get(url).content.decode()

        done = client_for(operator).post(switch, {"store": "on"}, follow=True)

        assert "Recall queries are stored from now on." in done.content.decode()
        assert Workspace.objects.get(pk=operator.workspace.pk).store_queries is True
        event = AuditEvent.objects.filter(type=EventType.WORKSPACE_SETTINGS_SET).get()
        assert event.payload == {"storeQueries": {"before": False, "after": True}}
        assert "recall queries stored" in done.content.decode()  # the list's summary

    def test_others_may_not(self, editor):
        from portal.models import Workspace

        switch = reverse("policies:query-storage", args=[editor.workspace.slug])
        assert client_for(editor).post(switch, {"store": "on"}).status_code == 403
        assert Workspace.objects.get(pk=editor.workspace.pk).store_queries is False
