"""The OpenAPI schema generates cleanly and documents versioned saves."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db

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

    def test_the_error_shape_is_a_component(self, schema):
        error = schema["components"]["schemas"]["Error"]

        assert error["required"] == ["error"]

    def test_a_recall_for_an_unknown_actor_is_documented_as_a_200(self, schema):
        responses = schema["paths"]["/v1/memory/actors/{actor_id}/recall"]["post"]["responses"]

        assert "actor_unknown" in responses["200"]["description"]
        assert "workloadId" in responses["404"]["description"]
        assert "An unknown actor is not a 404" in responses["404"]["description"]
