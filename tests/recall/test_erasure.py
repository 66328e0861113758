"""Erasure of an actor (a data-subject request): ``POST /v1/memory/actors/{id}/erase`` and the
portal's confirmation page. Afterwards no endpoint, page or export shows the content or the
actor's stored queries (every GET route of the URL conf, and so of the OpenAPI schema, is
crawled for a canary string planted in both), the actor is no longer suggested, recall returns
nothing, nothing can be added back for the actor, and the audit chain still verifies.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from audit.models import AuditEvent, EventType, Injection, StoredQuery
from audit.services import audit_chain_verify
from chat.models import Session
from maintenance import archives, services
from maintenance.models import ArchiveChunk, MaintenanceRun
from policies.services import workspace_store_queries_set
from recall.models import Actor, FunnelCache, MemoryChange, MemoryRecord
from tests.chat.helpers import started, turn
from tests.helpers import recall
from tests.maintenance.helpers import ago
from tests.module_personas import module_scoped
from tests.recall import factories
from tests.recall.test_api_memories import new_memory

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "workload_a"
)

pytestmark = pytest.mark.django_db

CANARY = "CANARY-q7Zx"
# What Ada asked, with the canary in it: the workspace stores queries.
ADA_QUERY = f"what is {CANARY}'s first project"
ERASE = "/v1/memory/actors/user:ada/erase"


def client_for(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


@pytest.fixture
def ada(operator: Any, editor: Any, workload_a: Any) -> dict[str, Any]:
    """Ada's memories (content with the canary) recalled with a query holding the canary
    (stored: the workspace stores queries), cached and partly archived by a retention run;
    Bob's memories beside them, recalled too."""
    workspace = workspace_store_queries_set(
        workspace=operator.workspace, enabled=True, author="system:test"
    )
    rows = factories.memories(
        workspace,
        *({"content": f"release summary preferences {CANARY} {n}"} for n in range(4)),
    )
    stale = factories.memories(
        workspace,
        {
            "content": f"old release summary {CANARY}",
            "lifecycle_status": "stale",
            "stale_since": ago(days=40),
        },
    )
    bob = factories.memories(
        workspace,
        {"content": "release summary preferences of bob"},
        {
            "content": "old release summary of bob",
            "lifecycle_status": "stale",
            "stale_since": ago(days=40),
        },
        actor_id="user:bob",
    )
    recall(editor, workload_a, query=ADA_QUERY)
    recall(editor, workload_a, actor="user:bob", query="what bob asked")
    assert StoredQuery.objects.filter(actor_id="user:ada").count() == 1
    # A chat session of Ada's whose turn holds the canary (its prompt holds her memories);
    # its two recalls keep their queries too.
    session = started(editor, workload_a)
    turn(editor, session["id"], ("user", f"release summary {CANARY}"))
    turn(editor, session["id"], ("assistant", "noted"), ("user", "release summary again"))
    assert StoredQuery.objects.filter(actor_id="user:ada").count() == 3
    retention = services.maintenance_start(
        workspace=workspace, sweep="retention", mode="execute", author="system:test", confirm=2
    )
    assert retention.status == "succeeded", retention.error
    assert ArchiveChunk.objects.filter(run=retention).get().count == 2
    FunnelCache.objects.create(
        actor=Actor.objects.get(workspace=workspace, name="ada"),
        filter_key="k",
        memory_version=0,
        counts={},
        rejected=[],
        computed_at=ago(days=0),
    )
    return {
        "ids": sorted(m.pk for m in rows + stale),
        "bob": bob,
        "retention": retention,
        "session": session["id"],
    }


def erase(persona: Any, **body: Any) -> Any:
    return persona.api().post(ERASE, body, format="json")


class EraseApiTests:
    def test_it_erases_every_memory_its_caches_and_archive_lines(self, operator, ada):
        response = erase(operator, expectedCount=4)

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["count"] == 4 and body["archiveLinesRemoved"] == 1
        assert body["queriesRemoved"] == 3
        assert body["sessionsRemoved"] == 1 and body["turnsRemoved"] == 3
        assert not Session.objects.filter(actor__name="ada").exists()
        assert body["actorId"] == "user:ada" and body["alreadyErased"] is False
        actor = Actor.objects.get(workspace=operator.workspace, name="ada")
        assert actor.erased_at is not None and actor.erased_by == "token:olga-token"
        assert not MemoryRecord.objects.filter(actor=actor).exists()
        assert not FunnelCache.objects.filter(actor=actor).exists()
        assert not MemoryChange.objects.filter(actor=actor).exists()
        [chunk] = ArchiveChunk.objects.filter(run=ada["retention"])
        assert chunk.count == 1 and CANARY not in chunk.lines and "of bob" in chunk.lines
        event = AuditEvent.objects.get(pk=body["eventId"])
        assert event.type == EventType.MEMORY_ERASED and event.actor_id == "user:ada"
        assert event.payload["count"] == 4 and event.payload["queriesRemoved"] == 3
        assert event.payload["sessionsRemoved"] == 1 and event.payload["turnsRemoved"] == 3
        page = client_for(operator).get(f"/w/team-a/audit/{event.pk}/").content.decode()
        assert "Sessions removed" in page
        assert not StoredQuery.objects.filter(actor_id="user:ada").exists()
        assert StoredQuery.objects.get(actor_id="user:bob").text == "what bob asked"
        # the four left (the stale one was deleted, and archived, by the retention run)
        assert sorted(event.payload["ids"]) == sorted(str(pk) for pk in ada["ids"][:4])
        assert CANARY not in str(event.payload)
        assert audit_chain_verify(workspace=operator.workspace).ok
        # Bob is untouched.
        assert MemoryRecord.objects.filter(pk=ada["bob"][0].pk).exists()

    def test_recall_returns_nothing_and_nothing_can_be_added_back(
        self, operator, editor, workload_a, ada
    ):
        erase(operator)

        envelope = recall(editor, workload_a)
        assert envelope["entries"] == [] and envelope["truncatedRefs"] == []
        response = editor.api().post(
            "/v1/memory/actors/user:ada/memories", new_memory(content="back again"), format="json"
        )
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "ACTOR_ERASED"
        assert not MemoryRecord.objects.filter(actor__name="ada").exists()

    def test_restoring_an_archive_brings_back_only_the_others(self, operator, ada):
        erase(operator)
        bob_archived = ada["bob"][1].pk

        restored = archives.maintenance_archive_restore(run=ada["retention"], author="system:test")

        assert MemoryRecord.objects.filter(pk=bob_archived).exists()
        assert not MemoryRecord.objects.filter(actor__name="ada").exists()
        assert restored is not None

    def test_a_second_erasure_changes_and_records_nothing(self, operator, ada):
        first = erase(operator).json()
        events = AuditEvent.objects.count()

        again = erase(operator)

        assert again.status_code == 200
        assert again.json()["alreadyErased"] is True and again.json()["count"] == 0
        assert again.json()["erasedAt"] == first["erasedAt"]
        assert AuditEvent.objects.count() == events

    def test_a_count_that_changed_erases_nothing(self, operator, ada):
        response = erase(operator, expectedCount=5)

        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "COUNT_CHANGED" and error["details"]["count"] == 4
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 4
        assert not AuditEvent.objects.filter(type=EventType.MEMORY_ERASED).exists()

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_only_operators_erase(self, request, who, ada):
        response = erase(request.getfixturevalue(who))

        assert response.status_code == 403
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 4

    def test_an_outsider_and_an_unknown_actor_get_404(self, operator, outsider, ada):
        assert outsider.api().post(ERASE, {}, format="json").status_code == 404
        unknown = operator.api().post("/v1/memory/actors/user:nobody/erase", {}, format="json")
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "NOT_FOUND"
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 4

    @pytest.mark.parametrize(
        "body", [{"expectedCount": "five"}, {"expectedCount": -1}, {"surprise": 1}, [1]]
    )
    def test_bad_input_is_a_400_and_erases_nothing(self, operator, ada, body):
        response = operator.api().post(ERASE, body, format="json")

        assert response.status_code == 400, response.content
        assert set(response.json()["error"]) == {"code", "message", "details"}
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 4


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        route = str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if not route.startswith("admin"):
                found += _routes(pattern.url_patterns, prefix + route)
        elif isinstance(pattern, URLPattern) and not route.startswith("^"):
            found.append(prefix + route)
    return found


def _crawl(client: Client, values: dict[str, list[str]], query: str) -> dict[str, int]:
    """GET every route with every combination of the values: {path: status}, and the paths
    whose response holds the canary (key ``"!" + path``)."""
    seen: dict[str, int] = {}
    for route in _routes(get_resolver().url_patterns):
        if route.startswith(("logout", "v1/docs")):
            continue
        names = re.findall(r"<(?:\w+:)?(\w+)>", route)
        for combo in itertools.product(*(values[name] for name in names)):
            path = route
            for name, value in zip(names, combo, strict=True):
                path = re.sub(rf"<(?:\w+:)?{name}>", value, path, count=1)
            response = client.get("/" + path + query)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            seen[path] = response.status_code
            if CANARY.encode() in body:
                seen["!" + path] = response.status_code
    return seen


def _schema_get_paths(client: Client) -> set[str]:
    """The OpenAPI schema's GET operations, as URL-conf routes would spell them."""
    schema = client.get("/v1/schema/", HTTP_ACCEPT="application/json").json()
    return {
        re.sub(r"\{\w+\}", "{}", path.lstrip("/"))
        for path, operations in schema["paths"].items()
        if "get" in operations
    }


def _spelled(route: str) -> str:
    return re.sub(r"<(?:\w+:)?\w+>", "{}", route)


class NothingShowsTheContentTests:
    def test_no_get_route_api_page_or_export_shows_it(self, operator, ada):
        workspace = operator.workspace
        values: dict[str, list[str]] = {
            "slug": [workspace.slug],
            "workload_id": [str(w.pk) for w in workspace.workloads.all()],
            "version": ["1"],
            "event_id": [str(pk) for pk in workspace.audit_events.values_list("pk", flat=True)],
            "memory_id": [str(pk) for pk in ada["ids"]] + [str(ada["bob"][0].pk)],
            "actor_id": ["user:ada"],
            "run_id": [str(pk) for pk in MaintenanceRun.objects.values_list("pk", flat=True)],
            "sweep": ["retention"],
            "session_id": [ada["session"]],
            "turn": ["1", "3"],
            "token_id": [str(pk) for pk in workspace.api_tokens.values_list("pk", flat=True)],
            "member_id": [str(pk) for pk in workspace.memberships.values_list("pk", flat=True)],
            "username": [m.user.username for m in workspace.memberships.select_related("user")],
            "compaction_run_id": ["1"],
        }
        client = client_for(operator)
        query = f"?actor=user:ada&workspace={workspace.slug}&memory={ada['ids'][0]}"
        # The crawl finds the content before the erasure: pages, the API and the archive; and
        # the stored query: the event's page, the audit API and both exports.
        before = {path for path in _crawl(client, values, query) if path.startswith("!")}
        assert any("/archive" in path for path in before), before
        assert any(path.startswith("!v1/memory/") for path in before), before
        assert any(path.startswith("!w/") for path in before), before
        assert "!v1/audit/events/" in before, before
        assert any(path.startswith("!v1/audit/events/") and path[-1].isdigit() for path in before)
        assert any(path.endswith("/audit/export.csv") for path in before), before
        assert any(path.endswith("/audit/export.jsonl") for path in before), before
        assert f"!v1/sessions/{ada['session']}/turns/1/prompt" in before, before

        erase(operator)
        values["event_id"] = [str(pk) for pk in workspace.audit_events.values_list("pk", flat=True)]
        after = _crawl(client, values, query)

        assert len(after) > 60
        assert [path for path in after if path.startswith("!")] == []
        assert [path for path, status in after.items() if status >= 500] == []
        assert audit_chain_verify(workspace=workspace).ok
        # Ids stay in the trail's index; a surviving memory's injections still answer.
        assert Injection.objects.filter(memory_id=ada["ids"][0]).exists()
        bob = ada["bob"][0].pk
        assert client.get(f"/v1/memory/memories/{bob}/injections").status_code == 200

    def test_the_crawl_covers_every_get_operation_of_the_schema(self, operator):
        crawled = {_spelled(route) for route in _routes(get_resolver().url_patterns)}

        missing = _schema_get_paths(client_for(operator)) - crawled

        assert missing == set()

    def test_the_erased_actor_is_no_longer_suggested(self, operator, editor, ada):
        url = reverse("recall:actor-options", args=[operator.workspace.slug])
        client = client_for(editor)
        offered = '<option value="user:ada">'
        assert offered in client.get(url, {"q": "user:"}).content.decode()

        erase(operator)

        suggested = client.get(url, {"q": "user:"}).content.decode()
        assert offered not in suggested and '<option value="user:bob">' in suggested
        memories = reverse("recall:memories", args=[operator.workspace.slug])
        assert offered not in client.get(memories).content.decode()


class ErasePageTests:
    def url(self, workspace: Any) -> str:
        return reverse("recall:actor-erase", args=[workspace.slug]) + "?actor=user:ada"

    def test_the_operator_sees_the_count_and_must_type_it(self, operator, ada):
        client = client_for(operator)
        page = client.get(self.url(operator.workspace))
        assert page.status_code == 200
        assert "Delete all 4 memories of user:ada" in page.content.decode()
        text = " ".join(re.sub(r"<[^>]+>", " ", page.content.decode()).split())
        assert "This cannot be undone. No revert, restore or archive brings" in text

        wrong = client.post(self.url(operator.workspace), {"actor": "user:ada", "confirm": "3"})

        assert wrong.status_code == 422
        assert "Type 4, the number of memories to erase" in wrong.content.decode()
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 4

        done = client.post(
            self.url(operator.workspace), {"actor": "user:ada", "confirm": "4"}, follow=True
        )

        assert done.redirect_chain[-1][0].endswith("?actor=user%3Aada")
        html = done.content.decode()
        assert "Erased user:ada: 4 memories deleted, 1 archived lines removed" in html
        assert "Erased on" in html and CANARY not in html
        assert not MemoryRecord.objects.filter(actor__name="ada").exists()

    def test_the_memory_list_offers_it_to_operators_only(self, operator, editor, ada):
        listing = reverse("recall:memories", args=[operator.workspace.slug]) + "?actor=user:ada"
        link = "Erase this actor"
        assert link in client_for(operator).get(listing).content.decode()
        assert link not in client_for(editor).get(listing).content.decode()

    @pytest.mark.parametrize("who", ["editor", "viewer"])
    def test_others_get_403_and_nothing_changes(self, request, who, ada):
        persona = request.getfixturevalue(who)
        client = client_for(persona)
        assert client.get(self.url(persona.workspace)).status_code == 403
        post = client.post(self.url(persona.workspace), {"actor": "user:ada", "confirm": "4"})
        assert post.status_code == 403
        assert MemoryRecord.objects.filter(actor__name="ada").count() == 4

    def test_an_unknown_actor_is_404(self, operator):
        url = reverse("recall:actor-erase", args=[operator.workspace.slug]) + "?actor=user:zed"
        assert client_for(operator).get(url).status_code == 404
