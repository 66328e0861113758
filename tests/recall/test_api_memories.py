"""The memory endpoints: import (one or a batch), list with filters, detail, edit,
suppress / restore, delete, and who may do what (SPEC §5 "Other recall-side endpoints", §9, §10).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEvent, EventType
from recall.models import Actor, MemoryRecord
from recall.runtime import embedder, embedder_model
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas the tests here act as, made once per module.
workspace_a, editor, viewer, made_first = module_scoped("workspace_a", "editor", "viewer")

ADA = "/v1/memory/actors/user:ada/memories"
MEMORY_KEYS = {
    "id", "actorId", "content", "memoryType", "sourceKind", "confirmationStatus", "confidence",
    "sensitivity", "consentPolicy", "segmentKind", "lifecycleStatus", "isCurrent",
    "supersededBy", "expiresAt", "createdAt", "updatedAt", "lastAccessedAt", "hitCount",
    "tokenCount", "embeddingModel", "embeddingPending", "tier", "staleSince",
}  # fmt: skip


def memory_vector_as_stored(vector: Sequence[float]) -> list[float]:
    """The vector PostgreSQL stores for an embedder's output: each element as a float4."""
    return list(struct.unpack(f"{len(vector)}f", struct.pack(f"{len(vector)}f", *vector)))


def fields_of(response: Any) -> dict[str, str]:
    return error_of(response, 400, "INVALID_REQUEST")["details"]["fields"]


def state(workspace: Any) -> dict[str, Any]:
    """Everything a refused call must leave as it was: every memory column, actors, events."""
    return {
        "memories": sorted(
            MemoryRecord.objects.filter(workspace=workspace).values_list(
                "id",
                "actor_id",
                "content",
                "memory_type",
                "lifecycle_status",
                "confidence",
                "hit_count",
                "token_count",
                "embedding_model",
                "updated_at",
                "created_at",
            )
        ),  # fmt: skip
        "actors": sorted(
            Actor.objects.filter(workspace=workspace).values_list("id", "kind", "name")
        ),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
    }


def memory_url(memory: MemoryRecord | str | int, action: str = "") -> str:
    pk = memory.pk if isinstance(memory, MemoryRecord) else memory
    return f"/v1/memory/memories/{pk}" + (f"/{action}" if action else "")


def new_memory(**fields: Any) -> dict[str, Any]:
    return {"content": "Ada prefers release notes as a short summary.", "memoryType":
            "preference", "sourceKind": "user", **fields}  # fmt: skip


def last_event(workspace: Any) -> AuditEvent:
    return AuditEvent.objects.filter(workspace=workspace).order_by("-id").first()


class MemoryCreateTests:
    def test_it_creates_one_memory_and_answers_in_camel_case(self, editor):
        response = editor.api().post(ADA, new_memory(confidence=0.8), format="json")

        assert response.status_code == 201, response.content
        body = response.json()
        assert set(body) == MEMORY_KEYS
        assert body["actorId"] == "user:ada"
        assert body["content"] == "Ada prefers release notes as a short summary."
        assert body["memoryType"] == "preference"
        assert body["confidence"] == 0.8
        # Defaults for what the caller left out.
        assert body["confirmationStatus"] == "unknown"
        assert body["sensitivity"] == "internal"
        assert body["consentPolicy"] == "unknown"
        assert body["segmentKind"] == "memory"
        assert body["lifecycleStatus"] == "active"
        assert body["isCurrent"] is True
        assert body["hitCount"] == 0
        assert body["tokenCount"] > 0
        assert body["embeddingModel"] == embedder_model() != ""
        row = MemoryRecord.objects.get(pk=body["id"])
        assert row.workspace == editor.workspace
        assert len(row.embedding) == settings.RECALL_EMBEDDING_DIM
        assert row.token_count == body["tokenCount"]

    def test_creating_is_audited_without_the_content(self, editor):
        response = editor.api().post(ADA, new_memory(), format="json")

        event = last_event(editor.workspace)
        assert event.type == EventType.MEMORY_CHANGED
        assert event.actor_id == "user:ada"
        assert event.author == "token:eddie-token"
        assert event.payload == {"action": "created", "count": 1, "ids": [response.json()["id"]]}

    def test_it_creates_a_batch_in_the_order_given(self, editor):
        batch = [new_memory(content=f"Memory number {n}") for n in range(3)]

        response = editor.api().post(ADA, {"memories": batch}, format="json")

        assert response.status_code == 201, response.content
        body = response.json()
        assert set(body) == {"memories", "count"}
        assert body["count"] == 3
        assert [m["content"] for m in body["memories"]] == [f"Memory number {n}" for n in range(3)]
        assert all(set(m) == MEMORY_KEYS for m in body["memories"])
        assert all(m["tokenCount"] > 0 and m["embeddingModel"] for m in body["memories"])
        assert MemoryRecord.objects.filter(workspace=editor.workspace).count() == 3
        assert last_event(editor.workspace).payload["count"] == 3

    def test_without_a_broker_a_batch_is_written_once_with_its_vectors(self, editor):
        # Embedded before the INSERT: no UPDATE rewrites the rows (and every index entry) to
        # add them, and each vector is the one the embedding job writes (float4, exactly).
        batch = [new_memory(content=f"Release note number {n}") for n in range(3)]

        with CaptureQueriesContext(connection) as queries:
            response = editor.api().post(ADA, {"memories": batch}, format="json")

        assert response.status_code == 201, response.content
        table = MemoryRecord._meta.db_table
        statements = [(q["sql"] or "").lstrip() for q in queries]
        assert not [sql for sql in statements if sql.upper().startswith("UPDATE") and table in sql]
        for memory in MemoryRecord.objects.filter(workspace=editor.workspace):
            job = memory_vector_as_stored(embedder().embed([memory.content])[0])
            assert memory.embedding_model == embedder_model()
            # Read back through its text form: the same float4s, as nearby doubles.
            assert memory_vector_as_stored(memory.embedding) == job

    def test_a_batch_of_exactly_1000_is_accepted(self, editor):
        batch = [new_memory(content=f"m{n}") for n in range(1000)]

        response = editor.api().post(ADA, {"memories": batch}, format="json")

        assert response.status_code == 201, response.content
        assert MemoryRecord.objects.filter(workspace=editor.workspace).count() == 1000

    def test_a_batch_of_more_than_1000_is_refused_whole(self, editor):
        before = state(editor.workspace)
        batch = [new_memory(content=f"m{n}") for n in range(1001)]

        response = editor.api().post(ADA, {"memories": batch}, format="json")

        assert "memories" in fields_of(response)
        assert state(editor.workspace) == before

    def test_a_batch_with_one_bad_item_writes_nothing_and_names_the_item(self, editor):
        factories.memory(editor.workspace, "Already here")
        before = state(editor.workspace)
        batch = [new_memory(content=f"m{n}") for n in range(5)]
        batch[3]["memoryType"] = "opinion"

        response = editor.api().post(ADA, {"memories": batch}, format="json")

        assert list(fields_of(response)) == ["memories[3].memoryType"]
        assert "1 of 5" in response.json()["error"]["message"]
        assert state(editor.workspace) == before

    def test_every_bad_item_of_a_batch_is_named(self, editor):
        batch = [new_memory(), new_memory(confidence=2), new_memory(), new_memory(content="")]

        response = editor.api().post(ADA, {"memories": batch}, format="json")

        assert set(fields_of(response)) == {"memories[1].confidence", "memories[3].content"}

    @pytest.mark.parametrize(
        "body",
        [{"memories": []}, {"memories": "not a list"}, {"memories": [new_memory(), "text"]}, []],
    )
    def test_a_malformed_batch_is_refused(self, editor, body):
        before = state(editor.workspace)

        response = editor.api().post(ADA, body, format="json")

        error_of(response, 400, "INVALID_REQUEST")
        assert state(editor.workspace) == before

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"memoryType": "opinion"}, "memoryType"),
            ({"sourceKind": "rumour"}, "sourceKind"),
            ({"confirmationStatus": "sure"}, "confirmationStatus"),
            ({"sensitivity": "secret"}, "sensitivity"),
            ({"consentPolicy": "maybe"}, "consentPolicy"),
            ({"segmentKind": "scratch"}, "segmentKind"),
            ({"lifecycleStatus": "zombie"}, "lifecycleStatus"),
            ({"confidence": 1.5}, "confidence"),
            ({"confidence": -0.1}, "confidence"),
            ({"confidence": "high"}, "confidence"),
            ({"content": ""}, "content"),
            ({"content": "   "}, "content"),
            ({"content": None}, "content"),
            ({"hitCount": -1}, "hitCount"),
            ({"createdAt": "yesterday"}, "createdAt"),
            ({"expiresAt": "soon"}, "expiresAt"),
            ({"colour": "red"}, "colour"),
            ({"memory_type": "fact"}, "memory_type"),
        ],
    )
    def test_it_refuses_a_bad_memory_naming_the_field(self, editor, changes, field):
        before = state(editor.workspace)

        response = editor.api().post(ADA, new_memory(**changes), format="json")

        assert field in fields_of(response)
        assert state(editor.workspace) == before

    def test_a_value_outside_a_vocabulary_is_refused_listing_the_valid_ones(self, editor):
        response = editor.api().post(
            ADA, new_memory(memoryType="opinion", lifecycleStatus="zombie"), format="json"
        )

        fields = fields_of(response)
        assert fields["memoryType"].startswith('"opinion" is not one of: fact, preference,')
        assert "summary" in fields["memoryType"]
        assert fields["lifecycleStatus"].startswith('"zombie" is not one of: active,')

    @pytest.mark.parametrize("missing", ["content", "memoryType", "sourceKind"])
    def test_it_refuses_a_memory_without_a_required_field(self, editor, missing):
        body = new_memory()
        del body[missing]

        response = editor.api().post(ADA, body, format="json")

        assert missing in fields_of(response)
        assert not MemoryRecord.objects.exists()

    @pytest.mark.parametrize(
        "actor_id",
        ["robot:x", "ada", "user:", ":ada", "user:" + "a" * 201, "User:ada", "user:a%00b"],
    )
    def test_it_refuses_a_malformed_actor_id(self, editor, actor_id):
        before = state(editor.workspace)

        response = editor.api().post(
            f"/v1/memory/actors/{actor_id}/memories", new_memory(), format="json"
        )

        # a control character in the path is refused before any view (portal.input_guard)
        field = "path" if "%00" in actor_id else "actorId"
        assert field in fields_of(response)
        assert state(editor.workspace) == before
        listing = editor.api().get(f"/v1/memory/actors/{actor_id}/memories")
        assert field in fields_of(listing)

    def test_an_import_carries_its_history(self, editor):
        body = new_memory(
            createdAt="2024-03-01T12:00:00Z",
            lastAccessedAt="2024-06-30T08:15:00Z",
            hitCount=17,
            expiresAt="2031-01-01T00:00:00Z",
        )

        response = editor.api().post(ADA, {"memories": [body]}, format="json")

        assert response.status_code == 201, response.content
        created = response.json()["memories"][0]
        assert created["createdAt"] == "2024-03-01T12:00:00Z"
        assert created["lastAccessedAt"] == "2024-06-30T08:15:00Z"
        assert created["hitCount"] == 17
        assert created["expiresAt"] == "2031-01-01T00:00:00Z"
        row = MemoryRecord.objects.get(pk=created["id"])
        assert row.created_at.isoformat() == "2024-03-01T12:00:00+00:00"
        assert row.hit_count == 17

    def test_without_created_at_a_memory_is_created_now(self, editor):
        start = timezone.now()

        response = editor.api().post(ADA, new_memory(), format="json")

        row = MemoryRecord.objects.get(pk=response.json()["id"])
        assert start <= row.created_at <= timezone.now()
        assert row.last_accessed_at is None

    def test_the_actor_is_created_once_and_reused(self, editor):
        editor.api().post(ADA, new_memory(), format="json")
        editor.api().post(ADA, new_memory(), format="json")

        assert list(Actor.objects.values_list("kind", "name")) == [("user", "ada")]
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 2

    def test_a_session_editor_creates_a_memory_with_a_csrf_token(self, editor):
        response = csrf_session(editor).post(f"{ADA}?workspace=team-a", new_memory(), format="json")

        assert response.status_code == 201, response.content
        assert last_event(editor.workspace).author == "user:eddie"

    def test_a_session_post_without_a_csrf_token_writes_nothing(self, editor):
        before = state(editor.workspace)

        response = editor.session().post(f"{ADA}?workspace=team-a", new_memory(), format="json")

        error_of(response, 403)
        assert state(editor.workspace) == before


@pytest.fixture
def assorted(workspace_a: Any) -> dict[str, MemoryRecord]:
    """Six memories of Ada, each differing from the first on one filterable field."""
    differences = [
        ("Base fact about Ada", {}),
        ("A preference", {"memory_type": "preference"}),
        ("From a tool", {"source_kind": "tool"}),
        ("Put aside", {"lifecycle_status": "suppressed"}),
        ("Secretive", {"sensitivity": "restricted"}),
        ("Tool output", {"segment_kind": "tool_result"}),
    ]
    now = timezone.now()
    rows = factories.memories(
        workspace_a,
        *(
            {"content": content, "created_at": now - timedelta(days=age), **fields}
            for age, (content, fields) in enumerate(differences, start=1)
        ),
    )
    factories.memories(workspace_a, {"content": "Bob's fact"}, actor_id="user:bob")
    return {row.content: row for row in rows}


class MemoryWorkspaceIntegrityTests:
    """Recall isolates by actor, the other reads by workspace: the database keeps them equal."""

    def test_a_memory_in_another_workspace_than_its_actor_is_refused(
        self, workspace_a, workspace_b
    ):
        ada = factories.actor(workspace_a, "user:ada")
        with pytest.raises(IntegrityError, match="memory_actor_in_workspace"):
            with transaction.atomic():
                MemoryRecord.objects.create(
                    workspace=workspace_b, actor=ada, content="misfiled", memory_type="fact",
                    source_kind="user", created_at=timezone.now(),
                )  # fmt: skip
                with connection.cursor() as cursor:
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    def test_an_actor_cannot_move_away_from_its_memories(self, workspace_a, workspace_b):
        factories.memory(workspace_a, "stays in team-a")
        with pytest.raises(IntegrityError, match="memory_actor_in_workspace"):
            with transaction.atomic():
                Actor.objects.filter(name="ada").update(workspace=workspace_b)
                with connection.cursor() as cursor:
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class MemoryListTests:
    def test_it_lists_the_actors_memories_newest_first(self, viewer, assorted):
        response = viewer.api().get(ADA)

        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}
        assert body["count"] == 6
        assert [m["content"] for m in body["results"]] == list(assorted)
        assert all(set(m) == MEMORY_KEYS for m in body["results"])
        assert {m["actorId"] for m in body["results"]} == {"user:ada"}

    def test_it_pages(self, viewer, assorted):
        first = viewer.api().get(ADA, {"pageSize": 4}).json()
        second = viewer.api().get(ADA, {"pageSize": 4, "page": 2}).json()

        assert first["count"] == second["count"] == 6
        assert [m["content"] for m in first["results"]] == list(assorted)[:4]
        assert [m["content"] for m in second["results"]] == list(assorted)[4:]
        assert first["previous"] is None and "page=2" in first["next"]
        assert second["next"] is None and second["previous"]

    def test_a_page_past_the_end_is_not_found(self, viewer, assorted):
        error_of(viewer.api().get(ADA, {"page": 9}), 404)

    @pytest.mark.parametrize(
        ("params", "expected"),
        [
            ({"type": "preference"}, ["A preference"]),
            ({"source": "tool"}, ["From a tool"]),
            ({"status": "suppressed"}, ["Put aside"]),
            ({"sensitivity": "restricted"}, ["Secretive"]),
            ({"segment": "tool_result"}, ["Tool output"]),
            ({"q": "TOOL"}, ["From a tool", "Tool output"]),
            (
                {"type": "fact", "source": "user", "status": "active"},
                ["Base fact about Ada", "Secretive", "Tool output"],
            ),
            ({"type": "episode"}, []),
        ],
    )
    def test_it_filters(self, viewer, assorted, params, expected):
        response = viewer.api().get(ADA, params)

        assert response.status_code == 200, response.content
        assert [m["content"] for m in response.json()["results"]] == expected

    def test_it_filters_by_creation_time(self, viewer, assorted):
        now = timezone.now()
        after = (now - timedelta(days=3, hours=12)).isoformat()
        before = (now - timedelta(days=1, hours=12)).isoformat()

        response = viewer.api().get(ADA, {"createdAfter": after, "createdBefore": before})

        assert [m["content"] for m in response.json()["results"]] == ["A preference", "From a tool"]

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ({"type": "opinion"}, "type"),
            ({"source": "rumour"}, "source"),
            ({"status": "zombie"}, "status"),
            ({"sensitivity": "secret"}, "sensitivity"),
            ({"segment": "scratch"}, "segment"),
            ({"createdAfter": "last tuesday"}, "createdAfter"),
            ({"createdBefore": "2024-13-01"}, "createdBefore"),
        ],
    )
    def test_a_bad_filter_value_is_a_400_naming_the_filter(self, viewer, assorted, params, field):
        assert field in fields_of(viewer.api().get(ADA, params))

    def test_a_filter_value_outside_its_choices_lists_them(self, viewer, assorted):
        fields = fields_of(viewer.api().get(ADA, {"type": "opinion"}))

        assert fields["type"] == (
            '"opinion" is not one of: fact, preference, decision, instruction, episode,'
            " summary, insight, entity."
        )

    def test_an_actor_without_memories_is_not_found(self, viewer, assorted):
        error_of(viewer.api().get("/v1/memory/actors/user:zed/memories"), 404, "NOT_FOUND")

    def test_a_malformed_actor_id_is_a_400(self, viewer):
        assert "actorId" in fields_of(viewer.api().get("/v1/memory/actors/robot:x/memories"))

    def test_a_session_viewer_names_the_workspace(self, viewer, assorted):
        response = viewer.session().get(ADA, {"workspace": "team-a"})

        assert response.status_code == 200
        assert response.json()["count"] == 6

    @pytest.mark.parametrize("how_many", [3, 40])
    def test_it_lists_in_a_fixed_number_of_queries(
        self, viewer, workspace_a, how_many, django_assert_num_queries
    ):
        factories.memories(workspace_a, *({"content": f"m{n}"} for n in range(how_many)))
        client = viewer.api()

        # token (with its workspace), actor, count, page (actor joined)
        with django_assert_num_queries(4):
            response = client.get(ADA, {"type": "fact", "q": "m"})

        assert response.json()["count"] == how_many


class MemoryDetailTests:
    def test_it_shows_one_memory(self, viewer, assorted):
        memory = assorted["A preference"]

        response = viewer.api().get(memory_url(memory))

        assert response.status_code == 200
        body = response.json()
        assert set(body) == MEMORY_KEYS
        assert body["id"] == str(memory.pk)
        assert body["memoryType"] == "preference"
        assert body == next(
            m for m in viewer.api().get(ADA).json()["results"] if m["id"] == str(memory.pk)
        )

    @pytest.mark.parametrize("pk", ["999999", "abc", "-1", "1.5", "99999999999999999999", "%20"])
    def test_an_unknown_or_malformed_id_is_not_found(self, viewer, assorted, pk):
        error_of(viewer.api().get(memory_url(pk)), 404, "NOT_FOUND")


class MemoryUpdateTests:
    def test_editing_the_content_re_embeds_and_recounts(self, editor, assorted):
        memory = MemoryRecord.objects.get(pk=assorted["A preference"].pk)
        old_embedding, old_tokens = list(memory.embedding), memory.token_count
        text = "Ada now wants every release summary as a long, detailed bullet list."

        response = editor.api().patch(memory_url(memory), {"content": text}, format="json")

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["content"] == text
        assert body["memoryType"] == "preference"  # untouched
        memory.refresh_from_db()
        assert list(memory.embedding) != old_embedding
        assert list(memory.embedding) == pytest.approx(embedder().embed([text])[0], abs=1e-6)
        assert body["tokenCount"] == memory.token_count > old_tokens
        event = last_event(editor.workspace)
        assert event.payload == {
            "action": "updated",
            "ids": [str(memory.pk)],
            "fields": ["content"],
        }

    def test_editing_other_fields_keeps_the_embedding(self, editor, assorted):
        memory = MemoryRecord.objects.get(pk=assorted["A preference"].pk)
        old_embedding, old_tokens = list(memory.embedding), memory.token_count

        response = editor.api().patch(
            memory_url(memory), {"confidence": 0.3, "sensitivity": "public"}, format="json"
        )

        assert response.status_code == 200, response.content
        assert response.json()["confidence"] == 0.3
        assert response.json()["sensitivity"] == "public"
        memory.refresh_from_db()
        assert list(memory.embedding) == old_embedding
        assert memory.token_count == old_tokens
        assert memory.confirmation_status == "user_confirmed"  # no default slipped in

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"createdAt": "2020-01-01T00:00:00Z"}, "createdAt"),
            ({"hitCount": 99}, "hitCount"),
            ({"lastAccessedAt": "2020-01-01T00:00:00Z"}, "lastAccessedAt"),
            ({"confidence": 1.5}, "confidence"),
            ({"memoryType": "opinion"}, "memoryType"),
            ({"content": ""}, "content"),
            ({"colour": "red"}, "colour"),
        ],
    )
    def test_it_refuses_a_bad_edit_and_changes_nothing(self, editor, assorted, body, field):
        before = state(editor.workspace)

        response = editor.api().patch(memory_url(assorted["A preference"]), body, format="json")

        assert field in fields_of(response)
        assert state(editor.workspace) == before

    def test_a_body_that_is_not_an_object_is_refused(self, editor, assorted):
        response = editor.api().patch(memory_url(assorted["A preference"]), ["x"], format="json")

        assert "body" in fields_of(response)


class MemoryStatusTests:
    def test_suppress_then_restore(self, editor, assorted):
        memory = assorted["Base fact about Ada"]

        suppressed = editor.api().post(memory_url(memory, "suppress"))
        assert suppressed.status_code == 200, suppressed.content
        assert suppressed.json()["lifecycleStatus"] == "suppressed"
        memory.refresh_from_db()
        assert memory.lifecycle_status == "suppressed"
        assert last_event(editor.workspace).payload["action"] == "suppressed"

        restored = editor.api().post(memory_url(memory, "restore"))
        assert restored.status_code == 200, restored.content
        assert restored.json()["lifecycleStatus"] == "active"
        memory.refresh_from_db()
        assert memory.lifecycle_status == "active"
        assert last_event(editor.workspace).payload["action"] == "restored"

    def test_a_suppression_keeps_its_reason_in_the_event_and_the_event_page(self, editor, assorted):
        memory = assorted["Base fact about Ada"]

        response = editor.api().post(
            memory_url(memory, "suppress"), {"reason": "  Ada asked us to forget it.  "},
            format="json",
        )  # fmt: skip

        assert response.status_code == 200, response.content
        event = last_event(editor.workspace)
        assert event.payload["action"] == "suppressed"
        assert event.payload["reason"] == "Ada asked us to forget it."
        html = editor.session().get(f"/w/team-a/audit/{event.pk}/").content.decode()
        assert "Ada asked us to forget it." in html

    def test_a_suppression_without_a_reason_records_none(self, editor, assorted):
        memory = assorted["Base fact about Ada"]

        response = editor.api().post(memory_url(memory, "suppress"), {}, format="json")

        assert response.status_code == 200, response.content
        assert "reason" not in last_event(editor.workspace).payload

    def test_a_too_long_reason_is_refused_and_nothing_changes(self, editor, assorted):
        memory = assorted["Base fact about Ada"]
        before = state(editor.workspace)

        response = editor.api().post(
            memory_url(memory, "suppress"), {"reason": "x" * 501}, format="json"
        )

        assert "reason" in fields_of(response)
        assert state(editor.workspace) == before

    def test_suppressing_twice_records_one_event(self, editor, assorted):
        memory = assorted["Base fact about Ada"]
        editor.api().post(memory_url(memory, "suppress"))
        events = AuditEvent.objects.count()

        response = editor.api().post(memory_url(memory, "suppress"))

        assert response.status_code == 200
        assert AuditEvent.objects.count() == events


class MemoryDeleteTests:
    def test_it_deletes_a_memory(self, editor, assorted):
        memory = assorted["A preference"]

        response = editor.api().delete(memory_url(memory))

        assert response.status_code == 204
        assert not MemoryRecord.objects.filter(pk=memory.pk).exists()
        assert MemoryRecord.objects.filter(workspace=editor.workspace).count() == 6
        assert last_event(editor.workspace).payload == {
            "action": "deleted", "ids": [str(memory.pk)], "fields": [],
        }  # fmt: skip
        error_of(editor.api().get(memory_url(memory)), 404)


def write_calls(memory: MemoryRecord) -> list[tuple[str, str, Any]]:
    return [
        ("post", ADA, new_memory()),
        ("post", ADA, {"memories": [new_memory()]}),
        ("patch", memory_url(memory), {"content": "changed"}),
        ("delete", memory_url(memory), None),
        ("post", memory_url(memory, "suppress"), None),
        ("post", memory_url(memory, "restore"), None),
    ]


class MemoryAccessTests:
    def test_a_viewer_cannot_write(self, viewer, assorted):
        before = state(viewer.workspace)
        client = viewer.api()

        for method, url, body in write_calls(assorted["Put aside"]):
            response = getattr(client, method)(url, body, format="json")
            error_of(response, 403, "PERMISSION_DENIED")

        assert state(viewer.workspace) == before

    def test_an_operator_may_write(self, operator, assorted):
        response = operator.api().patch(
            memory_url(assorted["Put aside"]), {"confidence": 0.5}, format="json"
        )

        assert response.status_code == 200

    def test_an_outsider_gets_404_on_every_memory_endpoint(self, outsider, assorted):
        memory = assorted["Put aside"]
        before = state(assorted["Put aside"].workspace)
        token = outsider.api()
        session = csrf_session(outsider)
        calls = [
            ("get", f"{ADA}?workspace=team-a", None),
            ("post", f"{ADA}?workspace=team-a", new_memory()),
            ("post", f"{ADA}?workspace=team-a", {"memories": [new_memory()]}),
            ("get", memory_url(memory), None),
            ("patch", memory_url(memory), {"content": "changed"}),
            ("delete", memory_url(memory), None),
            ("post", memory_url(memory, "suppress"), None),
            ("post", memory_url(memory, "restore"), None),
            ("post", memory_url(memory, "reactivate"), None),
        ]

        for client in (token, session):
            for method, url, body in calls:
                response = getattr(client, method)(url, body, format="json")
                error_of(response, 404, "NOT_FOUND")
        # A token names its own workspace: there, Ada is another person with no memories.
        error_of(token.get(ADA), 404, "NOT_FOUND")

        assert state(memory.workspace) == before
        assert not MemoryRecord.objects.filter(workspace=outsider.workspace).exists()

    def test_an_outsiders_own_user_ada_is_a_different_actor(self, outsider, assorted):
        response = outsider.api().post(ADA, new_memory(content="Workspace B's Ada"), format="json")

        assert response.status_code == 201
        listed = outsider.api().get(ADA).json()["results"]
        assert [m["content"] for m in listed] == ["Workspace B's Ada"]
        assert MemoryRecord.objects.get(pk=response.json()["id"]).workspace == outsider.workspace

    def test_an_anonymous_caller_is_refused(self, client, assorted):
        response = client.get(f"{ADA}?workspace=team-a")

        assert response.status_code in (401, 403)
        assert "error" in response.json()


class MemoryStatusRulesTests:
    @pytest.mark.parametrize("status", ["stale", "expired", "disabled"])
    def test_a_memory_suppressed_and_restored_gets_back_the_status_it_had(self, editor, status):
        """An editor cannot make a stale or expired memory active (operators reactivate it)
        by suppressing and restoring it; its retention clock is kept."""
        from tests.recall import factories

        since = timezone.now() - timedelta(days=3)
        memory = factories.memory(editor.workspace, "gone", lifecycle_status=status)
        MemoryRecord.objects.filter(pk=memory.pk).update(
            stale_since=since if status == "stale" else None
        )

        suppressed = editor.api().post(memory_url(memory, "suppress"))
        assert suppressed.json()["lifecycleStatus"] == "suppressed", suppressed.content
        assert last_event(editor.workspace).payload["previousStatus"] == status
        restored = editor.api().post(memory_url(memory, "restore"))

        assert restored.status_code == 200, restored.content
        assert restored.json()["lifecycleStatus"] == status
        memory.refresh_from_db()
        assert (memory.lifecycle_status, memory.suppressed_from) == (status, "")
        assert memory.stale_since == (since if status == "stale" else None)
        payload = last_event(editor.workspace).payload
        assert (payload["action"], payload["restoredTo"]) == ("restored", status)

    def test_a_patched_suppression_is_undone_the_same_way(self, editor):
        from tests.recall import factories

        memory = factories.memory(editor.workspace, "gone stale", lifecycle_status="stale")
        for status in ("suppressed", "active"):
            response = editor.api().patch(
                memory_url(memory), {"lifecycleStatus": status}, format="json"
            )
            assert response.status_code == 200, response.content
        memory.refresh_from_db()
        assert memory.lifecycle_status == "stale" and memory.stale_since is not None

    def test_an_active_memory_suppressed_and_restored_is_active_and_notes_nothing(
        self, editor, assorted
    ):
        memory = assorted["Base fact about Ada"]
        editor.api().post(memory_url(memory, "suppress"))
        assert "previousStatus" not in last_event(editor.workspace).payload
        editor.api().post(memory_url(memory, "restore"))
        memory.refresh_from_db()
        assert (memory.lifecycle_status, memory.suppressed_from, memory.stale_since) == (
            "active", "", None,
        )  # fmt: skip
        assert "restoredTo" not in last_event(editor.workspace).payload

    def test_only_a_suppressed_memory_can_be_restored(self, editor):
        from tests.recall import factories

        memory = factories.memory(editor.workspace, "gone stale", lifecycle_status="stale")

        response = editor.api().post(f"/v1/memory/memories/{memory.pk}/restore")

        assert response.status_code == 409, response.content
        memory.refresh_from_db()
        assert memory.lifecycle_status == "stale"

    def test_a_boolean_confidence_is_refused(self, editor):
        response = editor.api().post(
            "/v1/memory/actors/user:ada/memories",
            {"content": "x", "memoryType": "fact", "sourceKind": "user", "confidence": True},
            format="json",
        )

        assert response.status_code == 400, response.content
        assert "confidence" in response.json()["error"]["details"]["fields"]


class MemoryEditKeepsOtherColumnsTests:
    def test_an_edit_does_not_undo_hits_recorded_meanwhile(self, editor):
        from recall.models import MemoryRecord
        from recall.services import memory_update
        from tests.recall import factories

        memory = factories.memory(editor.workspace, "before")
        stale_copy = MemoryRecord.objects.get(pk=memory.pk)
        MemoryRecord.objects.filter(pk=memory.pk).update(hit_count=5)

        memory_update(memory=stale_copy, changes={"content": "after"}, author="user:eddie")

        memory.refresh_from_db()
        assert (memory.content, memory.hit_count) == ("after", 5)

    def test_patch_cannot_reactivate_an_expired_memory(self, editor):
        from tests.recall import factories

        memory = factories.memory(editor.workspace, "old", lifecycle_status="expired")

        response = editor.api().patch(
            f"/v1/memory/memories/{memory.pk}", {"lifecycleStatus": "active"}, format="json"
        )

        assert response.status_code == 409, response.content
        memory.refresh_from_db()
        assert memory.lifecycle_status == "expired"

    def test_an_empty_patch_writes_no_audit_event(self, editor):
        from audit.models import AuditEvent
        from tests.recall import factories

        memory = factories.memory(editor.workspace, "same")
        before = AuditEvent.objects.count()

        response = editor.api().patch(f"/v1/memory/memories/{memory.pk}", {}, format="json")

        assert response.status_code == 200
        assert AuditEvent.objects.count() == before
