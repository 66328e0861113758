"""A memory's history on the audit trail: its ``memory`` filter (page, exports and API) lists
the contexts that carried it and the events that changed it, in time order, each row of the
page labelled by how it concerns the memory."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent, EventType
from maintenance import reverts
from maintenance.services import maintenance_start
from recall.erasure import actor_erase
from recall.models import MemoryRecord
from recall.services import memory_set_status, memory_update
from tests.helpers import recall
from tests.maintenance.helpers import ago
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer", "workload_a"
)

pytestmark = pytest.mark.django_db

EVENTS_URL = "/v1/audit/events/"
ADA = "/v1/memory/actors/user:ada/memories"


def created(editor: Any, content: str) -> MemoryRecord:
    """A memory written through the API, which records its ``memory.changed`` (created)."""
    body = {"content": content, "memoryType": "preference", "sourceKind": "user"}
    response = editor.api().post(ADA, body, format="json")
    assert response.status_code == 201, response.content
    return MemoryRecord.objects.get(pk=response.json()["id"])


def history(persona: Any, memory_id: int) -> list[tuple[int, str]]:
    """The API's answer to ``?memory=``: (event id, type), newest first."""
    response = persona.api().get(EVENTS_URL, {"memory": memory_id, "pageSize": 100})
    assert response.status_code == 200, response.content
    return [(event["id"], event["type"]) for event in response.json()["results"]]


def newest(workspace: Any, type: str) -> AuditEvent:
    return AuditEvent.objects.filter(workspace=workspace, type=type).latest("id")


class MemoryHistoryTests:
    def test_it_lists_its_creation_beside_the_contexts_that_carried_it(
        self, editor, viewer, workload_a
    ):
        memory = created(editor, "Ada prefers release notes as a short summary.")
        creation = newest(editor.workspace, EventType.MEMORY_CHANGED)
        recall(editor, workload_a)
        context = newest(editor.workspace, EventType.ASSEMBLED)

        assert history(viewer, memory.pk) == [
            (context.pk, "context.assembled"),
            (creation.pk, "memory.changed"),
        ]

    def test_its_edits_and_suppression_come_between_its_contexts_in_time_order(
        self, editor, viewer, workload_a
    ):
        memory = created(editor, "Ada prefers release notes as a short summary.")
        other = created(editor, "Ada reads the release summary preferences on Mondays.")
        recall(editor, workload_a)
        memory_update(memory=memory, changes={"confidence": 0.9}, author="user:eddie")
        memory_update(memory=other, changes={"confidence": 0.9}, author="user:eddie")
        others_edit = newest(editor.workspace, EventType.MEMORY_CHANGED)
        memory_set_status(memory=memory, status="suppressed", author="user:eddie")
        memory_set_status(memory=memory, status="active", author="user:eddie")
        recall(editor, workload_a)

        listed = history(viewer, memory.pk)

        types = [type for _, type in listed]
        assert types == [
            "context.assembled",  # the second recall
            "memory.changed",  # restored
            "memory.changed",  # suppressed
            "memory.changed",  # the edit
            "context.assembled",  # the first recall
            "memory.changed",  # created
        ]
        assert [pk for pk, _ in listed] == sorted((pk for pk, _ in listed), reverse=True)
        actions = [AuditEvent.objects.get(pk=pk).payload["action"] for pk, _ in listed[1:4]]
        assert actions == ["restored", "suppressed", "updated"]
        # the other memory's own edit is not in this one's history
        assert others_edit.pk not in {pk for pk, _ in listed}

    def test_a_lifecycle_run_that_changed_it_and_the_revert_that_put_it_back_are_listed(
        self, editor, operator, viewer
    ):
        memory = created(editor, "Always answer Ada in French.")
        MemoryRecord.objects.filter(pk=memory.pk).update(created_at=ago(days=10))
        preview = maintenance_start(
            workspace=operator.workspace, sweep="decay", mode="preview", author="user:olga"
        )
        run = maintenance_start(
            workspace=operator.workspace, sweep="decay", mode="execute", author="user:olga"
        )
        assert run.status == "succeeded", run.error
        reverts.maintenance_revert(run=run, author="user:olga")
        run.refresh_from_db()

        listed = history(viewer, memory.pk)

        assert [pk for pk, _ in listed[:2]] == [run.revert_event_id, run.event_id]
        assert [type for _, type in listed] == [
            "maintenance.reverted",
            "maintenance.executed",
            "memory.changed",
        ]
        # a preview changes no memory: not in its history
        assert preview.event_id not in {pk for pk, _ in listed}

    def test_a_run_that_did_not_change_it_is_not_listed(self, editor, operator, viewer):
        memory = created(editor, "Recent: Ada prefers short answers.")
        old = created(editor, "Old: Ada once asked about invoices.")
        MemoryRecord.objects.filter(pk=old.pk).update(created_at=ago(days=10))
        run = maintenance_start(
            workspace=operator.workspace, sweep="decay", mode="execute", author="user:olga"
        )

        assert run.event_id in {pk for pk, _ in history(viewer, old.pk)}
        assert run.event_id not in {pk for pk, _ in history(viewer, memory.pk)}

    def test_its_erasure_is_listed(self, editor, operator, viewer, workload_a):
        memory = created(editor, "Ada prefers release notes as a short summary.")
        recall(editor, workload_a)
        erasure = actor_erase(workspace=operator.workspace, actor_id="user:ada", author="user:olga")

        listed = history(viewer, memory.pk)

        assert listed[0] == (erasure.event_id, "memory.erased")
        assert [type for _, type in listed[1:]] == ["context.assembled", "memory.changed"]

    def test_an_outsider_filtering_by_its_id_sees_none_of_it(self, editor, outsider, workload_a):
        memory = created(editor, "Ada prefers release notes as a short summary.")
        recall(editor, workload_a)

        assert history(outsider, memory.pk) == []

    def test_the_page_labels_each_row_and_the_export_lists_the_same_events(
        self, editor, viewer, workload_a
    ):
        memory = created(editor, "Ada prefers release notes as a short summary.")
        recall(editor, workload_a)
        client = Client()
        client.force_login(viewer.user)
        slug = editor.workspace.slug

        page = client.get(reverse("audit:events", args=[slug]), {"memory": memory.pk})
        export = client.get(reverse("audit:export-jsonl", args=[slug]), {"memory": memory.pk})

        assert page.status_code == 200
        rows = page.context["rows"]
        assert [(row.event.type, row.relation) for row in rows] == [
            ("context.assembled", "in a context"),
            ("memory.changed", "changed"),
        ]
        html = page.content.decode()
        assert '<th scope="col">Memory</th>' in html
        assert ">in a context</span>" in html and ">changed</span>" in html
        lines = b"".join(export.streaming_content).decode().splitlines()
        assert len(lines) == 2

    def test_without_the_memory_filter_rows_carry_no_label(self, editor, viewer, workload_a):
        created(editor, "Ada prefers release notes as a short summary.")
        client = Client()
        client.force_login(viewer.user)

        page = client.get(reverse("audit:events", args=[editor.workspace.slug]))

        assert {row.relation for row in page.context["rows"]} == {""}
        assert '<th scope="col">Memory</th>' not in page.content.decode()
