"""POST /v1/context/layout: the chat layout planner over HTTP (SPEC section 6, seed 000)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from audit.models import AuditEvent
from recall.layout.config import SEED_CHAT_FRAGMENT, SEED_COMPACTION_FRAGMENT
from recall.layout.services import layout_config_save
from recall.models import WorkloadLayoutConfigVersion
from tests.helpers import csrf_session, error_of
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, viewer, workload_a, made_first = module_scoped("workspace_a", "viewer", "workload_a")

URL = "/v1/context/layout"

SEED = {
    "contextWindow": 32000,
    "systemPromptTokens": 1500,
    "toolSchemaTokens": 500,
    "outputBuffer": 2500,
    "budgetRatio": 0.30,
}
# The default estimator counts ceil(len / 4) tokens for one long word; the formatter adds
# 4 per message, 6 per section header (prior-session turns get one too) and 2 per item.
MESSAGE = 4
HEADER = 6
ITEM = 2


def text(tokens: int) -> str:
    return "x" * (4 * tokens)


def turn(tokens: int, role: str = "user") -> dict[str, str]:
    return {"role": role, "content": text(tokens)}


def post(persona: Any, body: Any, url: str = URL) -> Any:
    return persona.api().post(url, body, format="json")


def ok(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    return response.json()


def fields_of(response: Any) -> dict[str, str]:
    return error_of(response, 400, "INVALID_REQUEST")["details"]["fields"]


def pressure_body() -> dict[str, Any]:
    """Every one of stages 1-5 removes something; only stage 5 brings it under 600 tokens.

    Before pruning: prior 2 x 104 + 6, history 12 x 104, passages 6 + 2 x 52 = 1572.
    After stage 1: 1358; 2 (10 turns): 1150; 3 (long 0.2 gone): 1098; 4 (short 0.4 gone, so
    the passages header too): 1040; 5 (5 turns): 520.
    """
    return {
        "contextWindow": 600,
        "outputBuffer": 0,
        "budgetRatio": 0.3,
        "priorSessionHistory": [turn(100), turn(100, "assistant")],
        "history": [turn(100, "user" if i % 2 == 0 else "assistant") for i in range(12)],
        "supporting": {
            "passages": [
                {"content": text(50), "term": "long", "relevancy": 0.2, "id": "p-long"},
                {"content": text(50), "term": "short", "relevancy": 0.4, "id": "p-short"},
            ]
        },
    }


class LayoutBudgetTests:
    def test_it_reproduces_the_seed_budget_numbers(self, viewer):
        body = ok(post(viewer, SEED))

        assert body["fixedCosts"] == 4500
        assert body["dynamicBudget"] == 27500
        assert body["supportingContextBudget"] == 8250
        assert body["contextWindow"] == 32000
        assert body["estimatedTokens"] == 0
        assert body["utilizationPct"] == 0.0
        assert body["severity"] == "normal"
        assert body["fits"] is True and body["emergencyOverage"] is False
        assert body["stages"] == [] and body["stagesRun"] == []
        assert body["config"] == {"source": "default", "workloadId": None, "version": None}

    def test_it_returns_the_documented_fields_in_camel_case(self, viewer):
        body = ok(post(viewer, {**SEED, "query": "What changed?", "history": [turn(10)]}))

        assert {
            "fixedCosts",
            "dynamicBudget",
            "supportingContextBudget",
            "estimatedTokens",
            "utilizationPct",
            "severity",
            "stages",
            "fits",
            "emergencyOverage",
            "warnings",
            "history",
            "priorSessionHistory",
            "supporting",
            "tokens",
            "compaction",
        } <= set(body)
        assert set(body["tokens"]) == {
            "fixed",
            "history",
            "priorSessionHistory",
            "supporting",
            "query",
            "formatting",
            "free",
        }
        assert set(body["compaction"]) == {
            "enabled",
            "compact",
            "code",
            "reason",
            "severity",
            "timeBudgetMs",
        }
        assert not [key for key in body if "_" in key]

    def test_the_budget_parts_add_up_to_the_window_when_it_fits(self, viewer):
        body = ok(
            post(
                viewer,
                {
                    **SEED,
                    "query": text(20),
                    "history": [turn(30), turn(40, "assistant")],
                    "priorSessionHistory": [turn(25)],
                    "supporting": {"known_facts": [{"content": text(15)}]},
                },
            )
        )

        tokens = body["tokens"]
        assert tokens["fixed"] == 4500
        assert tokens["history"] == 70
        assert tokens["priorSessionHistory"] == 25
        assert tokens["supporting"] == 15
        assert tokens["query"] == 20
        assert tokens["formatting"] == 4 * MESSAGE + 2 * HEADER + ITEM
        assert sum(tokens.values()) == body["contextWindow"]
        assert body["estimatedTokens"] == sum(tokens.values()) - tokens["fixed"] - tokens["free"]

    def test_request_numbers_default_to_the_config(self, viewer):
        body = ok(post(viewer, {"config": SEED_CHAT_FRAGMENT}))

        assert body["contextWindow"] == 32000
        assert body["fixedCosts"] == 2500
        assert body["dynamicBudget"] == 29500
        assert body["supportingContextBudget"] == 8850
        assert body["config"]["source"] == "request"

    def test_supporting_sections_fill_in_priority_order_within_max_items(self, viewer):
        body = ok(
            post(
                viewer,
                {
                    **SEED,
                    "config": {"supporting_context": {"max_items": {"insights": 2}}},
                    "supporting": {
                        "insights": [{"content": text(5), "id": f"i{n}"} for n in range(4)],
                        "entities": [{"content": text(5)}],
                    },
                },
            )
        )

        assert [item["id"] for item in body["supporting"]["insights"]] == ["i0", "i1"]
        assert "entities" not in body["supporting"]
        assert body["filtered"]["overMaxItems"] == 2
        assert body["filtered"]["notInSectionPriority"] == 1
        assert any("section_priority" in warning for warning in body["warnings"])


class LayoutCascadeTests:
    def test_it_runs_the_stages_in_order_and_stops_at_the_first_that_fits(self, viewer):
        body = ok(post(viewer, pressure_body()))

        assert body["estimateBeforePruning"] == 1572
        assert [stage["number"] for stage in body["stages"]] == [1, 2, 3, 4, 5]
        assert body["stagesRun"] == [1, 2, 3, 4, 5]
        assert [stage["name"] for stage in body["stages"]] == [
            "drop_prior_session_history",
            "keep_last_10_turns",
            "drop_long_passages_below_0_3",
            "drop_passages_below_0_5",
            "keep_last_5_turns",
        ]
        assert [stage["estimateAfter"] for stage in body["stages"]] == [
            1358,
            1150,
            1098,
            1040,
            520,
        ]
        assert [stage["fits"] for stage in body["stages"]] == [False] * 4 + [True]
        assert [stage["removed"] for stage in body["stages"]] == [
            {"prior_session_turns": 2},
            {"turns": 2},
            {"long_passages": 1},
            {"short_passages": 1},
            {"turns": 5},
        ]
        assert all(stage["description"] for stage in body["stages"])
        assert body["estimatedTokens"] == 520 and body["fits"] is True
        assert body["emergencyOverage"] is False
        assert body["priorSessionHistory"] == [] and len(body["history"]) == 5
        assert body["supporting"] == {}

    def test_a_generous_window_runs_no_stage(self, viewer):
        body = ok(post(viewer, {**pressure_body(), "contextWindow": 1572}))

        assert body["stages"] == [] and body["estimatedTokens"] == 1572
        assert body["utilizationPct"] == 100.0 and body["severity"] == "critical"

    def test_the_retained_history_is_the_most_recent(self, viewer):
        history = [{"role": "user", "content": f"turn-{n} " + text(100)} for n in range(12)]
        body = ok(post(viewer, {**pressure_body(), "history": history}))

        assert [t["content"].split()[0] for t in body["history"]] == [
            f"turn-{n}" for n in range(7, 12)
        ]

    def test_it_reports_an_emergency_overage_instead_of_hiding_it(self, viewer):
        body = ok(post(viewer, {"contextWindow": 100, "outputBuffer": 0, "query": text(500)}))

        assert body["stagesRun"] == list(range(1, 10))
        assert body["stages"][-1]["name"] == "emergency_minimum"
        assert body["stages"][-1]["fits"] is False
        assert body["fits"] is False and body["emergencyOverage"] is True
        assert body["estimatedTokens"] == 500 + MESSAGE
        assert body["severity"] == "overage" and body["utilizationPct"] == 504.0
        assert body["tokens"]["free"] == 0
        assert any("emergency overage" in warning for warning in body["warnings"])

    def test_fixed_costs_that_fill_the_window_are_an_overage_not_an_error(self, viewer):
        body = ok(post(viewer, {"contextWindow": 1000, "outputBuffer": 2500, "query": "hi"}))

        assert body["dynamicBudget"] == 0 and body["supportingContextBudget"] == 0
        assert body["utilizationPct"] is None  # infinite: JSON has no infinity
        assert body["severity"] == "overage" and body["emergencyOverage"] is True
        assert any("leave no room" in warning for warning in body["warnings"])


class LayoutCompactionTests:
    def test_compaction_is_off_unless_the_config_enables_it(self, viewer):
        body = ok(post(viewer, {"contextWindow": 1000, "outputBuffer": 0, "query": text(896)}))

        assert body["severity"] == "warning"
        assert body["compaction"] == {
            "enabled": False,
            "compact": False,
            "code": "disabled",
            "reason": "automatic compaction is not enabled",
            "severity": None,
            "timeBudgetMs": None,
        }

    def test_a_warning_turn_triggers_compaction_with_the_normal_time_budget(self, viewer):
        body = ok(
            post(
                viewer,
                {
                    "contextWindow": 1000,
                    "outputBuffer": 0,
                    "query": text(896),
                    "config": SEED_COMPACTION_FRAGMENT,
                },
            )
        )

        assert body["utilizationPct"] == 90.0
        compaction = body["compaction"]
        assert compaction["enabled"] is True and compaction["compact"] is True
        assert compaction["code"] == "severity" and compaction["severity"] == "warning"
        assert compaction["timeBudgetMs"] == 15000

    def test_an_overage_turn_gets_the_critical_time_budget(self, viewer):
        body = ok(
            post(
                viewer,
                {
                    "contextWindow": 100,
                    "outputBuffer": 0,
                    "query": text(500),
                    "config": {"compaction": {"enabled": True}},
                },
            )
        )

        assert body["compaction"]["code"] == "severity"
        assert body["compaction"]["severity"] == "overage"
        assert body["compaction"]["timeBudgetMs"] == 45000

    def test_an_elevated_turn_alone_is_not_a_rising_trend(self, viewer):
        body = ok(
            post(
                viewer,
                {
                    "contextWindow": 1000,
                    "outputBuffer": 0,
                    "query": text(796),
                    "config": {"compaction": {"enabled": True}},
                },
            )
        )

        assert body["severity"] == "elevated"
        assert body["compaction"]["compact"] is False
        assert body["compaction"]["code"] == "not_needed"


class LayoutConfigInputTests:
    def test_it_accepts_the_seed_fragments_as_yaml(self, viewer):
        body = ok(
            post(
                viewer,
                {
                    **SEED,
                    "config": SEED_CHAT_FRAGMENT + SEED_COMPACTION_FRAGMENT[len("memory:\n") :],
                },
            )
        )

        assert body["supportingContextBudget"] == 8250
        assert body["compaction"]["enabled"] is True

    def test_it_accepts_a_config_object_without_the_memory_root(self, viewer):
        body = ok(post(viewer, {"config": {"context_window": 8000, "output_buffer": 1000}}))

        assert body["contextWindow"] == 8000 and body["dynamicBudget"] == 7000

    @pytest.mark.parametrize(
        ("config", "path", "hint"),
        [
            (
                {"memory": {"supporting_context": {"budget_ration": 0.3}}},
                "config.memory.supporting_context.budget_ration",
                "budget_ratio",
            ),
            (
                {"supporting_context": {"max_items": {"key_facts": 15}}},
                "config.memory.supporting_context.max_items.key_facts",
                "known_facts",
            ),
            (
                "memory:\n  supporting_context:\n    section_priority: [key_facts, passages]\n",
                "config.memory.supporting_context.section_priority[0]",
                "known_facts",
            ),
            (
                {"compaction": {"enabeld": True}},
                "config.memory.compaction.enabeld",
                "enabled",
            ),
        ],
    )
    def test_misspelled_config_keys_are_named_by_dotted_path(self, viewer, config, path, hint):
        fields = fields_of(post(viewer, {**SEED, "config": config}))

        assert list(fields) == [path]
        assert hint in fields[path]

    def test_all_config_problems_are_reported_together(self, viewer):
        config = {
            "context_window": "big",
            "supporting_context": {"budget_ration": 0.3, "budget_ratio": 3},
        }
        fields = fields_of(post(viewer, {"config": config, "contextWindow": -1}))

        assert set(fields) == {
            "contextWindow",
            "config.memory.context_window",
            "config.memory.supporting_context.budget_ration",
            "config.memory.supporting_context.budget_ratio",
        }

    def test_the_layout_stores_nothing(self, viewer, workload_a):
        events = AuditEvent.objects.count()

        ok(post(viewer, {**SEED, "workloadId": str(workload_a.id), "config": SEED_CHAT_FRAGMENT}))

        assert AuditEvent.objects.count() == events
        assert not WorkloadLayoutConfigVersion.objects.exists()


class LayoutWorkloadConfigTests:
    def test_it_uses_the_workloads_stored_config(self, viewer, workload_a):
        layout_config_save(
            workload=workload_a,
            document={"context_window": 8000, "supporting_context": {"budget_ratio": 0.5}},
            author="system:test",
        )

        body = ok(post(viewer, {"workloadId": str(workload_a.id), "outputBuffer": 1000}))

        assert body["contextWindow"] == 8000
        assert body["dynamicBudget"] == 7000 and body["supportingContextBudget"] == 3500
        assert body["config"] == {
            "source": "workload",
            "workloadId": str(workload_a.id),
            "version": 1,
        }

    def test_a_workload_without_a_saved_config_uses_the_defaults(self, viewer, workload_a):
        body = ok(post(viewer, {"workloadId": str(workload_a.id)}))

        assert body["contextWindow"] == 32000
        assert body["config"]["source"] == "default"

    def test_a_config_in_the_request_wins_over_the_stored_one(self, viewer, workload_a):
        layout_config_save(
            workload=workload_a, document={"context_window": 8000}, author="system:test"
        )

        body = ok(
            post(viewer, {"workloadId": str(workload_a.id), "config": {"context_window": 4000}})
        )

        assert body["contextWindow"] == 4000
        assert body["config"]["source"] == "request"

    def test_an_unknown_workload_is_not_found(self, viewer):
        error_of(post(viewer, {"workloadId": str(uuid.uuid4())}), 404, "NOT_FOUND")


class LayoutAccessTests:
    @pytest.mark.parametrize("persona", ["viewer", "editor", "operator"])
    def test_every_member_of_the_workspace_may_plan(self, db, request, persona):
        ok(post(request.getfixturevalue(persona), SEED))

    def test_a_session_caller_names_the_workspace(self, viewer):
        client = csrf_session(viewer)

        assert client.post(f"{URL}?workspace=team-a", SEED, format="json").status_code == 200
        missing = client.post(URL, SEED, format="json")
        assert "workspace" in fields_of(missing)

    def test_anonymous_callers_are_refused(self, db):
        from rest_framework.test import APIClient

        response = APIClient().post(URL, SEED, format="json")

        assert response.status_code in (401, 403)
        assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"

    def test_an_outsider_cannot_use_another_workspaces_workload(self, outsider, workload_a):
        layout_config_save(
            workload=workload_a, document={"context_window": 8000}, author="system:test"
        )

        response = post(outsider, {**SEED, "workloadId": str(workload_a.id)})

        error_of(response, 404, "NOT_FOUND")
        # The message names the workload, whose random id may itself contain "8000".
        assert "8000" not in response.content.decode().replace(str(workload_a.id), "")

    def test_an_outsider_cannot_name_another_workspace(self, outsider, workspace_a):
        client = csrf_session(outsider)

        error_of(client.post(f"{URL}?workspace=team-a", SEED, format="json"), 404, "NOT_FOUND")


BIG = 10**400
INSIGHT = "supporting.insights[0]"
PASSAGE = "supporting.passages[0]"


def insight(**fields: Any) -> dict[str, Any]:
    return {"supporting": {"insights": [{"content": "x", **fields}]}}


GARBAGE: list[tuple[Any, str]] = [
    ([], "body"),
    ([SEED], "body"),
    ("32000", "body"),
    (5, "body"),
    (None, "body"),
    ({"contextWindow": "32000"}, "contextWindow"),
    ({"contextWindow": 32000.0}, "contextWindow"),
    ({"contextWindow": True}, "contextWindow"),
    ({"contextWindow": -1}, "contextWindow"),
    ({"contextWindow": BIG}, "contextWindow"),
    ({"contextWindow": None}, "contextWindow"),
    ({"systemPromptTokens": -5}, "systemPromptTokens"),
    ({"toolSchemaTokens": [1]}, "toolSchemaTokens"),
    ({"outputBuffer": {"a": 1}}, "outputBuffer"),
    ({"budgetRatio": 1.5}, "budgetRatio"),
    ({"budgetRatio": -0.1}, "budgetRatio"),
    ({"budgetRatio": "0.3"}, "budgetRatio"),
    ({"budgetRatio": BIG}, "budgetRatio"),
    ({"contextWindw": 32000}, "contextWindw"),
    ({"context_window": 32000}, "context_window"),
    ({"history": "hello"}, "history"),
    ({"history": {"role": "user", "content": "x"}}, "history"),
    ({"history": [1]}, "history[0]"),
    ({"history": [[{"role": "user", "content": "x"}]]}, "history[0]"),
    ({"history": [{"role": "wizard", "content": "x"}]}, "history[0].role"),
    ({"history": [{"role": "USER", "content": "x"}]}, "history[0].role"),
    ({"history": [{"role": 1, "content": "x"}]}, "history[0].role"),
    ({"history": [{"role": "user"}]}, "history[0].content"),
    ({"history": [{"role": "user", "content": 5}]}, "history[0].content"),
    ({"history": [{"role": "user", "content": None}]}, "history[0].content"),
    ({"history": [{"role": "user", "content": "x", "name": "bo"}]}, "history[0].name"),
    ({"priorSessionHistory": [turn(1), {"content": "x"}]}, "priorSessionHistory[1].role"),
    ({"supporting": []}, "supporting"),
    ({"supporting": "passages"}, "supporting"),
    ({"supporting": {"passages": "x"}}, "supporting.passages"),
    ({"supporting": {"passages": [[]]}}, "supporting.passages[0]"),
    ({"supporting": {"passages": [{"content": "x"}]}}, "supporting.passages[0].term"),
    ({"supporting": {"passages": [{"content": "x", "term": "mid"}]}}, f"{PASSAGE}.term"),
    ({"supporting": {"key_facts": [{"content": "x"}]}}, "supporting.key_facts"),
    (insight(relevancy="high"), f"{INSIGHT}.relevancy"),
    (insight(relevancy=2), f"{INSIGHT}.relevancy"),
    (insight(relevancy=BIG), f"{INSIGHT}.relevancy"),
    (insight(decayed="yes"), f"{INSIGHT}.decayed"),
    (insight(redundant=1), f"{INSIGHT}.redundant"),
    (insight(id=7), f"{INSIGHT}.id"),
    (insight(score=1), f"{INSIGHT}.score"),
    ({"supporting": {"insights": [{"text": "x"}]}}, "supporting.insights[0].content"),
    ({"query": 5}, "query"),
    ({"query": None}, "query"),
    ({"query": ["a"]}, "query"),
    ({"config": 5}, "config"),
    ({"config": []}, "config"),
    ({"config": None}, "config"),
    ({"config": "memory: [unclosed"}, "config.memory"),
    ({"config": "- a\n- b\n"}, "config.memory"),
    ({"config": "a: &x [1, 2]\nb: *x\n"}, "config.memory"),
    ({"config": {"memory": {"supporting_context": []}}}, "config.memory.supporting_context"),
    ({"config": {"memory": {}, "extra": 1}}, "config.extra"),
    ({"config": {"compaction": {"enabled": "yes"}}}, "config.memory.compaction.enabled"),
    ({"config": {"context_window": BIG}}, "config.memory.context_window"),
    ({"config": {"context_window": 10**12}}, "config.memory.context_window"),
    ({"config": {"max_history_turns": -1}}, "config.memory.max_history_turns"),
    ({"workloadId": 5}, "workloadId"),
    ({"workloadId": "support-bot"}, "workloadId"),
    ({"workloadId": None}, "workloadId"),
]  # fmt: skip


class LayoutBadInputTests:
    @pytest.mark.parametrize(("body", "field"), GARBAGE, ids=[repr(b)[:60] for b, _ in GARBAGE])
    def test_bad_input_is_a_400_naming_the_field(self, viewer, body, field):
        response = viewer.api().post(URL, json.dumps(body), content_type="application/json")

        fields = fields_of(response)
        assert field in fields, fields

    def test_malformed_json_is_a_400(self, viewer):
        response = viewer.api().post(URL, "{not json", content_type="application/json")

        error_of(response, 400, "MALFORMED_REQUEST")

    def test_nan_is_not_a_number(self, viewer):
        response = viewer.api().post(URL, '{"budgetRatio": NaN}', content_type="application/json")

        error_of(response, 400)

    def test_an_unknown_field_suggests_the_right_name(self, viewer):
        fields = fields_of(post(viewer, {"contextWindw": 32000}))

        assert "contextWindow" in fields["contextWindw"]

    def test_every_problem_is_reported_at_once(self, viewer):
        fields = fields_of(
            post(
                viewer,
                {
                    "contextWindow": "x",
                    "budgetRatio": 2,
                    "history": [{"role": "wizard", "content": "x"}],
                    "supporting": {"key_facts": [], "passages": [{"content": "p"}]},
                    "bogus": 1,
                },
            )
        )

        assert set(fields) == {
            "contextWindow",
            "budgetRatio",
            "history[0].role",
            "supporting.key_facts",
            "supporting.passages[0].term",
            "bogus",
        }
        assert "known_facts" in fields["supporting.key_facts"]
        assert "user, assistant" in fields["history[0].role"]

    def test_other_methods_are_not_allowed(self, viewer):
        error_of(viewer.api().get(URL), 405, "METHOD_NOT_ALLOWED")


class LayoutSchemaTests:
    def test_the_openapi_schema_documents_the_layout_endpoints(self, viewer):
        response = viewer.api().get("/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

        assert response.status_code == 200
        schema = response.json()
        paths = schema["paths"]
        assert "post" in paths["/v1/context/layout"]
        assert {"get", "put"} <= set(paths["/v1/workloads/{workload_id}/layout-config"])
        assert "get" in paths["/v1/workloads/{workload_id}/layout-config/versions/"]
        request_schema = schema["components"]["schemas"]["LayoutRequestRequest"]
        assert {"contextWindow", "budgetRatio", "supporting", "config", "workloadId"} <= set(
            request_schema["properties"]
        )
        assert "fixedCosts" in schema["components"]["schemas"]["LayoutResult"]["properties"]
