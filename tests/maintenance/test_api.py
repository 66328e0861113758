"""The maintenance API as platforms and operators call it: roles, bad input, isolation."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEvent
from maintenance.models import MaintenanceRun
from recall.models import MemoryRecord
from tests.helpers import error_of
from tests.maintenance.helpers import ago, memory, snapshot
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, editor, viewer, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer"
)

pytestmark = pytest.mark.django_db


def start(persona, sweep: str, query: str = "", slug: str = "team-a"):
    return persona.api().post(f"/v1/workspaces/{slug}/maintenance/{sweep}{query}")


def state(workspace):
    return snapshot(workspace), AuditEvent.objects.count(), MaintenanceRun.objects.count()


@pytest.fixture
def expired(workspace_a):
    return [memory(workspace_a, f"offer {n}", expires_at=ago(hours=1)) for n in range(3)]


class SweepStartTests:
    def test_an_editor_previews_and_gets_the_finished_run(self, editor, expired):
        response = start(editor, "expiry", "?mode=preview")
        assert response.status_code == 200, response.content
        run = response.json()
        assert (run["sweep"], run["mode"], run["status"]) == ("expiry", "preview", "succeeded")
        assert run["progress"] == {"done": 0, "total": 3, "percent": 100}
        assert run["counts"] == {"listed": 3, "applied": 0, "skipped": 0}
        assert response["Location"] == run["links"]["self"]
        items = editor.api().get(run["links"]["items"]).json()
        assert items["count"] == 3
        assert {i["memoryId"] for i in items["results"]} == {str(pk) for pk in expired}
        assert set(items["results"][0]) == {
            "memoryId", "sessionId", "actorId", "reason", "score", "details", "outcome", "note",
            "before", "after", "revertOutcome", "revertReason",
        }  # fmt: skip

    def test_preview_is_the_default_mode(self, editor, expired):
        assert start(editor, "expiry").json()["mode"] == "preview"

    def test_an_operator_executes_a_preview(self, operator, editor, expired, workspace_a):
        shown = start(editor, "expiry").json()
        response = start(operator, "expiry", f"?mode=execute&preview={shown['id']}&confirm=3")
        assert response.status_code == 200, response.content
        run = response.json()
        assert run["preview"] == shown["id"]
        assert run["counts"]["applied"] == 3
        event = operator.api().get(run["links"]["auditEvent"]).json()
        assert event["type"] == "maintenance.executed"
        assert event["payload"]["preview"] == shown["id"]
        assert set(MemoryRecord.objects.values_list("lifecycle_status", flat=True)) == {"expired"}

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_execute(self, request, who, expired, workspace_a):
        persona = request.getfixturevalue(who)
        before = state(workspace_a)
        error_of(start(persona, "expiry", "?mode=execute"), 403, "PERMISSION_DENIED")
        assert state(workspace_a) == before

    def test_a_viewer_cannot_preview(self, viewer, workspace_a):
        error_of(start(viewer, "decay"), 403, "PERMISSION_DENIED")

    @pytest.mark.parametrize(
        ("sweep", "query", "status", "code", "field"),
        [
            ("compaction", "", 404, "NOT_FOUND", None),
            ("decay", "?mode=run", 400, "INVALID_REQUEST", "mode"),
            ("decay", "?mode=", 400, "INVALID_REQUEST", "mode"),  # not the default's name
            ("decay", "?mode=execute&confirm=ten", 400, "INVALID_REQUEST", "confirm"),
            # Past the schema's maximum (12 digits), and far past what int() parses.
            ("decay", "?mode=execute&confirm=1000000000000", 400, "INVALID_REQUEST", "confirm"),
            ("decay", "?mode=execute&confirm=" + "9" * 5000, 400, "INVALID_REQUEST", "confirm"),
            ("decay", "?mode=execute&preview=abc", 400, "INVALID_REQUEST", "preview"),
            ("decay", "?mode=preview&preview=1", 400, "INVALID_REQUEST", "preview"),
            ("decay", "?mode=execute&preview=999999", 404, "NOT_FOUND", None),
        ],
    )
    def test_bad_input_is_a_clear_error_and_changes_nothing(
        self, operator, workspace_a, expired, sweep, query, status, code, field
    ):
        before = state(workspace_a)
        error = error_of(start(operator, sweep, query), status, code)
        if field:
            assert field in error["details"]["fields"]
        assert state(workspace_a) == before

    def test_an_unknown_sweep_names_the_sweeps(self, operator):
        error = error_of(start(operator, "compaction"), 404)
        assert "expiry, decay, retention, promotion, dedup, reembed" in error["message"]

    def test_the_preview_of_another_sweep_is_refused(self, operator, workspace_a):
        shown = start(operator, "decay").json()
        before = state(workspace_a)
        error = error_of(start(operator, "expiry", f"?mode=execute&preview={shown['id']}"), 400)
        assert "decay" in error["details"]["fields"]["preview"]
        assert state(workspace_a) == before

    def test_the_preview_of_another_workspace_is_not_found(self, operator, outsider):
        theirs = start(outsider, "decay", slug="team-b").json()
        error_of(start(operator, "decay", f"?mode=execute&preview={theirs['id']}"), 404)

    def test_a_stale_or_spent_preview_is_a_conflict(self, operator, workspace_a, expired):
        shown = start(operator, "expiry").json()
        start(operator, "expiry", f"?mode=execute&preview={shown['id']}")
        error_of(
            start(operator, "expiry", f"?mode=execute&preview={shown['id']}"),
            409,
            "PREVIEW_ALREADY_EXECUTED",
        )
        stale = start(operator, "decay").json()
        operator.api().patch(
            "/v1/workspaces/team-a/lifecycle", {"decayThreshold": 0.25}, format="json"
        )
        before = state(workspace_a)
        error = error_of(
            start(operator, "decay", f"?mode=execute&preview={stale['id']}"), 409, "PREVIEW_STALE"
        )
        assert "v1" in error["message"]
        assert state(workspace_a) == before

    def test_a_wrong_confirmation_is_a_conflict(self, operator, expired):
        shown = start(operator, "expiry").json()
        error = error_of(
            start(operator, "expiry", f"?mode=execute&preview={shown['id']}&confirm=2"),
            409,
            "CONFIRMATION_MISMATCH",
        )
        assert error["details"] == {"count": 3, "confirm": 2}

    def test_a_large_retention_run_needs_the_exact_count(self, operator, workspace_a):
        for n in range(2):
            memory(workspace_a, f"stale {n}", lifecycle_status="stale", stale_since=ago(days=40))
        memory(workspace_a, "kept")
        before = state(workspace_a)
        error = error_of(
            start(operator, "retention", "?mode=execute"), 409, "CONFIRMATION_REQUIRED"
        )
        assert error["details"]["count"] == 2
        assert "confirm=2" in error["message"]
        assert state(workspace_a) == before
        assert start(operator, "retention", "?mode=execute&confirm=2").status_code == 200

    def test_two_executes_at_once_one_is_refused(self, operator, workspace_a):
        MaintenanceRun.objects.create(
            workspace=workspace_a, sweep="decay", mode="execute", status="running",
            settings_version=0, settings={}, embedder="x", author="user:olga",
        )  # fmt: skip
        error = error_of(start(operator, "expiry", "?mode=execute"), 409, "MAINTENANCE_IN_PROGRESS")
        assert error["details"]["runId"]


class RunReadTests:
    def test_runs_are_listed_newest_first_and_filtered(self, editor):
        start(editor, "decay")
        start(editor, "expiry")
        listing = editor.api().get("/v1/workspaces/team-a/maintenance/runs/").json()
        assert [r["sweep"] for r in listing["results"]] == ["expiry", "decay"]
        only = editor.api().get("/v1/workspaces/team-a/maintenance/runs/?sweep=decay").json()
        assert [r["sweep"] for r in only["results"]] == ["decay"]
        error_of(editor.api().get("/v1/workspaces/team-a/maintenance/runs/?status=done"), 400)

    def test_an_outsider_sees_no_run_of_another_workspace(self, editor, outsider):
        run = start(editor, "decay").json()
        for path in (run["links"]["self"], run["links"]["items"]):
            error_of(outsider.api().get(path), 404)
        error_of(outsider.api().post(f"/v1/maintenance/runs/{run['id']}/cancel"), 404)
        error_of(outsider.api().get("/v1/workspaces/team-a/maintenance/runs/"), 404)
        error_of(start(outsider, "decay"), 404)
        error_of(outsider.api().get("/v1/workspaces/team-a/lifecycle"), 404)
        listing = outsider.api().get("/v1/workspaces/team-b/maintenance/runs/").json()
        assert listing["results"] == []

    def test_a_run_id_that_is_not_a_number_is_not_found(self, editor):
        error_of(editor.api().get("/v1/maintenance/runs/%EF%BC%91"), 404)
        error_of(editor.api().get("/v1/maintenance/runs/abc/items"), 404)

    def test_cancelling_a_finished_run_is_a_conflict(self, operator, editor):
        run = start(editor, "decay").json()
        error_of(editor.api().post(f"/v1/maintenance/runs/{run['id']}/cancel"), 403)
        error_of(
            operator.api().post(f"/v1/maintenance/runs/{run['id']}/cancel"), 409, "RUN_FINISHED"
        )


class ArchiveTests:
    @pytest.fixture
    def retention_run(self, operator, workspace_a):
        self.doomed = memory(
            workspace_a, "stale since spring", lifecycle_status="stale", stale_since=ago(days=40)
        )
        for n in range(20):
            memory(workspace_a, f"kept {n}")
        return start(operator, "retention", "?mode=execute").json()

    def test_an_operator_downloads_the_archive_and_its_manifest(
        self, operator, viewer, retention_run
    ):
        response = operator.api().get(retention_run["links"]["archive"])
        assert response.status_code == 200
        assert response["Content-Type"].startswith("application/jsonl")
        assert "no-store" in response["Cache-Control"]
        text = b"".join(response.streaming_content).decode()
        assert json.loads(text)["id"] == str(self.doomed)
        manifest = viewer.api().get(retention_run["links"]["manifest"]).json()
        assert manifest["count"] == 1
        # The archive holds memory content: operators only.
        error_of(viewer.api().get(retention_run["links"]["archive"]), 403)

    def test_restore_puts_them_back_once(self, operator, retention_run):
        url = f"/v1/maintenance/runs/{retention_run['id']}/restore"
        assert operator.api().post(url).json() == {"restored": 1, "alreadyPresent": 0}
        assert operator.api().post(url).json() == {"restored": 0, "alreadyPresent": 1}
        assert MemoryRecord.objects.get(pk=self.doomed).content == "stale since spring"

    def test_the_import_takes_the_archive_back_under_its_ids(self, operator, editor, retention_run):
        text = b"".join(operator.api().get(retention_run["links"]["archive"]).streaming_content)
        lines = [json.loads(line) for line in text.decode().splitlines()]
        response = editor.api().post(
            "/v1/memory/actors/user:ada/memories", {"memories": lines}, format="json"
        )
        assert response.status_code == 201, response.content
        assert response.json()["memories"][0]["id"] == str(self.doomed)
        again = editor.api().post(
            "/v1/memory/actors/user:ada/memories", {"memories": lines}, format="json"
        )
        error = error_of(again, 409, "MEMORY_ID_TAKEN")
        assert error["details"]["ids"] == [self.doomed]
        assert "in use" in error["details"]["fields"]["id"]

    def test_an_import_that_names_one_id_twice_is_malformed(self, operator, editor, retention_run):
        text = b"".join(operator.api().get(retention_run["links"]["archive"]).streaming_content)
        line = json.loads(text.decode().splitlines()[0])
        before = MemoryRecord.objects.count()
        response = editor.api().post(
            "/v1/memory/actors/user:ada/memories", {"memories": [line, line]}, format="json"
        )
        error = error_of(response, 400, "INVALID_REQUEST")
        assert "more than once" in error["details"]["fields"]["id"]
        assert MemoryRecord.objects.count() == before

    def test_an_import_line_of_another_actor_is_refused(self, editor, retention_run):
        line = {"content": "x", "memoryType": "fact", "sourceKind": "user",
                "actorId": "user:bob"}  # fmt: skip
        error = error_of(
            editor.api().post("/v1/memory/actors/user:ada/memories", line, format="json"), 400
        )
        assert "user:bob" in json.dumps(error)

    def test_an_import_cannot_choose_a_fresh_id(self, editor, workspace_a):
        line = {"content": "x", "memoryType": "fact", "sourceKind": "user", "id": "9000000000"}
        error = error_of(
            editor.api().post("/v1/memory/actors/user:ada/memories", line, format="json"),
            422,
            "MEMORY_ID_NOT_ISSUED",
        )
        assert error["details"]["ids"] == [9000000000]
        assert "never issued" in error["details"]["fields"]["id"]
        assert not MemoryRecord.objects.filter(workspace=workspace_a).exists()

    def test_a_preview_has_no_archive(self, operator):
        run = start(operator, "retention").json()
        error_of(operator.api().get(f"/v1/maintenance/runs/{run['id']}/archive"), 404)
        error_of(operator.api().post(f"/v1/maintenance/runs/{run['id']}/restore"), 404)


class LifecycleSettingsTests:
    URL = "/v1/workspaces/team-a/lifecycle"

    def test_a_workspace_starts_on_the_defaults(self, viewer):
        body = viewer.api().get(self.URL).json()
        assert body["version"] == 0
        assert body["settings"]["decayThreshold"] == 0.2
        assert body["settings"]["schedule"]["decay"] == "preview"

    def test_an_operator_saves_a_version_with_its_audit_event(self, operator, workspace_a):
        response = operator.api().patch(
            self.URL, {"retentionDays": 60, "comment": "keep stale rows longer"}, format="json"
        )
        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["version"], body["settings"]["retentionDays"]) == (1, 60)
        event = AuditEvent.objects.filter(type="maintenance.settings_set").get()
        assert event.payload["diff"] == {"retentionDays": {"before": 30, "after": 60}}
        assert event.payload["comment"] == "keep stale rows longer"
        versions = operator.api().get(self.URL + "/versions/").json()
        assert [v["version"] for v in versions["results"]] == [1]

    def test_put_replaces_and_missing_keys_take_their_defaults(self, operator):
        operator.api().patch(self.URL, {"retentionDays": 60}, format="json")
        body = operator.api().put(self.URL, {"settings": {"decayThreshold": 0.3}}, format="json")
        assert body.json()["settings"]["retentionDays"] == 30
        assert body.json()["settings"]["decayThreshold"] == 0.3

    def test_an_identical_save_records_nothing(self, operator):
        operator.api().patch(self.URL, {"retentionDays": 60}, format="json")
        events = AuditEvent.objects.count()
        again = operator.api().patch(self.URL, {"retentionDays": 60}, format="json").json()
        assert again["version"] == 1
        assert AuditEvent.objects.count() == events

    def test_invalid_settings_name_each_field(self, operator):
        response = operator.api().put(
            self.URL, {"decayThreshold": 2, "schedule": {"decay": "sometimes"}}, format="json"
        )
        fields = error_of(response, 400, "INVALID_REQUEST")["details"]["fields"]
        assert set(fields) == {"decayThreshold", "schedule"}

    @pytest.mark.parametrize("method", ["put", "patch"])
    def test_promotion_weights_that_do_not_add_up_to_1_are_a_422(self, operator, method):
        weights = {"age": 0.5, "access": 0.5, "confidence": 0.5, "connections": 0}
        events = AuditEvent.objects.count()

        response = getattr(operator.api(), method)(
            self.URL, {"promotionWeights": weights}, format="json"
        )

        error = error_of(response, 422, "PROMOTION_WEIGHTS_UNBALANCED")
        assert "add up to 1; they add up to 1.5" in error["details"]["fields"]["promotionWeights"]
        assert operator.api().get(self.URL).json()["version"] == 0
        assert AuditEvent.objects.count() == events

    def test_a_malformed_setting_beside_unbalanced_weights_is_a_400_naming_both(self, operator):
        weights = {"age": 0.5, "access": 0.5, "confidence": 0.5, "connections": 0}
        response = operator.api().patch(
            self.URL, {"promotionWeights": weights, "retentionDays": "thirty"}, format="json"
        )
        fields = error_of(response, 400, "INVALID_REQUEST")["details"]["fields"]
        assert set(fields) == {"promotionWeights", "retentionDays"}

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_change_the_settings(self, request, who):
        persona = request.getfixturevalue(who)
        error_of(persona.api().patch(self.URL, {"retentionDays": 60}, format="json"), 403)


class MemoryLifecycleTests:
    def test_it_shows_where_a_memory_stands(self, viewer, workspace_a):
        pk = memory(workspace_a, "recalled two days ago", created_at=ago(days=9),
                    last_accessed_at=ago(hours=48), hit_count=3)  # fmt: skip
        body = viewer.api().get(f"/v1/memory/memories/{pk}/lifecycle").json()
        assert body["tier"] == "short_term"
        assert body["decayScore"] == pytest.approx(0.619, abs=1e-3)
        assert body["decays"] is True
        assert body["staleAt"]
        assert body["promotion"]["threshold"] == 0.7
        assert set(body["promotion"]["signals"]) == {"age", "access", "confidence", "connections"}

    def test_an_outsider_gets_not_found(self, outsider, workspace_a):
        pk = memory(workspace_a, "x")
        error_of(outsider.api().get(f"/v1/memory/memories/{pk}/lifecycle"), 404)


class SchemaTests:
    def test_the_maintenance_operations_are_in_the_openapi_schema(self, viewer):
        schema = viewer.api().get("/v1/schema/?format=json").json()
        for path in (
            "/v1/workspaces/{slug}/maintenance/{sweep}",
            "/v1/workspaces/{slug}/maintenance/runs/",
            "/v1/maintenance/runs/{run_id}",
            "/v1/maintenance/runs/{run_id}/items",
            "/v1/workspaces/{slug}/lifecycle",
            "/v1/memory/memories/{memory_id}/lifecycle",
        ):
            assert path in schema["paths"], path


class CommandTests:
    def test_it_previews_by_default_and_executes_with_the_flag(self, workspace_a, capsys):
        gone = memory(workspace_a, "offer", expires_at=ago(hours=1))
        call_command("maintenance", "expiry", "--workspace", "team-a")
        out = capsys.readouterr().out
        assert "Would change 1 memory" in out
        assert MemoryRecord.objects.get(pk=gone).lifecycle_status == "active"
        preview = MaintenanceRun.objects.get()
        call_command("maintenance", "expiry", "--workspace", "team-a", "--execute",
                     "--preview", str(preview.pk))  # fmt: skip
        assert "Changed 1 of 1" in capsys.readouterr().out
        assert MemoryRecord.objects.get(pk=gone).lifecycle_status == "expired"

    def test_a_refusal_is_a_command_error(self, workspace_a):
        with pytest.raises(CommandError, match="No workspace"):
            call_command("maintenance", "decay", "--workspace", "nope")
        with pytest.raises(CommandError, match="No preview run 12345"):
            call_command("maintenance", "decay", "--workspace", "team-a", "--execute",
                         "--preview", "12345")  # fmt: skip
