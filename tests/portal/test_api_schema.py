"""The OpenAPI schema generates cleanly and documents versioned saves."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db

IDS = {"memory_id", "event_id", "run_id"}
VERSIONED = [
    "/v1/workspaces/{slug}/policy",
    "/v1/workloads/{workload_id}/policy",
    "/v1/workloads/{workload_id}/layout-config",
]


@pytest.fixture(scope="module")
def schema(django_db_blocker, tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "schema.yaml"
    with django_db_blocker.unblock():
        call_command("spectacular", "--validate", "--file", str(path))
    return yaml.safe_load(path.read_text())


class SchemaTests:
    def test_it_generates_without_a_warning(self, tmp_path):
        # --fail-on-warn: any warning drf-spectacular emits while generating fails the test.
        call_command(
            "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml")
        )

    @pytest.mark.parametrize("path", VERSIONED)
    def test_a_save_takes_if_match_and_can_answer_409(self, schema, path):
        put = schema["paths"][path]["put"]

        headers = {p["name"] for p in put["parameters"] if p["in"] == "header"}
        assert "If-Match" in headers
        assert "409" in put["responses"]
        assert "VERSION_CONFLICT" in put["responses"]["409"]["description"]
        assert "ETag" in put["responses"]["200"]["headers"]

    @pytest.mark.parametrize("path", VERSIONED)
    def test_a_read_documents_its_etag(self, schema, path):
        get = schema["paths"][path]["get"]

        assert "ETag" in get["responses"]["200"]["headers"]
        assert not any(p["name"] == "ETag" for p in get.get("parameters", []))

    def test_the_floors_change_comment_is_required_and_a_workloads_is_not(self, schema):
        floor = schema["paths"]["/v1/workspaces/{slug}/policy"]["put"]
        flat, envelope = floor["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
        assert "comment" in flat["required"] and "comment" in envelope["required"]
        assert flat["properties"]["comment"]["minLength"] == 1
        assert "400" in floor["responses"]
        workload = schema["paths"]["/v1/workloads/{workload_id}/policy"]["put"]
        flat, envelope = workload["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
        assert "comment" not in flat.get("required", [])
        assert "comment" not in envelope["required"]

    def test_the_error_shape_is_a_component(self, schema):
        error = schema["components"]["schemas"]["Error"]

        assert error["required"] == ["error"]

    def test_a_recall_for_an_unknown_actor_is_documented_as_a_200(self, schema):
        responses = schema["paths"]["/v1/memory/actors/{actor_id}/recall"]["post"]["responses"]

        assert "actor_unknown" in responses["200"]["description"]
        assert "workloadId" in responses["404"]["description"]
        assert "An unknown actor is not a 404" in responses["404"]["description"]

    def test_path_ids_of_memories_events_and_runs_are_integers(self, schema):
        ids = {
            (path, method, parameter["name"]): parameter["schema"]
            for path, operations in schema["paths"].items()
            for method, operation in operations.items()
            for parameter in operation.get("parameters", [])
            if parameter["in"] == "path" and parameter["name"] in IDS
        }

        assert {name for _, _, name in ids} == IDS
        assert len(ids) >= 15  # every operation on a memory, an event or a run
        for where, parameter in ids.items():
            assert parameter == {
                "type": "integer", "format": "int64", "minimum": 1, "maximum": 10**18 - 1,
            }, where  # fmt: skip

    @pytest.mark.parametrize(
        ("path", "method", "status", "codes"),
        [
            ("/v1/workspaces/{slug}/policy", "put", "422", ["BUDGET_NOT_HONOURABLE"]),
            (
                "/v1/workloads/{workload_id}/policy",
                "put",
                "422",
                ["WORKLOAD_RELAXES_OPERATOR_FLOOR", "BUDGET_NOT_HONOURABLE"],
            ),
            ("/v1/memory/actors/{actor_id}/recall", "post", "422", ["BUDGET_NOT_HONOURABLE"]),
            ("/v1/workspaces/{slug}/lifecycle", "put", "422", ["PROMOTION_WEIGHTS_UNBALANCED"]),
            ("/v1/workspaces/{slug}/lifecycle", "patch", "422", ["PROMOTION_WEIGHTS_UNBALANCED"]),
            ("/v1/audit/events/{event_id}/replay", "post", "422", ["QUERY_REQUIRED"]),
            ("/v1/memory/actors/{actor_id}/memories", "post", "422", ["MEMORY_ID_NOT_ISSUED"]),
            ("/v1/memory/actors/{actor_id}/memories", "post", "409", ["MEMORY_ID_TAKEN"]),
        ],
    )
    def test_an_operation_documents_the_codes_of_its_409_and_422(
        self, schema, path, method, status, codes
    ):
        response = schema["paths"][path][method]["responses"][status]

        for code in codes:
            assert code in response["description"], (path, method, status)
        assert response["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }

    def test_a_blank_text_matches_exactly_one_form_of_each_field(self, schema):
        """drf-spectacular gives a field that may be blank a second form, ``maxLength: 0``;
        beside a pattern that takes a blank text too, "" would match both forms of its
        ``oneOf`` and so be refused by a client checking the schema."""
        both = []

        def walk(node: Any, where: str) -> None:
            if isinstance(node, dict):
                forms = node.get("oneOf") or []
                blank = [
                    f for f in forms
                    if isinstance(f, dict) and f.get("type") == "string"
                    and re.fullmatch(f.get("pattern", ""), "")
                    and f.get("minLength", 0) == 0 and "format" not in f and "enum" not in f
                ]  # fmt: skip
                if len(blank) > 1:
                    both.append(where)
                for key, value in node.items():
                    walk(value, f"{where}/{key}")
            elif isinstance(node, list):
                for i, value in enumerate(node):
                    walk(value, f"{where}/{i}")

        walk(schema, "")
        assert both == []
        suppress = schema["components"]["schemas"]["MemorySuppressRequest"]["properties"]
        assert suppress["reason"]["pattern"] == r"^[^\x00]*$"
