"""The audit API: listing and filtering events, one event, and how callers name the workspace."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction

from audit.models import AuditEvent, EventType
from audit.services import audit_event_record
from policies.services import workload_policy_save
from tests.helpers import database_owner, error_of
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "viewer", "workload_a"
)

EVENTS_URL = "/v1/audit/events/"
EVENT_KEYS = {
    "id",
    "type",
    "occurredAt",
    "workspace",
    "author",
    "workloadId",
    "environment",
    "actorId",
    "payload",
    "query",
    "prevHash",
    "hash",
    "lane",
}


def assembled(workspace: Any, *, actor: str, workload: Any, environment: str) -> AuditEvent:
    with transaction.atomic():
        return audit_event_record(
            workspace=workspace,
            type=EventType.ASSEMBLED,
            author="token:agent",
            workload_id=workload.id,
            environment=environment,
            actor_id=actor,
            payload={"envelopeId": "env-1", "reused": False, "tokenCounts": {"memory": 120}},
        )


@pytest.fixture
def trail(operator: Any, viewer: Any, workload_a: Any) -> dict[str, AuditEvent]:
    """Workspace A's whole trail: floor v1, the personas' tokens issued, workload created, a
    policy save, two recalls."""
    workload_policy_save(
        workload=workload_a,
        environment="prod",
        document={"confidenceMin": 0.5},
        author="user:eddie",
        comment="Confident only",
    )
    ada = assembled(operator.workspace, actor="user:ada", workload=workload_a, environment="prod")
    grace = assembled(
        operator.workspace, actor="user:grace", workload=workload_a, environment="staging"
    )
    named = {
        EventType.WORKSPACE_POLICY_SET: "floor",
        EventType.WORKLOAD_CREATED: "created",
        EventType.WORKLOAD_POLICY_SET: "policy",
    }
    trail = {"ada": ada, "grace": grace}
    for event in AuditEvent.objects.filter(workspace=operator.workspace).exclude(
        pk__in=[ada.pk, grace.pk]
    ):
        name = named.get(event.type) or f"{event.type}:{event.payload['name']}"
        trail[name] = event
    assert len(trail) == 7  # floor, 2 tokens, created, policy, 2 recalls
    return trail


def newest_first(trail: dict[str, AuditEvent]) -> list[int]:
    return sorted((e.pk for e in trail.values()), reverse=True)


def ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.content
    return [event["id"] for event in response.json()["results"]]


class AuditEventListTests:
    def test_it_lists_the_workspace_events_newest_first(self, viewer, trail, workload_b):
        response = viewer.api().get(EVENTS_URL)

        assert response.status_code == 200
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}
        assert body["count"] == len(trail)
        assert ids(response) == newest_first(trail)
        assert all(set(event) == EVENT_KEYS for event in body["results"])
        assert {event["workspace"] for event in body["results"]} == {"team-a"}

    def test_a_policy_event_carries_version_before_after_and_comment(
        self, viewer, trail, workload_a
    ):
        event = (
            viewer.api()
            .get(EVENTS_URL, {"type": "context.workload_policy_set"})
            .json()["results"][0]
        )

        assert event["type"] == "context.workload_policy_set"
        assert event["author"] == "user:eddie"
        assert event["workloadId"] == str(workload_a.id)
        assert event["environment"] == "prod"
        assert event["actorId"] is None
        assert event["payload"]["version"] == 1
        assert event["payload"]["before"] is None
        assert event["payload"]["after"] == {"confidenceMin": 0.5}
        assert event["payload"]["comment"] == "Confident only"
        assert event["prevHash"] == trail["created"].hash
        assert event["hash"] == trail["policy"].hash

    def test_an_event_without_workload_or_environment_shows_nulls(self, viewer, trail):
        response = viewer.api().get(EVENTS_URL, {"type": "context.workspace_policy_set"})

        [event] = response.json()["results"]
        assert (event["workloadId"], event["environment"], event["actorId"]) == (None, None, None)
        assert event["prevHash"] == "0" * 64

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [
            ({"type": "context.assembled"}, ["grace", "ada"]),
            ({"type": "workload.created"}, ["created"]),
            ({"actor": "user:ada"}, ["ada"]),
            ({"environment": "staging"}, ["grace"]),
            ({"environment": "prod"}, ["ada", "policy"]),
            ({"author": "user:eddie"}, ["policy"]),
            ({"author": "token:agent", "actor": "user:grace"}, ["grace"]),
            ({"actor": "user:nobody"}, []),
        ],
    )
    def test_it_filters_events(self, viewer, trail, filters, expected):
        response = viewer.api().get(EVENTS_URL, filters)

        assert ids(response) == [trail[name].pk for name in expected]
        assert response.json()["count"] == len(expected)

    def test_it_filters_by_workload(self, viewer, trail, workload_a):
        response = viewer.api().get(EVENTS_URL, {"workload": str(workload_a.id)})

        assert ids(response) == [trail[n].pk for n in ("grace", "ada", "policy", "created")]

    def test_it_filters_by_time_range(self, viewer, trail):
        ada = trail["ada"]
        with database_owner():  # the application may not change audit rows
            AuditEvent.objects.filter(pk=trail["floor"].pk).update(
                occurred_at=ada.occurred_at - timedelta(days=10)
            )
            AuditEvent.objects.filter(pk=trail["grace"].pk).update(
                occurred_at=ada.occurred_at + timedelta(days=10)
            )
        client = viewer.api()

        since = client.get(EVENTS_URL, {"since": (ada.occurred_at - timedelta(days=1)).isoformat()})
        until = client.get(EVENTS_URL, {"until": (ada.occurred_at - timedelta(days=1)).isoformat()})
        window = client.get(
            EVENTS_URL,
            {
                "since": (ada.occurred_at - timedelta(seconds=1)).isoformat(),
                "until": (ada.occurred_at + timedelta(seconds=1)).isoformat(),
            },
        )

        assert trail["floor"].pk not in ids(since)
        assert trail["grace"].pk in ids(since)
        assert ids(until) == [trail["floor"].pk]
        assert trail["ada"].pk in ids(window)
        assert {trail["floor"].pk, trail["grace"].pk}.isdisjoint(ids(window))

    @pytest.mark.parametrize(
        ("filters", "field"),
        [
            ({"type": "context.bogus"}, "type"),
            ({"workload": "not-a-uuid"}, "workload"),
            ({"since": "last tuesday"}, "since"),
            ({"until": "2026-13-45"}, "until"),
        ],
    )
    def test_a_bad_filter_value_is_a_400_naming_the_filter(self, viewer, trail, filters, field):
        error = error_of(viewer.api().get(EVENTS_URL, filters), 400, "INVALID_REQUEST")

        assert field in error["details"]["fields"]

    def test_it_pages_the_events(self, viewer, trail):
        body = viewer.api().get(EVENTS_URL, {"pageSize": 2, "page": 4}).json()

        assert body["count"] == len(trail) == 7
        assert [e["id"] for e in body["results"]] == [trail["floor"].pk]
        assert body["next"] is None

    def test_it_lists_in_a_fixed_number_of_queries_however_many_events(
        self, viewer, trail, workload_a, django_assert_num_queries
    ):
        for n in range(10):
            assembled(viewer.workspace, actor=f"user:{n}", workload=workload_a, environment="dev")
        client = viewer.api()

        # token, count, page (workspace joined in)
        with django_assert_num_queries(3):
            response = client.get(EVENTS_URL)

        assert response.json()["count"] == len(trail) + 10

    def test_a_session_lists_in_a_fixed_number_of_queries(
        self, viewer, trail, django_assert_num_queries
    ):
        client = viewer.session()

        # session, user, the user's workspaces as the row-level security scope, workspace with
        # the caller's role, count, page
        with django_assert_num_queries(6):
            client.get(EVENTS_URL, {"workspace": "team-a"})


class AuditEventDetailTests:
    def test_it_shows_one_event(self, viewer, trail):
        response = viewer.api().get(f"/v1/audit/events/{trail['ada'].pk}")

        assert response.status_code == 200
        event = response.json()
        assert set(event) == EVENT_KEYS
        assert event["id"] == trail["ada"].pk
        assert event["type"] == "context.assembled"
        assert event["actorId"] == "user:ada"
        assert event["payload"]["tokenCounts"] == {"memory": 120}

    def test_an_unknown_event_is_not_found(self, viewer, trail):
        error_of(viewer.api().get("/v1/audit/events/999999"), 404, "NOT_FOUND")

    def test_another_workspaces_event_is_not_found(self, viewer, trail, workload_b):
        other = AuditEvent.objects.filter(workspace=workload_b.workspace).first()

        error_of(viewer.api().get(f"/v1/audit/events/{other.pk}"), 404, "NOT_FOUND")


class AuditWorkspaceParameterTests:
    @pytest.mark.parametrize(
        "url", ["/v1/audit/events/", "/v1/audit/verify", "/v1/audit/events/{event}"]
    )
    @pytest.mark.parametrize("query", ["", "?workspace="])
    def test_a_session_caller_must_name_the_workspace(self, viewer, trail, url, query):
        response = viewer.session().get(url.format(event=trail["ada"].pk) + query)

        error = error_of(response, 400, "INVALID_REQUEST")
        assert "workspace" in error["details"]["fields"]

    def test_a_session_caller_names_the_workspace(self, viewer, trail):
        client = viewer.session()

        listed = client.get(EVENTS_URL, {"workspace": "team-a"})
        shown = client.get(f"/v1/audit/events/{trail['ada'].pk}", {"workspace": "team-a"})

        assert listed.json()["count"] == len(trail)
        assert shown.json()["id"] == trail["ada"].pk

    def test_a_token_may_name_its_own_workspace(self, viewer, trail):
        assert viewer.api().get(EVENTS_URL, {"workspace": "team-a"}).json()["count"] == len(trail)

    def test_a_token_cannot_name_another_workspace(self, viewer, trail, workspace_b):
        error_of(viewer.api().get(EVENTS_URL, {"workspace": "team-b"}), 404, "NOT_FOUND")

    def test_a_session_user_cannot_name_a_workspace_they_do_not_belong_to(
        self, viewer, trail, workspace_b
    ):
        response = viewer.session().get(EVENTS_URL, {"workspace": "team-b"})

        error_of(response, 404, "NOT_FOUND")


class AuditEventTypesFilterTests:
    def test_a_repeated_type_lists_events_of_any_of_them(self, viewer, trail):
        response = viewer.api().get(EVENTS_URL, {"type": ["context.assembled", "workload.created"]})

        assert ids(response) == [trail[name].pk for name in ("grace", "ada", "created")]

    def test_a_comma_list_of_types_reads_the_same(self, viewer, trail):
        response = viewer.api().get(EVENTS_URL, {"type": "context.assembled, workload.created"})

        assert ids(response) == [trail[name].pk for name in ("grace", "ada", "created")]

    def test_an_empty_type_filters_nothing(self, viewer, trail):
        assert viewer.api().get(EVENTS_URL, {"type": ""}).json()["count"] == len(trail)

    def test_an_unknown_type_is_a_400_naming_it_and_the_valid_ones(self, viewer, trail):
        response = viewer.api().get(EVENTS_URL, {"type": ["context.assembled", "the floor"]})

        error = error_of(response, 400, "INVALID_REQUEST")
        message = error["details"]["fields"]["type"]
        assert message.startswith("Not an event type: the floor. The event types are: ")
        assert all(value in message for value in EventType.values)

    def test_another_workspace_stays_out_of_reach_whatever_the_types(
        self, viewer, outsider, trail, workload_b
    ):
        types = {"type": ["context.assembled", "workload.created"]}

        error_of(viewer.api().get(EVENTS_URL, {**types, "workspace": "team-b"}), 404)
        error_of(viewer.session().get(EVENTS_URL, {**types, "workspace": "team-b"}), 404)
        theirs = outsider.api().get(EVENTS_URL, types).json()["results"]
        assert [(event["workspace"], event["type"]) for event in theirs] == [
            ("team-b", "workload.created")
        ]

    def test_the_schema_documents_a_repeatable_type(self, viewer):
        schema = viewer.api().get("/v1/schema/", {"format": "json"}).json()
        operation = schema["paths"]["/v1/audit/events/"]["get"]

        [parameter] = [p for p in operation["parameters"] if p["name"] == "type"]
        assert parameter["schema"]["type"] == "array"
        assert set(parameter["schema"]["items"]["enum"]) == set(EventType.values)
        assert parameter.get("explode", True) and parameter.get("style", "form") == "form"
        assert "type=a&type=b" in parameter["description"]
