"""The Python client (clients/python) against the server's OpenAPI schema: every operation
is called by the client or listed as not covered with a reason; each one's method, path,
query parameters and headers are the schema's; every field of the bodies it sends and
reads is in the schema with its type; the envelope, which the schema leaves free-form, is
the server's own (recall/envelope.py)."""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from context_recall import AsyncClient, Client, agent_calls, models, platform_calls
from context_recall.operations import NOT_COVERED, OPERATIONS, Operation
from django.core.management import call_command

from recall import envelope as server_envelope
from tests.clients.schema_check import mismatches, typed_mismatches, unsent_required

pytestmark = pytest.mark.django_db
METHODS = ("get", "post", "put", "patch", "delete")
CALL_MODULES = (agent_calls, platform_calls)


@pytest.fixture(scope="module")
def schema(django_db_blocker, tmp_path_factory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("schema") / "schema.yaml"
    with django_db_blocker.unblock():
        call_command("spectacular", "--file", str(path))
    return yaml.safe_load(path.read_text())


def schema_operations(schema: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Each operation of the schema by its id: method, path, the operation."""
    return {
        operation["operationId"]: (method.upper(), path, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in METHODS
    }


def used_operations() -> list[Operation]:
    """Every operation the call functions send, both forms of the memory write included."""
    found = {id(op): op for op in OPERATIONS.values()}
    for module in CALL_MODULES:
        for value in vars(module).values():
            if isinstance(value, Operation):
                found[id(value)] = value
    return list(found.values())


def body_problems(operation: Operation, schema: dict[str, Any]) -> list[str]:
    """Where the bodies ``operation`` sends and reads disagree with ``schema``."""
    components = schema["components"]["schemas"]
    _, _, spec = schema_operations(schema)[operation.id]
    problems = []
    if operation.request is not None:
        body = spec.get("requestBody", {}).get("content", {}).get("application/json")
        if body is None:
            problems.append(f"{operation.id}: the client sends a body; the schema takes none")
        else:
            problems += mismatches(
                operation.request, body["schema"], components, where=operation.id, sent=True
            )
            problems += unsent_required(
                operation.request, body["schema"], components, where=operation.id
            )
    if operation.response is not None:
        answers = [
            answer["content"]["application/json"]["schema"]
            for status, answer in sorted(spec["responses"].items())
            if status.startswith("2") and "application/json" in answer.get("content", {})
        ]
        if not answers:
            problems.append(f"{operation.id}: the client reads a body; the schema answers none")
        for answer in answers:
            problems += mismatches(
                operation.response, answer, components, where=operation.id, sent=False
            )
    return problems


class PythonClientSchemaTests:
    def test_every_operation_of_the_schema_is_called_or_listed_as_not_covered(self, schema):
        in_schema = set(schema_operations(schema))

        missing = in_schema - set(OPERATIONS) - set(NOT_COVERED)
        assert not missing, (
            f"The schema has operations the Python client neither calls nor lists in "
            f"NOT_COVERED (clients/python/src/context_recall/operations.py): {sorted(missing)}"
        )
        assert not set(OPERATIONS) - in_schema, "the client calls operations the schema lost"
        assert not set(NOT_COVERED) - in_schema, "NOT_COVERED names operations the schema lost"
        assert not set(OPERATIONS) & set(NOT_COVERED)
        assert all(reason.strip() for reason in NOT_COVERED.values())

    def test_each_operation_has_the_schema_s_method_and_path(self, schema):
        operations = schema_operations(schema)

        for operation in used_operations():
            method, path, _ = operations[operation.id]
            assert (operation.method, operation.path) == (method, path), operation.id

    def test_the_query_parameters_and_headers_it_sends_are_the_schema_s(self, schema):
        operations = schema_operations(schema)

        for operation in used_operations():
            parameters = operations[operation.id][2].get("parameters", [])
            query = {p["name"] for p in parameters if p["in"] == "query"}
            headers = {p["name"] for p in parameters if p["in"] == "header"}
            assert set(operation.query) <= query, (operation.id, set(operation.query) - query)
            assert set(operation.headers) <= headers, operation.id

    def test_every_field_of_the_bodies_it_sends_and_reads_is_the_schema_s(self, schema):
        problems = [p for op in used_operations() for p in body_problems(op, schema)]

        assert not problems, "\n".join(problems)

    def test_the_policy_document_is_the_schema_s_flat_policy(self, schema):
        components = schema["components"]["schemas"]
        _, _, put = schema_operations(schema)["workspaces_policy_update"]
        flat = put["requestBody"]["content"]["application/json"]["schema"]["oneOf"][0]

        axes = components["AxisEnum"]["enum"]

        assert set(models.PolicyDocument.__annotations__) == set(axes)
        assert not mismatches(models.PolicyDocument, flat, components, where="policy", sent=True)

    def test_a_field_renamed_in_the_schema_fails_the_check(self, schema):
        changed = copy.deepcopy(schema)
        recall_body = changed["components"]["schemas"]["RecallRequestRequest"]["properties"]
        recall_body["workload"] = recall_body.pop("workloadId")
        session = changed["components"]["schemas"]["Session"]["properties"]
        session["turnCount"] = {"type": "string"}

        problems = body_problems(OPERATIONS["memory_actors_recall_create"], changed)
        problems += body_problems(OPERATIONS["sessions_retrieve"], changed)

        assert any("workloadId: not in the schema" in p for p in problems), problems
        assert any("turnCount: the client has int; the schema has string" in p for p in problems)

    def test_a_field_the_schema_requires_must_be_required_by_the_client(self, schema):
        changed = copy.deepcopy(schema)
        recall_body = changed["components"]["schemas"]["RecallRequestRequest"]
        recall_body["required"] = [*recall_body.get("required", []), "topK"]

        problems = body_problems(OPERATIONS["memory_actors_recall_create"], changed)

        assert any("topK: required by the schema; optional here" in p for p in problems), problems

    def test_the_envelope_is_the_server_s(self):
        assert not typed_mismatches(models.Envelope, server_envelope.Envelope, where="Envelope")

    def test_every_call_function_is_a_method_of_both_clients(self):
        functions = [
            value
            for module in CALL_MODULES
            for name, value in vars(module).items()
            if inspect.isfunction(value)
            and value.__module__ == module.__name__
            and not name.startswith("_")
        ]

        assert len(functions) >= len(OPERATIONS)
        for function in functions:
            for client in (Client, AsyncClient):
                method = getattr(client, function.__name__, None)
                assert method is not None, f"{client.__name__} has no {function.__name__}"
                assert method.__wrapped__ is function


def test_the_calls_the_docs_show_are_the_client_s():
    root = Path(__file__).resolve().parents[2]
    shown = set()
    for page in ("README.md", "docs/integration.md", "clients/python/README.md"):
        shown |= set(re.findall(r"\bclient\.(\w+)\(", (root / page).read_text()))

    assert {"recall", "write_memory", "start_session", "post_turns"} <= shown
    assert not {name for name in shown if not hasattr(Client, name)}
    assert "docs/integration.md" in (root / "README.md").read_text()
    assert "integration.md" in (root / "docs" / "README.md").read_text()
