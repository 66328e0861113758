"""A workload's stored, versioned layout configuration: the services and /layout-config."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from audit.models import AuditEvent, EventType
from audit.services import audit_chain_verify
from portal.errors import ValidationFailed
from recall.layout.config import LayoutConfig, layout_config_to_dict, parse_memory_config
from recall.layout.config import parse_memory_config as layout_config_parse
from recall.layout.services import layout_config_current, layout_config_save
from recall.models import WorkloadLayoutConfigVersion
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "editor", "viewer", "workload_a"
)

SEED_FRAGMENT = """
memory:
  context_window: 32000
  output_buffer: 2500
  max_history_turns: 15
  supporting_context:
    budget_ratio: 0.30
    section_priority: [known_facts, passages, insights, summaries, tools, state]
    max_items:
      passages: 5
      known_facts: 15
      insights: 10
      summaries: 5
      tools: 5
  compaction:
    enabled: true
    cooldown_turns: 3
"""
MISSPELLED = {
    "memory": {
        "supporting_context": {
            "budget_ration": 0.3,
            "max_items": {"key_facts": 15},
        }
    }
}
DEFAULTS = layout_config_to_dict(LayoutConfig())


def config_url(workload: Any) -> str:
    return f"/v1/workloads/{workload.id}/layout-config"


def versions_url(workload: Any) -> str:
    return f"/v1/workloads/{workload.id}/layout-config/versions/"


def state(workload: Any) -> dict[str, Any]:
    """Everything a rejected save must leave untouched."""
    return {
        "versions": list(
            WorkloadLayoutConfigVersion.objects.filter(workload=workload).values_list(
                "version", "document"
            )
        ),
        "events": AuditEvent.objects.filter(workspace=workload.workspace).count(),
    }


def layout_events(workload: Any) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(
            workspace=workload.workspace, type=EventType.LAYOUT_CONFIG_SET
        ).order_by("id")
    )


def put(persona: Any, workload: Any, body: Any) -> Any:
    return persona.api().put(config_url(workload), body, format="json")


class LayoutConfigServiceTests:
    def test_it_stores_the_normalised_document_as_version_1(self, workload_a):
        version = layout_config_save(
            workload=workload_a, document=SEED_FRAGMENT, author="user:eddie", comment=" seed "
        )

        assert version.version == 1
        assert version.author == "user:eddie" and version.comment == "seed"
        assert version.document == layout_config_to_dict(parse_memory_config(SEED_FRAGMENT))
        assert version.document["memory"]["compaction"]["enabled"] is True
        # Every key is stored, defaults included.
        assert set(version.document["memory"]["priming"]) == set(DEFAULTS["memory"]["priming"])

    def test_each_save_is_a_new_version_with_its_own_audit_event(self, workload_a):
        layout_config_save(workload=workload_a, document={}, author="user:eddie")
        layout_config_save(
            workload=workload_a,
            document={"memory": {"context_window": 8000}},
            author="user:olga",
            comment="smaller model",
        )

        assert list(workload_a.layout_config_versions.values_list("version", flat=True)) == [
            2,
            1,
        ]
        first, second = layout_events(workload_a)
        assert first.workload_id == workload_a.id and first.author == "user:eddie"
        assert first.payload["version"] == 1 and first.payload["before"] is None
        assert first.payload["after"] == DEFAULTS and first.payload["changed"] == []
        assert second.author == "user:olga"
        assert second.payload["version"] == 2
        assert second.payload["before"] == DEFAULTS
        assert second.payload["after"]["memory"]["context_window"] == 8000
        assert second.payload["changed"] == ["memory.context_window"]
        assert second.payload["comment"] == "smaller model"
        assert audit_chain_verify(workspace=workload_a.workspace).ok

    def test_the_current_config_is_the_default_until_one_is_saved(self, workload_a):
        current = layout_config_current(workload=workload_a)
        assert current.version is None and current.config == LayoutConfig()

        layout_config_save(
            workload=workload_a, document={"context_window": 8000}, author="user:eddie"
        )
        layout_config_save(
            workload=workload_a, document={"context_window": 16000}, author="user:eddie"
        )

        current = layout_config_current(workload=workload_a)
        assert current.version is not None and current.version.version == 2
        assert current.config.context_window == 16000

    def test_it_rejects_misspelled_keys_and_stores_nothing(self, workload_a):
        before = state(workload_a)

        with pytest.raises(ValidationFailed) as caught:
            layout_config_save(workload=workload_a, document=MISSPELLED, author="user:eddie")

        fields = caught.value.details["fields"]
        assert set(fields) == {
            "memory.supporting_context.budget_ration",
            "memory.supporting_context.max_items.key_facts",
        }
        assert "budget_ratio" in fields["memory.supporting_context.budget_ration"]
        assert "known_facts" in fields["memory.supporting_context.max_items.key_facts"]
        assert state(workload_a) == before

    def test_it_accepts_yaml_with_or_without_the_memory_root(self):
        rooted = layout_config_parse("memory:\n  context_window: 8000\n")
        bare = layout_config_parse("context_window: 8000\n")

        assert rooted == bare and rooted.context_window == 8000

    @pytest.mark.parametrize(
        "document",
        [
            "a: &anchor [1, 2]\nb: *anchor\n",
            "memory: [unclosed",
            "x" * 70_000,
            ["context_window"],
            5,
        ],
        ids=["alias", "broken-yaml", "huge-yaml", "list", "number"],
    )
    def test_it_rejects_what_is_not_a_config_mapping(self, workload_a, document):
        with pytest.raises(ValidationFailed) as caught:
            layout_config_save(workload=workload_a, document=document, author="user:eddie")

        assert list(caught.value.details["fields"]) == ["memory"]

    def test_it_bounds_token_counts_the_planner_does_float_arithmetic_on(self, workload_a):
        with pytest.raises(ValidationFailed) as caught:
            layout_config_save(
                workload=workload_a,
                document={"context_window": 10**400, "output_buffer": 10**10},
                author="user:eddie",
            )

        assert set(caught.value.details["fields"]) == {
            "memory.context_window",
            "memory.output_buffer",
        }

    def test_it_rejects_a_comment_that_is_not_text(self, workload_a):
        with pytest.raises(ValidationFailed) as caught:
            layout_config_save(workload=workload_a, document={}, author="x", comment=5)

        assert list(caught.value.details["fields"]) == ["comment"]


class LayoutConfigApiTests:
    def test_get_returns_the_defaults_before_any_save(self, viewer, workload_a):
        response = viewer.api().get(config_url(workload_a))

        assert response.status_code == 200
        assert response.json() == {
            "workloadId": str(workload_a.id),
            "version": None,
            "isDefault": True,
            "config": DEFAULTS,
            "author": None,
            "comment": "",
            "createdAt": None,
        }

    def test_put_saves_a_config_object_and_get_returns_it(self, editor, viewer, workload_a):
        response = put(
            editor, workload_a, {"memory": {"context_window": 8000}, "comment": "smaller"}
        )

        assert response.status_code == 200, response.content
        saved = response.json()
        assert saved["version"] == 1 and saved["isDefault"] is False
        assert saved["author"] == "token:eddie-token"
        assert saved["comment"] == "smaller"
        assert saved["config"]["memory"]["context_window"] == 8000
        assert viewer.api().get(config_url(workload_a)).json() == saved

    def test_put_accepts_yaml_text_with_a_comment(self, editor, workload_a):
        response = put(editor, workload_a, {"config": SEED_FRAGMENT, "comment": "seed 000"})

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["comment"] == "seed 000"
        assert body["config"] == layout_config_to_dict(parse_memory_config(SEED_FRAGMENT))

    def test_gets_body_can_be_put_back_as_the_next_version(self, editor, workload_a):
        first = put(editor, workload_a, {"config": SEED_FRAGMENT}).json()
        first["config"]["memory"]["context_window"] = 16000
        edited = {**first, "comment": "bigger window"}

        response = put(editor, workload_a, edited)

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 2
        assert response.json()["config"] == first["config"]

    def test_gets_body_put_back_unchanged_records_nothing(self, editor, workload_a):
        first = put(editor, workload_a, {"config": SEED_FRAGMENT}).json()
        before = state(workload_a)

        response = put(editor, workload_a, {**first, "comment": "unchanged"})

        assert response.status_code == 200, response.content
        assert response.json() == first
        assert response["ETag"] == '"1"'
        assert state(workload_a) == before

    @pytest.mark.parametrize(
        ("body", "prefix"),
        [(MISSPELLED, ""), ({"config": MISSPELLED, "comment": "typo"}, "config.")],
        ids=["bare", "wrapped"],
    )
    def test_misspelled_keys_are_a_400_naming_the_path_and_nothing_is_saved(
        self, editor, workload_a, body, prefix
    ):
        before = state(workload_a)

        error = error_of(put(editor, workload_a, body), 400, "INVALID_REQUEST")

        assert set(error["details"]["fields"]) == {
            f"{prefix}memory.supporting_context.budget_ration",
            f"{prefix}memory.supporting_context.max_items.key_facts",
        }
        assert "nothing was saved" in error["message"]
        assert state(workload_a) == before

    def test_misspelled_keys_in_yaml_are_named_too(self, editor, workload_a):
        yaml_text = "memory:\n  supporting_context:\n    budget_ration: 0.3\n"

        error = error_of(put(editor, workload_a, {"config": yaml_text}), 400)

        assert list(error["details"]["fields"]) == [
            "config.memory.supporting_context.budget_ration"
        ]

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ([], "body"),
            ("memory:\n  context_window: 8000\n", "body"),
            ({"config": {}, "extra": 1}, "extra"),
            ({"config": 5}, "config"),
            ({"config": None}, "config"),
            ({"config": {}, "comment": 5}, "comment"),
            ({"comment": ["x"]}, "comment"),
            ({"context_window": "8000"}, "memory.context_window"),
            ({"memory": {"priming": {"enabled": "yes"}}}, "memory.priming.enabled"),
            ({"memory": {}, "version": 3}, "version"),
        ],
    )
    def test_bad_bodies_are_a_400_never_a_500(self, editor, workload_a, body, field):
        before = state(workload_a)
        response = editor.api().put(
            config_url(workload_a), json.dumps(body), content_type="application/json"
        )

        assert field in error_of(response, 400)["details"]["fields"]
        assert state(workload_a) == before

    def test_versions_are_listed_newest_first(self, editor, viewer, workload_a):
        for window in (8000, 16000, 32000):
            put(editor, workload_a, {"context_window": window, "comment": f"w{window}"})

        response = viewer.api().get(versions_url(workload_a))

        assert response.status_code == 200
        body = response.json()
        assert body["count"] == 3
        assert [v["version"] for v in body["results"]] == [3, 2, 1]
        assert [v["comment"] for v in body["results"]] == ["w32000", "w16000", "w8000"]
        assert body["results"][0]["config"]["memory"]["context_window"] == 32000

    def test_the_versions_list_takes_a_fixed_number_of_queries(
        self, editor, viewer, workload_a, django_assert_num_queries
    ):
        for window in range(1000, 11000, 1000):
            layout_config_save(workload=workload_a, document={"context_window": window}, author="x")
        client = viewer.api()

        # Token, workload (with its workspace check), count, page: not one per version.
        with django_assert_num_queries(4):
            response = client.get(versions_url(workload_a))

        assert response.json()["count"] == 10

    def test_each_save_through_the_api_writes_one_audit_event(self, editor, workload_a):
        put(editor, workload_a, {"context_window": 8000})
        put(editor, workload_a, {"config": "context_window: 16000", "comment": "bigger"})

        events = layout_events(workload_a)
        assert [e.payload["version"] for e in events] == [1, 2]
        assert events[1].payload["changed"] == ["memory.context_window"]
        assert events[1].payload["comment"] == "bigger"
        assert events[1].author == "token:eddie-token"


class LayoutConfigAccessTests:
    def test_a_viewer_cannot_save(self, viewer, workload_a):
        before = state(workload_a)

        error = error_of(put(viewer, workload_a, {"context_window": 8000}), 403)

        assert error["code"] == "PERMISSION_DENIED"
        assert state(workload_a) == before

    @pytest.mark.parametrize("persona", ["editor", "operator"])
    def test_editors_and_operators_can_save(self, request, persona, workload_a):
        response = put(request.getfixturevalue(persona), workload_a, {"context_window": 8000})

        assert response.status_code == 200, response.content

    def test_a_session_editor_saves_with_csrf(self, editor, workload_a):
        client = csrf_session(editor)

        response = client.put(config_url(workload_a), {"context_window": 8000}, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["author"] == "user:eddie"

    @pytest.mark.parametrize(
        ("method", "url", "body"),
        [
            ("get", config_url, None),
            ("put", config_url, {"context_window": 8000}),
            ("get", versions_url, None),
            ("post", lambda w: "/v1/context/layout", None),
        ],
        ids=["get", "put", "versions", "layout"],
    )
    def test_an_outsider_gets_404_for_another_workspaces_workload(
        self, outsider, workload_a, method, url, body
    ):
        layout_config_save(
            workload=workload_a, document={"context_window": 8000}, author="user:eddie"
        )
        before = state(workload_a)
        if body is None and method == "post":
            body = {"workloadId": str(workload_a.id)}

        response = getattr(outsider.api(), method)(url(workload_a), body, format="json")

        error_of(response, 404, "NOT_FOUND")
        # Nothing of the saved configuration leaks (the message names the workload, whose
        # random id may itself contain "8000").
        assert "8000" not in response.content.decode().replace(str(workload_a.id), "")
        assert state(workload_a) == before

    def test_an_outsider_session_gets_404_too(self, outsider, workload_a):
        client = outsider.session()

        error_of(client.get(config_url(workload_a)), 404, "NOT_FOUND")
        error_of(client.get(versions_url(workload_a)), 404, "NOT_FOUND")

    def test_an_unknown_workload_is_not_found(self, editor, db):
        missing = type("W", (), {"id": uuid.uuid4()})()

        error_of(editor.api().get(config_url(missing)), 404, "NOT_FOUND")
        error_of(put(editor, missing, {}), 404, "NOT_FOUND")
        error_of(editor.api().get(versions_url(missing)), 404, "NOT_FOUND")


class LoadYamlDepthTests:
    """``load_yaml`` stops at ``YAML_MAX_DEPTH`` nested collections, before PyYAML's scanner
    (quadratic in the nesting) and composer (one Python frame a level) run away."""

    @staticmethod
    def nested(depth: int) -> str:
        return "".join("  " * level + f"k{level}:\n" for level in range(depth)) + "  " * depth + "x"

    def test_a_block_mapping_nested_past_the_limit_is_refused(self):
        from recall.layout.config import YAML_MAX_DEPTH, LayoutConfigError, load_yaml

        with pytest.raises(LayoutConfigError) as refused:
            load_yaml(self.nested(YAML_MAX_DEPTH + 1))
        assert refused.value.errors == {"memory": "the YAML is nested too deeply to be a config"}

    def test_a_block_mapping_nested_to_the_limit_loads(self):
        from recall.layout.config import YAML_MAX_DEPTH, load_yaml

        loaded = load_yaml(self.nested(YAML_MAX_DEPTH))
        for level in range(YAML_MAX_DEPTH):
            loaded = loaded[f"k{level}"]
        assert loaded == "x"
