"""Explain and replay: ``POST /v1/audit/events/{id}/replay`` runs a recorded recall again now,
records nothing, and reports each memory as entered, left or stayed with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from audit.models import AuditEvent, EventType, StoredQuery
from audit.services import audit_event_record
from recall.envelope import query_hash
from recall.hits import hits_fold
from recall.models import MemoryRecord
from recall.services import memory_delete, memory_set_status, memory_update
from tests.chat.helpers import layout, roomy_floor, started, turn
from tests.helpers import QUERY, error_of, recall
from tests.module_personas import module_scoped
from tests.recall import factories
from tests.recall.test_recall import set_floor

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

pytestmark = pytest.mark.django_db


def replay(persona: Any, event: AuditEvent | int, **body: Any) -> Any:
    pk = event if isinstance(event, int) else event.pk
    return persona.api().post(f"/v1/audit/events/{pk}/replay", body, format="json")


def last_assembled(workspace: Any) -> AuditEvent:
    return AuditEvent.objects.filter(workspace=workspace, type=EventType.ASSEMBLED).latest("id")


def by_id(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in body["memories"]}


@pytest.fixture
def recorded(editor: Any, workload_a: Any) -> tuple[AuditEvent, list[MemoryRecord]]:
    rows = factories.memories(
        editor.workspace, *({"content": f"release summary preferences {n}"} for n in range(4))
    )
    recall(editor, workload_a)
    return last_assembled(editor.workspace), rows


class ReplayTests:
    def test_nothing_changed_means_everything_stayed(self, editor, recorded):
        event, rows = recorded

        response = replay(editor, event, query=QUERY)

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["counts"] == {"entered": 0, "left": 0, "stayed": 4}
        assert {m["reason"] for m in body["memories"]} == {"unchanged"}
        assert body["changedVersions"] == [] and body["query"] == {
            "source": "pasted",
            "checked": True,
        }
        assert body["then"]["policyVersions"] == body["now"]["policyVersions"]

    def test_a_suppressed_memory_left_because_it_was_suppressed(self, editor, recorded):
        event, rows = recorded
        memory_set_status(memory=rows[1], status="suppressed", author="system:test")

        body = replay(editor, event, query=QUERY).json()

        gone = by_id(body)[str(rows[1].pk)]
        assert gone["change"] == "left" and gone["reason"] == "suppressed"
        assert gone["then"] == "entry" and gone["now"] is None
        assert gone["words"] == "Suppressed since"
        assert body["counts"] == {"entered": 0, "left": 1, "stayed": 3}

    def test_deleted_stale_and_edited_memories_say_so(self, editor, recorded):
        event, rows = recorded
        deleted = rows[0].pk
        memory_delete(memory=rows[0], author="system:test")
        memory_set_status(memory=rows[1], status="suppressed", author="system:test")
        MemoryRecord.objects.filter(pk=rows[2].pk).update(lifecycle_status="stale")
        memory_update(memory=rows[3], changes={"sensitivity": "restricted"}, author="t")

        memories = by_id(replay(editor, event, query=QUERY).json())

        assert memories[str(deleted)]["reason"] == "deleted"
        assert memories[str(deleted)]["present"] is False
        assert memories[str(rows[2].pk)]["reason"] == "stale"
        edited = memories[str(rows[3].pk)]
        assert edited["reason"] == "edited" and "more sensitive than the ceiling" in edited["words"]

    def test_a_floor_change_is_named_with_the_memories_it_filtered(
        self, editor, workspace_a, recorded
    ):
        event, rows = recorded
        MemoryRecord.objects.filter(pk=rows[0].pk).update(
            confidence=0.6, confirmation_status="inferred"
        )
        # the update above predates nothing: make it look old, as if it was so at the recall
        MemoryRecord.objects.filter(pk=rows[0].pk).update(updated_at=event.occurred_at)
        set_floor(workspace_a, confidenceMin=0.7)

        body = replay(editor, event, query=QUERY).json()

        assert body["changedVersions"] == ["floor"]
        assert body["then"]["policyVersions"]["floor"] == 1
        assert body["now"]["policyVersions"]["floor"] == 2
        left = by_id(body)[str(rows[0].pk)]
        assert left["reason"] == "policy_changed"
        assert "confidence below the minimum" in left["words"]

    def test_a_raised_similarity_floor_is_named_with_the_memories_it_left_out(
        self, editor, workspace_a, workload_a
    ):
        close, far = factories.memories(
            editor.workspace,
            {"content": "Ada's release summary preferences"},
            {"content": "Northwind invoice preferences, batch 3"},  # about 0.16
        )
        recall(editor, workload_a)
        event = last_assembled(editor.workspace)
        set_floor(workspace_a, similarityMin=0.3)

        body = replay(editor, event, query=QUERY).json()

        memories = by_id(body)
        assert memories[str(close.pk)]["reason"] == "unchanged"
        left = memories[str(far.pk)]
        assert (left["change"], left["reason"]) == ("left", "policy_changed")
        assert "less similar to the query than the minimum similarity" in left["words"]

    def test_a_memory_added_since_entered_as_new(self, editor, recorded):
        event, _ = recorded
        [fresh] = factories.memories(
            editor.workspace, {"content": "release summary preferences, latest"}
        )

        body = replay(editor, event, query=QUERY).json()

        entered = by_id(body)[str(fresh.pk)]
        assert entered["change"] == "entered" and entered["reason"] == "new"
        assert entered["then"] is None and entered["now"] == "entry"

    def test_an_erased_actor_left_everything_as_erased(self, operator, editor, recorded):
        event, rows = recorded
        operator.api().post("/v1/memory/actors/user:ada/erase", {}, format="json")

        body = replay(editor, event, query=QUERY).json()

        assert {m["reason"] for m in body["memories"]} == {"erased"}
        assert body["counts"]["left"] == 4

    def test_a_replay_records_nothing(self, editor, recorded):
        event, rows = recorded
        events = AuditEvent.objects.count()
        hits_fold(workspace_id=editor.workspace.pk)  # the recorded recall's hits counted
        hits = list(MemoryRecord.objects.order_by("pk").values_list("hit_count", flat=True))
        assert any(hits)

        assert replay(editor, event, query=QUERY).status_code == 200

        hits_fold(workspace_id=editor.workspace.pk)
        assert AuditEvent.objects.count() == events
        assert list(MemoryRecord.objects.order_by("pk").values_list("hit_count", flat=True)) == (
            hits
        )


class ReplayQueryTests:
    def test_the_query_is_not_stored_by_default_only_its_salted_hash(self, editor, recorded):
        event, _ = recorded
        assert "query" not in event.payload
        assert QUERY not in str(event.payload)
        assert event.payload["queryHash"] == query_hash(event.payload["envelopeId"], QUERY)

    def test_a_wrong_query_is_refused(self, editor, recorded):
        event, _ = recorded
        response = replay(editor, event, query="something else")
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "QUERY_MISMATCH"

    @pytest.mark.parametrize("query", [None, "", "   "])
    def test_without_a_stored_query_one_must_be_pasted_a_422(self, editor, recorded, query):
        # The request is well formed: the workspace did not keep the query it needs.
        event, _ = recorded
        response = replay(editor, event) if query is None else replay(editor, event, query=query)
        error = error_of(response, 422, "QUERY_REQUIRED")
        assert "does not store queries" in error["details"]["fields"]["query"]

    def test_a_workspace_storing_queries_replays_without_one(
        self, editor, workspace_a, workload_a, recorded
    ):
        workspace_a.store_queries = True
        workspace_a.save(update_fields=["store_queries"])
        editor.workspace.refresh_from_db()
        recall(editor, workload_a)
        event = last_assembled(workspace_a)
        # beside the event, outside its hash
        assert "query" not in event.payload
        assert StoredQuery.objects.get(event=event).text == QUERY

        body = replay(editor, event).json()

        assert body["query"] == {"source": "stored", "checked": True}
        assert body["counts"]["stayed"] == 4


class ReplayOverrideTests:
    """The request's override is recorded in the event, axis by axis, and replay applies it."""

    @pytest.fixture
    def overridden(self, editor, workspace_a, workload_a):
        set_floor(
            workspace_a,
            relaxable=["memoryTypeAllowed", "diagnosticsVerbosity"],
            diagnosticsVerbosity="full",
        )
        rows = factories.memories(
            workspace_a,
            {"content": "release summary preferences 0", "memory_type": "preference"},
            {"content": "release summary preferences 1", "memory_type": "fact"},
            {"content": "release summary preferences 2", "memory_type": "decision"},
        )
        override = {"memoryTypeAllowed": ["preference", "fact"], "diagnosticsVerbosity": "summary"}
        envelope = recall(editor, workload_a, policyOverride=override)
        assert len(envelope["entries"]) == 2
        return last_assembled(workspace_a), rows

    def test_the_event_records_the_override_as_validated(self, overridden):
        event, _ = overridden

        assert event.payload["policyOverride"] == {
            "memoryTypeAllowed": ["fact", "preference"],
            "diagnosticsVerbosity": "summary",
        }
        assert event.payload["policyVersions"]["override"] is True

    def test_a_recall_without_one_records_none(self, editor, workload_a, recorded):
        event, _ = recorded
        assert "policyOverride" not in event.payload

    def test_replay_runs_under_the_recorded_override(self, editor, overridden):
        event, rows = overridden

        body = replay(editor, event, query=QUERY).json()

        assert body["counts"] == {"entered": 0, "left": 0, "stayed": 2}
        assert body["now"]["policyOverride"] == event.payload["policyOverride"]
        assert body["now"]["policyVersions"]["override"] is True
        assert body["now"]["effectivePolicyHash"] == event.payload["effectivePolicyHash"]
        assert body["notes"] == []

    def test_an_override_refused_today_is_dropped_and_said(self, editor, workspace_a, overridden):
        event, rows = overridden
        set_floor(workspace_a, relaxable=[], diagnosticsVerbosity="full")

        body = replay(editor, event, query=QUERY).json()

        assert body["now"]["policyOverride"] is None
        assert "refused today" in body["notes"][0]
        assert by_id(body)[str(rows[2].pk)]["change"] == "entered"

    def test_the_event_page_shows_it_in_words(self, editor, overridden):
        event, _ = overridden
        client = editor.session()

        html = client.get(f"/w/team-a/audit/{event.pk}/").content.decode()

        assert "<dt>Override</dt>" in html
        assert "Memory types" in html and "fact, preference" in html
        assert "an agent, through the API" in html


class ReplayRefusalTests:
    def test_another_kind_of_event_is_not_replayable(self, editor, recorded):
        other = AuditEvent.objects.exclude(type=EventType.ASSEMBLED).filter(
            workspace=editor.workspace
        )[0]
        response = replay(editor, other, query=QUERY)
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "NOT_REPLAYABLE"

    def test_an_event_recorded_before_provenance_is_not_replayable(self, editor, workload_a):
        with transaction.atomic():
            old = audit_event_record(
                workspace=editor.workspace, type=EventType.ASSEMBLED, author="t",
                workload_id=workload_a.id, environment="prod", actor_id="user:ada",
                payload={"envelopeId": "e", "topK": 5},
            )  # fmt: skip
        response = replay(editor, old, query=QUERY)
        assert response.status_code == 409
        assert (
            "recorded before envelopes listed their memories" in response.json()["error"]["message"]
        )

    def test_a_viewer_may_not_and_an_outsider_sees_nothing(self, viewer, outsider, recorded):
        event, _ = recorded
        assert replay(viewer, event, query=QUERY).status_code == 403
        assert replay(outsider, event, query=QUERY).status_code == 404

    def test_an_unknown_event_is_404(self, editor):
        response = replay(editor, 999_999, query=QUERY)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "NOT_FOUND"

    @pytest.mark.parametrize("body", [{"query": 5}, {"surprise": "x"}, ["x"]])
    def test_bad_bodies_are_400(self, editor, recorded, body):
        event, _ = recorded
        response = editor.api().post(f"/v1/audit/events/{event.pk}/replay", body, format="json")
        assert response.status_code == 400, response.content


class TurnReplayTests:
    """A session turn's recall ran under a token-budget cap (its supporting-context budget);
    replaying its event runs under the same cap."""

    def test_a_capped_turn_replays_to_the_same_digest_and_entries(self, editor, workload_a):
        roomy_floor(editor.workspace)  # the policy's budget: 20,000 tokens
        body = " ".join(["release"] * 200)
        factories.memories(editor.workspace, *({"content": f"fact {n}: {body}"} for n in range(8)))
        layout(workload_a, {"context_window": 2000, "output_buffer": 0})
        session = started(editor, workload_a)
        answer = turn(editor, session["id"], ("user", "release summary"))
        assert answer["recall"]["tokenBudget"]["applied"] < 20_000
        assert answer["layout"]["supportingContextBudget"] < 20_000
        event = AuditEvent.objects.get(pk=answer["recall"]["eventId"])
        assert event.payload["truncatedIds"] or len(event.payload["memoryIds"]) < 8

        body_ = replay(editor, event, query="release summary").json()

        assert body_["counts"]["entered"] == 0 and body_["counts"]["left"] == 0
        assert body_["now"]["digest"] == body_["then"]["digest"] == event.payload["digest"]
        assert body_["now"]["tokenBudgetCap"] == event.payload["tokenBudgetCap"]["cap"]
        assert any("token-budget cap" in note for note in body_["notes"])

    def test_a_recall_outside_a_session_replays_without_a_cap(self, editor, recorded):
        event, _ = recorded

        body = replay(editor, event, query=QUERY).json()

        assert body["now"]["tokenBudgetCap"] is None
        assert body["now"]["digest"] == body["then"]["digest"]
