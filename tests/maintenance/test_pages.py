"""The Maintenance pages as operators meet them: who may do what, preview and execute with
its confirmation, the progress fragment, cancel, archive restore, the settings form, the
memory page's lifecycle facts — and nothing of another workspace."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent, EventType
from maintenance import services
from maintenance.models import LifecycleSettingsVersion, MaintenanceRun
from portal.tasks import app as celery_app
from recall.models import MemoryRecord
from tests.maintenance.helpers import ago, memory, snapshot
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, editor, viewer, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer"
)

pytestmark = pytest.mark.django_db

HTMX_PROGRESS = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-progress"}


def client_for(persona) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


def url(name: str, *args: Any, slug: str = "team-a") -> str:
    return reverse(f"maintenance:{name}", args=[slug, *args])


def flashes(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def text_of(response) -> str:
    """The page's text without tags, whitespace collapsed."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", response.content.decode(), flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def preview(workspace, sweep: str) -> MaintenanceRun:
    run = services.maintenance_start(
        workspace=workspace, sweep=sweep, mode="preview", author="user:eddie"
    )
    assert run.status == "succeeded", run.error
    return run


@pytest.fixture
def expired(workspace_a) -> list[int]:
    return [memory(workspace_a, f"offer {n}", expires_at=ago(hours=1)) for n in range(3)]


@pytest.fixture
def queued():
    """Runs stay queued: a broker is configured, and the test's transaction never commits,
    so nothing is sent to it."""
    was = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = was


class IndexPageTests:
    def test_every_member_sees_each_sweep_its_schedule_and_last_runs(self, viewer, expired):
        run = preview(viewer.workspace, "expiry")
        response = client_for(viewer).get(url("index"))
        assert response.status_code == 200
        text = text_of(response)
        for title in ("Expiry", "Decay", "Retention", "Promotion", "Insight dedup", "Re-embedding"):
            assert title in text
        assert url("run", run.pk) in response.content.decode()

    def test_a_viewer_is_offered_no_preview_button(self, viewer, editor):
        assert url("start", "decay") not in client_for(viewer).get(url("index")).content.decode()
        assert url("start", "decay") in client_for(editor).get(url("index")).content.decode()

    def test_someone_logged_out_is_sent_to_log_in(self, workspace_a):
        response = Client().get(url("index"))
        assert response.status_code == 302
        assert "/login" in response["Location"]


class PreviewFromThePageTests:
    def test_an_editor_previews_and_lands_on_the_report(self, editor, expired, workspace_a):
        before = snapshot(workspace_a)
        response = client_for(editor).post(url("start", "expiry"))
        run = MaintenanceRun.objects.get()
        assert response.status_code == 302
        assert response["Location"] == url("run", run.pk)
        assert (run.mode, run.total, run.author) == ("preview", 3, "user:eddie")
        assert snapshot(workspace_a) == before
        page = client_for(editor).get(response["Location"])
        text = text_of(page)
        assert "listed 3 memories; nothing was changed" in text
        for pk in expired:
            assert f"#{pk}" in text

    def test_a_viewer_may_not_preview(self, viewer, expired):
        response = client_for(viewer).post(url("start", "expiry"))
        assert response.status_code == 403
        assert not MaintenanceRun.objects.exists()

    def test_an_unknown_sweep_is_not_found(self, editor):
        assert client_for(editor).post(url("start", "compaction")).status_code == 404

    def test_a_preview_is_a_post(self, editor):
        assert client_for(editor).get(url("start", "decay")).status_code == 405


class RunPageTests:
    def test_items_are_paginated_and_filtered_by_outcome(self, viewer, workspace_a):
        for n in range(30):
            memory(workspace_a, f"offer {n}", expires_at=ago(hours=1))
        run = preview(workspace_a, "expiry")
        client = client_for(viewer)
        first = client.get(url("run", run.pk))
        second = client.get(url("run", run.pk) + "?page=2")
        ids = set(re.findall(r"#(\d+)", text_of(first))) | set(
            re.findall(r"#(\d+)", text_of(second))
        )
        assert {str(pk) for pk in run.items.values_list("memory_id", flat=True)} <= ids
        none = client.get(url("run", run.pk) + "?outcome=applied")
        assert none.status_code == 200
        assert not re.search(r"offer \d+", text_of(none))
        # an unknown outcome shows everything, never an error
        assert client.get(url("run", run.pk) + "?outcome=<b>").status_code == 200

    def test_the_number_of_queries_does_not_grow_with_the_items(
        self, viewer, workspace_a, django_assert_max_num_queries
    ):
        def queries_for(n: int) -> int:
            MaintenanceRun.objects.all().delete()
            MemoryRecord.objects.filter(workspace=workspace_a).delete()
            for i in range(n):
                memory(workspace_a, f"offer {i}", expires_at=ago(hours=1))
            run = preview(workspace_a, "expiry")
            from django.db import connection
            from django.test.utils import CaptureQueriesContext

            with CaptureQueriesContext(connection) as captured:
                assert client_for(viewer).get(url("run", run.pk)).status_code == 200
            return len(captured)

        assert queries_for(3) == queries_for(25)

    def test_the_progress_fragment_alone_and_a_reload_once_finished(self, viewer, expired):
        run = preview(viewer.workspace, "expiry")
        response = client_for(viewer).get(url("run", run.pk), **HTMX_PROGRESS)
        body = response.content.decode()
        assert body.lstrip().startswith('<div id="run-progress"')
        assert "<html" not in body
        assert response["HX-Refresh"] == "true"

    def test_a_queued_run_keeps_polling(self, viewer, operator, expired, queued):
        run = services.maintenance_start(
            workspace=viewer.workspace, sweep="expiry", mode="preview", author="user:olga"
        )
        assert run.status == "queued"
        response = client_for(viewer).get(url("run", run.pk), **HTMX_PROGRESS)
        assert "HX-Refresh" not in response
        assert 'hx-trigger="every 1s"' in response.content.decode()
        assert "waiting for a worker" in text_of(response)

    def test_a_run_of_another_workspace_is_not_found(self, viewer, workspace_b):
        memory(workspace_b, "offer", expires_at=ago(hours=1))
        theirs = preview(workspace_b, "expiry")
        assert client_for(viewer).get(url("run", theirs.pk)).status_code == 404


class ExecuteFromThePageTests:
    def test_the_operator_confirms_the_count_and_the_run_changes_the_listed_memories(
        self, operator, expired, workspace_a
    ):
        shown = preview(workspace_a, "expiry")
        client = client_for(operator)
        confirm = client.get(url("execute", shown.pk))
        assert confirm.status_code == 200
        text = text_of(confirm)
        assert "exactly the 3 memories" in text
        assert 'name="confirm" value="3"' in confirm.content.decode()

        response = client.post(url("execute", shown.pk), {"confirm": "3"})
        run = MaintenanceRun.objects.get(mode="execute")
        assert response.status_code == 302
        assert response["Location"] == url("run", run.pk)
        assert run.preview_id == shown.pk and run.applied == 3
        assert any("changed 3 of 3" in m for m in flashes(response))
        statuses = MemoryRecord.objects.filter(pk__in=expired).values_list(
            "lifecycle_status", flat=True
        )
        assert set(statuses) == {"expired"}
        event = AuditEvent.objects.get(type=EventType.MAINTENANCE_EXECUTED)
        assert event.payload["preview"] == shown.pk
        # the preview now points at its execution, and offers no second one
        page = text_of(client.get(url("run", shown.pk)))
        assert f"#{run.pk}" in page
        assert url("execute", shown.pk) not in client.get(url("run", shown.pk)).content.decode()

    @pytest.mark.parametrize(
        ("confirm", "message"),
        [("2", "3"), ("ten", "Confirm the number of memories to change."), ("", "Confirm")],
    )
    def test_a_wrong_confirmation_changes_nothing(
        self, operator, expired, workspace_a, confirm, message
    ):
        shown = preview(workspace_a, "expiry")
        before = snapshot(workspace_a), AuditEvent.objects.count()
        response = client_for(operator).post(url("execute", shown.pk), {"confirm": confirm})
        assert response.status_code == 422
        assert message in text_of(response)
        assert (snapshot(workspace_a), AuditEvent.objects.count()) == before
        assert not MaintenanceRun.objects.filter(mode="execute", status="succeeded").exists()

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_execute(self, request, who, expired, workspace_a):
        shown = preview(workspace_a, "expiry")
        client = client_for(request.getfixturevalue(who))
        before = snapshot(workspace_a)
        assert client.get(url("execute", shown.pk)).status_code == 403
        assert client.post(url("execute", shown.pk), {"confirm": "3"}).status_code == 403
        assert snapshot(workspace_a) == before

    def test_an_execute_run_is_not_executed_again(self, operator, expired, workspace_a):
        shown = preview(workspace_a, "expiry")
        client = client_for(operator)
        client.post(url("execute", shown.pk), {"confirm": "3"})
        run = MaintenanceRun.objects.get(mode="execute")
        assert client.get(url("execute", run.pk)).status_code == 404
        # and the preview itself is refused a second time, with the reason
        again = client.post(url("execute", shown.pk), {"confirm": "3"})
        assert again.status_code == 422
        assert MaintenanceRun.objects.filter(mode="execute").count() == 1

    @pytest.mark.parametrize(
        ("sweep", "state", "undo"),
        [
            ("expiry", {"expires_at": ago(hours=1)}, "You can undo this: “Revert this run”"),
            ("decay", {"created_at": ago(days=10)}, "You can undo this: “Revert this run”"),
            (
                "retention",
                {"lifecycle_status": "stale", "stale_since": ago(days=40)},
                "You can undo this while the archive is kept (90 days): “Restore these memories”",
            ),
            ("reembed", {"embedding_model": "old-model-384"}, "This cannot be undone"),
        ],
    )
    def test_the_confirmation_says_whether_and_how_it_can_be_undone(
        self, operator, workspace_a, sweep, state, undo
    ):
        memory(workspace_a, "the memory", **state)
        for n in range(20):  # a retention run under the allowed share needs no typed count
            memory(workspace_a, f"other {n}")
        shown = preview(workspace_a, sweep)
        assert shown.total == 1
        text = text_of(client_for(operator).get(url("execute", shown.pk)))
        assert "Can it be undone? " + undo in text

    def test_a_stale_preview_says_why_it_cannot_be_executed(self, operator, expired, workspace_a):
        shown = preview(workspace_a, "expiry")
        services.lifecycle_settings_patch(
            workspace=workspace_a, changes={"decayThreshold": 0.3}, author="user:olga"
        )
        page = client_for(operator).get(url("run", shown.pk))
        assert url("execute", shown.pk) not in page.content.decode()
        assert "settings" in text_of(page).lower()


class CancelTests:
    def test_an_operator_cancels_a_queued_run(self, operator, expired, workspace_a, queued):
        run = services.maintenance_start(
            workspace=workspace_a, sweep="expiry", mode="preview", author="user:olga"
        )
        response = client_for(operator).post(url("cancel", run.pk))
        assert response.status_code == 302
        run.refresh_from_db()
        assert run.status == "cancelled"
        assert any("Cancelled run" in m for m in flashes(response))

    def test_a_finished_run_is_not_cancelled(self, operator, expired, workspace_a):
        run = preview(workspace_a, "expiry")
        response = client_for(operator).post(url("cancel", run.pk))
        assert any("already succeeded" in m for m in flashes(response))
        run.refresh_from_db()
        assert run.status == "succeeded"

    def test_an_editor_may_not_cancel(self, editor, expired, workspace_a, queued):
        run = services.maintenance_start(
            workspace=workspace_a, sweep="expiry", mode="preview", author="user:olga"
        )
        assert client_for(editor).post(url("cancel", run.pk)).status_code == 403
        run.refresh_from_db()
        assert run.status == "queued"


class RestoreTests:
    @pytest.fixture
    def deleted(self, operator, workspace_a) -> tuple[MaintenanceRun, list[int]]:
        doomed = [
            memory(workspace_a, f"stale since spring {n}", lifecycle_status="stale",
                   stale_since=ago(days=40))
            for n in range(2)
        ]  # fmt: skip
        for n in range(10):
            memory(workspace_a, f"kept {n}")
        shown = preview(workspace_a, "retention")
        client_for(operator).post(url("execute", shown.pk), {"confirm": "2"})
        run = MaintenanceRun.objects.get(mode="execute")
        assert not MemoryRecord.objects.filter(pk__in=doomed).exists()
        return run, doomed

    def test_the_run_page_offers_the_archive_and_restores_it(self, operator, deleted):
        run, doomed = deleted
        client = client_for(operator)
        page = client.get(url("run", run.pk))
        assert url("restore", run.pk) in page.content.decode()
        response = client.post(url("restore", run.pk))
        assert response.status_code == 302
        assert any("Restored 2 memories under their own ids" in m for m in flashes(response))
        assert set(MemoryRecord.objects.filter(pk__in=doomed).values_list("pk", flat=True)) == set(
            doomed
        )
        again = client.post(url("restore", run.pk))
        assert any("2 were already back" in m for m in flashes(again))
        assert MemoryRecord.objects.filter(pk__in=doomed).count() == 2

    def test_an_editor_may_not_restore(self, editor, deleted):
        run, doomed = deleted
        assert client_for(editor).post(url("restore", run.pk)).status_code == 403
        assert not MemoryRecord.objects.filter(pk__in=doomed).exists()

    def test_a_run_without_an_archive_restores_nothing(self, operator, expired, workspace_a):
        run = preview(workspace_a, "expiry")
        response = client_for(operator).post(url("restore", run.pk))
        assert any(m.startswith("Nothing was restored") for m in flashes(response))


def form_data(client: Client) -> dict[str, str]:
    """The settings form's fields as the page renders them (what a browser would post)."""
    html = client.get(url("settings")).content.decode()
    data: dict[str, str] = {}
    for tag in re.findall(r"<input\b[^>]*>", html):
        name = re.search(r'name="([^"]+)"', tag)
        if not name or name.group(1) == "csrfmiddlewaretoken":
            continue
        kind = re.search(r'type="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if kind and kind.group(1) == "checkbox":
            if "checked" in tag:
                data[name.group(1)] = "on"
        else:
            data[name.group(1)] = value.group(1) if value else ""
    for select in re.findall(r'<select name="([^"]+)".*?</select>', html, flags=re.S):
        block = re.search(rf'<select name="{re.escape(select)}".*?</select>', html, re.S)
        chosen = re.search(r'<option value="([^"]+)" selected', block.group(0))
        data[select] = chosen.group(1)
    return data


class SettingsPageTests:
    def test_every_member_reads_the_settings(self, viewer):
        response = client_for(viewer).get(url("settings"))
        assert response.status_code == 200
        assert "Decay threshold" in text_of(response)

    def test_settings_never_saved_read_as_the_defaults_not_as_a_version_zero(self, viewer):
        settings = text_of(client_for(viewer).get(url("settings")))
        assert "Lifecycle settings the defaults, never changed" in settings
        index = text_of(client_for(viewer).get(url("index")))
        assert "Lifecycle settings: the defaults (never changed)" in index
        assert "v0" not in settings and "v0" not in index

    @pytest.mark.parametrize("who", ["viewer", "editor"])
    def test_only_operators_change_them(self, request, who):
        client = client_for(request.getfixturevalue(who))
        data = form_data(client)
        data["decayThreshold"] = "0.3"
        assert client.post(url("settings"), data).status_code == 403
        assert not LifecycleSettingsVersion.objects.exists()

    def test_an_operator_saves_a_change_and_it_is_versioned_and_audited(
        self, operator, workspace_a
    ):
        client = client_for(operator)
        data = form_data(client)
        assert len(data) >= 15  # every setting, each weight and each sweep's schedule
        data.update(decayThreshold="0.3", schedule__expiry="execute", comment="Expire daily")
        response = client.post(url("settings"), data)
        assert response.status_code == 302, text_of(response)
        version = LifecycleSettingsVersion.objects.get(workspace=workspace_a)
        assert version.document["decayThreshold"] == 0.3
        assert version.document["schedule"]["expiry"] == "execute"
        assert any("Saved the lifecycle settings as v1" in m for m in flashes(response))
        event = AuditEvent.objects.get(type=EventType.LIFECYCLE_SETTINGS_SET)
        assert event.author == "user:olga"
        history = text_of(client.get(url("settings")))
        assert "Expire daily" in history

    def test_saving_what_is_already_there_records_nothing(self, operator, workspace_a):
        client = client_for(operator)
        events = AuditEvent.objects.count()
        response = client.post(url("settings"), form_data(client))
        assert response.status_code == 302
        assert any("Nothing changed" in m for m in flashes(response))
        assert AuditEvent.objects.count() == events

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("promotionWeights__age", "0.9", "add up to 1"),
            ("decayThreshold", "1.5", "1"),
            ("decayThreshold", "lots", "Enter a number"),
            ("retentionDays", "", "required"),
        ],
    )
    def test_an_invalid_value_is_shown_and_nothing_is_saved(self, operator, field, value, message):
        client = client_for(operator)
        data = form_data(client)
        data[field] = value
        events = AuditEvent.objects.count()
        response = client.post(url("settings"), data)
        assert response.status_code == 422
        assert message in text_of(response)
        assert not LifecycleSettingsVersion.objects.exists()
        assert AuditEvent.objects.count() == events


class MemoryPageTests:
    def test_the_memory_page_shows_its_lifecycle(self, viewer, workspace_a):
        pk = memory(workspace_a, "Ada likes tea", created_at=ago(hours=72),
                    last_accessed_at=ago(hours=72), hit_count=2)  # fmt: skip
        response = Client()
        response.force_login(viewer.user)
        page = response.get(reverse("recall:memory", args=["team-a", pk]))
        assert page.status_code == 200
        text = text_of(page)
        assert "Tier short-term" in text
        assert "Decay score 0.487" in text  # exp(-0.01 × 72)
        assert "Promotion score" in text and "of 0.7 needed" in text
        assert "Turns stale" in text
        assert "Under the default lifecycle settings (never changed)" in text

    def test_the_memory_page_lists_the_runs_that_changed_it_and_not_previews(
        self, viewer, workspace_a, expired
    ):
        page_url = reverse("recall:memory", args=["team-a", expired[0]])
        client = client_for(viewer)
        preview(workspace_a, "expiry")
        assert "Maintenance runs that touched it" not in client.get(page_url).content.decode()
        run = services.maintenance_start(
            workspace=workspace_a, sweep="expiry", mode="execute", author="user:olga"
        )
        assert run.status == "succeeded", run.error
        html = client.get(page_url).content.decode()
        assert "Maintenance runs that touched it" in html
        assert f'href="{url("run", run.pk)}">expiry run #{run.pk}</a>' in html


class ReactivatePageTests:
    def test_the_memory_page_offers_it_and_the_confirmation_says_what_happens(
        self, operator, workspace_a
    ):
        pk = memory(workspace_a, "always answer in French", created_at=ago(days=10),
                    lifecycle_status="stale", stale_since=ago(days=2))  # fmt: skip
        client = client_for(operator)
        memory_page = client.get(reverse("recall:memory", args=["team-a", pk])).content.decode()
        assert url("reactivate", pk) in memory_page

        confirm = client.get(url("reactivate", pk))

        assert confirm.status_code == 200
        text = text_of(confirm)
        assert "Make this stale memory active again" in text
        assert "always answer in French" in text
        assert "Its retention clock" in text
        # never recalled for ten days: its decay clock restarts with the reactivation
        assert "reactivating restarts its decay clock" in text
        assert "Can it be undone? Yes: suppress the memory" in text
        assert MemoryRecord.objects.get(pk=pk).lifecycle_status == "stale"

        done = client.post(url("reactivate", pk), {"expires_at": ""})

        assert done.status_code == 302
        assert done["Location"] == reverse("recall:memory", args=["team-a", pk])
        assert any(f"Reactivated memory {pk}" in m for m in flashes(done))
        row = MemoryRecord.objects.get(pk=pk)
        assert (row.lifecycle_status, row.stale_since) == ("active", None)
        event = AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).latest("id")
        assert (event.payload["action"], event.author) == ("reactivated", "user:olga")
        assert url("reactivate", pk) not in client.get(done["Location"]).content.decode()

    def test_an_expired_memory_takes_a_new_expiry_and_a_past_one_is_refused(
        self, operator, workspace_a
    ):
        pk = memory(workspace_a, "spring offer", lifecycle_status="expired",
                    expires_at=ago(hours=3))  # fmt: skip
        client = client_for(operator)
        assert "Its expiry" in text_of(client.get(url("reactivate", pk)))
        before = snapshot(workspace_a), AuditEvent.objects.count()

        past = client.post(url("reactivate", pk), {"expires_at": "2001-01-01T10:00"})

        assert past.status_code == 422
        assert "Give a time in the future" in text_of(past)
        assert (snapshot(workspace_a), AuditEvent.objects.count()) == before
        done = client.post(url("reactivate", pk), {"expires_at": "2999-01-01T10:00"})
        assert done.status_code == 302
        row = MemoryRecord.objects.get(pk=pk)
        assert (row.lifecycle_status, row.expires_at.year) == ("active", 2999)

    def test_a_memory_that_is_neither_stale_nor_expired_is_not_reactivated(
        self, operator, workspace_a
    ):
        pk = memory(workspace_a, "note", lifecycle_status="suppressed")
        client = client_for(operator)
        assert (
            url("reactivate", pk)
            not in client.get(reverse("recall:memory", args=["team-a", pk])).content.decode()
        )
        assert "a suppressed one is restored" in text_of(client.get(url("reactivate", pk)))
        before = snapshot(workspace_a)
        response = client.post(url("reactivate", pk), {"expires_at": ""})
        assert response.status_code == 409
        assert "Only a stale or expired memory can be reactivated" in text_of(response)
        assert snapshot(workspace_a) == before

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_are_offered_it_or_may_do_it(self, request, who, workspace_a):
        pk = memory(workspace_a, "note", lifecycle_status="stale", stale_since=ago(days=1))
        client = client_for(request.getfixturevalue(who))
        memory_page = client.get(reverse("recall:memory", args=["team-a", pk])).content.decode()
        assert url("reactivate", pk) not in memory_page
        assert client.get(url("reactivate", pk)).status_code == 403
        assert client.post(url("reactivate", pk)).status_code == 403
        assert MemoryRecord.objects.get(pk=pk).lifecycle_status == "stale"


class OutsiderTests:
    def test_every_maintenance_page_of_another_workspace_is_not_found(
        self, outsider, operator, expired, workspace_a
    ):
        run = preview(workspace_a, "expiry")
        client = client_for(outsider)
        stale = memory(workspace_a, "stale", lifecycle_status="stale")
        before = snapshot(workspace_a), MaintenanceRun.objects.count()
        gets = [
            url("index"), url("settings"), url("run", run.pk), url("execute", run.pk),
            url("revert", run.pk), url("reactivate", stale),
        ]  # fmt: skip
        posts = [
            url("start", "expiry"), url("execute", run.pk), url("cancel", run.pk),
            url("restore", run.pk), url("settings"), url("revert", run.pk),
            url("reactivate", stale),
        ]  # fmt: skip
        for path in gets:
            assert client.get(path).status_code == 404, path
        for path in posts:
            assert client.post(path, {"confirm": "3"}).status_code == 404, path
        # their own workspace's slug with this workspace's run id
        for name in ("run", "execute"):
            assert client.get(url(name, run.pk, slug="team-b")).status_code == 404
        for name in ("execute", "cancel", "restore"):
            assert (
                client.post(url(name, run.pk, slug="team-b"), {"confirm": "3"}).status_code == 404
            )
        assert (snapshot(workspace_a), MaintenanceRun.objects.count()) == before
