"""Session retention: the ``sessions`` maintenance sweep previews, then deletes, only the
sessions that ended longer ago than the workspace's session retention (a lifecycle setting,
versioned and audited), with their turns and prompts."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEvent, EventType
from chat.models import Session, Turn, TurnContext
from maintenance import services
from maintenance.lifecycle import default_settings
from maintenance.models import LifecycleSettingsVersion
from maintenance.selectors import lifecycle_settings_current
from recall.models import MemoryRecord
from tests.chat.helpers import started, turn
from tests.maintenance.helpers import ago
from tests.recall import factories

pytestmark = pytest.mark.django_db


def ended(persona: Any, workload: Any, days_ago: float, *contents: str) -> int:
    """A session of Ada's with a user turn per content, ended ``days_ago`` days ago."""
    session = started(persona, workload)
    for content in contents:
        turn(persona, session["id"], ("user", content))
    persona.api().post(f"/v1/sessions/{session['id']}/end")
    Session.objects.filter(pk=session["id"]).update(ended_at=ago(days=days_ago))
    return int(session["id"])


@pytest.fixture
def sessions(editor, workload_a) -> dict[str, int]:
    factories.memories(editor.workspace, {"content": "release notes are short"})
    active = started(editor, workload_a)
    turn(editor, active["id"], ("user", "still talking"))
    Session.objects.filter(pk=active["id"]).update(created_at=ago(days=90))
    return {
        "old": ended(editor, workload_a, 40, "an old question", "another"),
        "recent": ended(editor, workload_a, 5, "a recent question"),
        "active": int(active["id"]),
    }


def run(workspace: Any, mode: str, **kwargs: Any) -> Any:
    return services.maintenance_start(
        workspace=workspace, sweep="sessions", mode=mode, author="system:test", **kwargs
    )


class SessionsSweepTests:
    def test_a_preview_lists_only_the_ended_sessions_past_retention(self, editor, sessions):
        preview = run(editor.workspace, "preview")

        assert preview.status == "succeeded", preview.error
        [item] = preview.items.all()
        assert item.memory_id == sessions["old"] and item.reason == "past_session_retention"
        assert item.details["sessionId"] == str(sessions["old"]) and item.details["turns"] == 2
        assert Session.objects.count() == 3

    def test_executing_it_deletes_them_with_their_turns_and_prompts(self, editor, sessions):
        preview = run(editor.workspace, "preview")
        turns_before = Turn.objects.count()

        done = run(editor.workspace, "execute", preview_id=preview.pk)

        assert (done.status, done.applied) == ("succeeded", 1)
        assert set(Session.objects.values_list("pk", flat=True)) == {
            sessions["recent"], sessions["active"]
        }  # fmt: skip
        assert Turn.objects.count() == turns_before - 2
        assert not TurnContext.objects.filter(session_id=sessions["old"]).exists()
        assert MemoryRecord.objects.count() == 1  # memories are not sessions
        event = AuditEvent.objects.get(pk=done.event_id)
        assert event.type == EventType.MAINTENANCE_EXECUTED
        assert event.payload["appliedIds"] == [str(sessions["old"])]

    def test_the_retention_is_a_versioned_audited_setting(self, operator, editor, sessions):
        response = operator.api().patch(
            "/v1/workspaces/team-a/lifecycle", {"sessionRetentionDays": 3}, format="json"
        )
        assert response.status_code == 200, response.content

        version = lifecycle_settings_current(workspace=editor.workspace)
        assert version.version == 1 and version.document["sessionRetentionDays"] == 3
        event = AuditEvent.objects.filter(type=EventType.LIFECYCLE_SETTINGS_SET).get()
        assert event.payload["after"]["sessionRetentionDays"] == 3
        preview = run(editor.workspace, "preview")
        assert sorted(preview.items.values_list("memory_id", flat=True)) == sorted(
            [sessions["old"], sessions["recent"]]
        )

    def test_settings_saved_before_the_setting_take_its_default(self, editor, sessions):
        document = default_settings()
        del document["sessionRetentionDays"]
        LifecycleSettingsVersion.objects.create(
            workspace=editor.workspace, version=1, document=document, author="system:test"
        )

        preview = run(editor.workspace, "preview")

        assert list(preview.items.values_list("memory_id", flat=True)) == [sessions["old"]]

    def test_the_api_names_sessions_not_memories(self, editor, sessions):
        response = editor.api().post("/v1/workspaces/team-a/maintenance/sessions?mode=preview")

        assert response.status_code == 200, response.content
        items = editor.api().get(response.json()["links"]["items"]).json()["results"]
        assert [(i["sessionId"], i["memoryId"]) for i in items] == [(str(sessions["old"]), None)]

    def test_an_editor_previews_and_only_an_operator_executes(self, editor, sessions):
        url = "/v1/workspaces/team-a/maintenance/sessions?mode=execute"

        assert editor.api().post(url).status_code == 403
        assert Session.objects.count() == 3

    def test_the_run_page_lists_sessions_without_memory_content(self, operator, sessions):
        preview = run(operator.workspace, "preview")
        client = Client()
        client.force_login(operator.user)

        page = client.get(f"/w/team-a/maintenance/runs/{preview.pk}/").content.decode()

        assert f"session #{sessions['old']}" in page
        assert "release notes are short" not in page
        assert "Session ended" in page
