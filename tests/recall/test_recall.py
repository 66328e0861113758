"""``POST /v1/memory/actors/{actorId}/recall`` (SPEC §5): the policy funnel, the fail-closed
rules, overrides, the envelope, its audit event, budget pressure and who may call it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditEvent, EventType
from policies import selectors as policy_selectors
from policies.algebra import VOCABULARIES, default_floor
from policies.models import Workload
from policies.services import workload_policy_save, workspace_policy_save
from recall.envelope import (
    Budget,
    Counts,
    Diagnostics,
    Entry,
    Envelope,
    KindBudget,
    ReportedDecision,
    TokenCounts,
    TruncatedRef,
    context_digest,
)
from recall.hits import hits_fold
from recall.models import MemoryRecord
from tests.helpers import csrf_session, error_of, post_recall, recall, recall_body
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

RECALL = "/v1/memory/actors/user:ada/recall"
EVERYTHING = {
    "memoryTypeAllowed": list(VOCABULARIES["memoryType"]),
    "sourceKindAllowed": list(VOCABULARIES["sourceKind"]),
    "confirmationStatusAllowed": list(VOCABULARIES["confirmationStatus"]),
    "consentPolicyAllowed": list(VOCABULARIES["consentPolicy"]),  # even "withdrawn"
    "confidenceMin": 0.0,
    "sensitivityCeiling": "restricted",
    "maxAgeSeconds": None,
}


def set_floor(workspace: Any, relaxable: list[str] | None = None, **axes: Any) -> None:
    workspace_policy_save(
        workspace=workspace,
        document={**default_floor(), **axes, "relaxableAxes": relaxable or []},
        author="system:test",
        comment="Test floor",
    )


def set_workload(workload: Workload, **axes: Any) -> None:
    workload_policy_save(workload=workload, environment="prod", document=axes, author="system:test")


def ids(rows: list[MemoryRecord]) -> set[str]:
    return {str(row.pk) for row in rows}


def entry_ids(envelope: dict[str, Any]) -> set[str]:
    return {entry["id"] for entry in envelope["entries"]}


def state(workspace: Any) -> dict[str, Any]:
    return {
        "hits": sorted(
            MemoryRecord.objects.filter(workspace=workspace).values_list(
                "id", "hit_count", "last_accessed_at"
            )
        ),
        "events": AuditEvent.objects.filter(workspace=workspace).count(),
    }


@pytest.fixture
def full_floor(workspace_a: Any) -> None:
    """The default floor, but reporting every decision."""
    set_floor(workspace_a, diagnosticsVerbosity="full")


# Each case: the workload policy, rows that pass it, rows that fail it, and the failure code.
# Rows straddle the boundary where the axis has one.
AXIS_CASES = {
    "memoryTypeAllowed": (
        {"memoryTypeAllowed": ["preference", "decision"]},
        [{"memory_type": "preference"}, {"memory_type": "decision"}],
        [{"memory_type": "fact"}, {"memory_type": "episode"}],
        "memory_type_not_allowed",
    ),
    "sourceKindAllowed": (
        {"sourceKindAllowed": ["user", "operator"]},
        [{"source_kind": "user"}, {"source_kind": "operator"}],
        [{"source_kind": "tool"}, {"source_kind": "assistant"}, {"source_kind": "import"}],
        "source_kind_not_allowed",
    ),
    "confirmationStatusAllowed": (
        {"confirmationStatusAllowed": ["user_confirmed"]},
        [{"confirmation_status": "user_confirmed"}],
        [{"confirmation_status": "inferred"}, {"confirmation_status": "unknown"}],
        "confirmation_status_not_allowed",
    ),
    "confidenceMin": (
        {"confidenceMin": 0.7},
        [
            {"confidence": 0.7, "confirmation_status": "inferred"},
            {"confidence": 1.0, "confirmation_status": "observed"},
            {"confidence": 0.1, "confirmation_status": "user_confirmed"},  # not held to it
        ],
        [
            {"confidence": 0.69, "confirmation_status": "inferred"},
            {"confidence": 0.0, "confirmation_status": "observed"},
        ],
        "confidence_below_min",
    ),
    "sensitivityCeiling": (
        {"sensitivityCeiling": "internal"},
        [{"sensitivity": "public"}, {"sensitivity": "internal"}],
        [{"sensitivity": "confidential"}, {"sensitivity": "restricted"}],
        "sensitivity_above_ceiling",
    ),
    "consentPolicyAllowed": (
        {"consentPolicyAllowed": ["explicit", "contractual"]},
        [{"consent_policy": "explicit"}, {"consent_policy": "contractual"}],
        [{"consent_policy": "implied"}, {"consent_policy": "unknown"}],
        "consent_not_allowed",
    ),
    "maxAgeSeconds": (
        {"maxAgeSeconds": 3600},
        [{"age": timedelta(minutes=1)}, {"age": timedelta(minutes=55)}],
        [{"age": timedelta(minutes=65)}, {"age": timedelta(days=30)}],
        "older_than_max_age",
    ),
}


def make_rows(workspace: Any, specs: list[dict[str, Any]], label: str) -> list[MemoryRecord]:
    now = timezone.now()
    items = []
    for n, spec in enumerate(specs):
        fields = dict(spec)
        age = fields.pop("age", timedelta(minutes=5))
        items.append(
            {"content": f"{label} {n}: Ada's release summary preferences", "created_at": now - age,
             **fields}
        )  # fmt: skip
    return factories.memories(workspace, *items)


class RecallAxisTests:
    @pytest.mark.parametrize("axis", list(AXIS_CASES))
    def test_each_recall_axis_filters_before_ranking(self, editor, workload_a, full_floor, axis):
        policy, passing, failing, code = AXIS_CASES[axis]
        set_workload(workload_a, **policy)
        kept = make_rows(editor.workspace, passing, "KEPT")
        dropped = make_rows(editor.workspace, failing, "DROPPED")

        envelope = recall(editor, workload_a)

        assert entry_ids(envelope) == ids(kept)
        diagnostics = envelope["diagnostics"]
        assert diagnostics["reasons"][code] == len(dropped)
        assert diagnostics["reasons"]["passes_policy"] == len(kept)
        assert diagnostics["counts"]["candidates"] == len(kept) + len(dropped)
        assert diagnostics["counts"]["afterPolicy"] == len(kept)
        decided = {d["id"]: d["code"] for d in diagnostics["decisions"]}
        assert {pk: decided[pk] for pk in ids(dropped)} == dict.fromkeys(ids(dropped), code)
        assert {pk: decided[pk] for pk in ids(kept)} == dict.fromkeys(ids(kept), "included")
        assert "DROPPED" not in json.dumps(envelope)

    @pytest.mark.parametrize(
        ("status", "recalled"),
        [
            ("user_confirmed", True),
            ("operator_confirmed", True),
            ("imported", True),
            ("unknown", True),
            ("inferred", False),
            ("observed", False),
        ],
    )
    def test_confidence_min_holds_inferred_and_observed_memories_only(
        self, editor, workload_a, full_floor, status, recalled
    ):
        # Seed 001: confidenceMin is the "minimum confidence for inferred or observed memory".
        set_workload(workload_a, confidenceMin=0.5)
        [row] = factories.memories(
            editor.workspace,
            {"content": "Ada's release summary", "confirmation_status": status, "confidence": 0.3},
        )

        envelope = recall(editor, workload_a)

        code = "included" if recalled else "confidence_below_min"
        decided = {d["id"]: d["code"] for d in envelope["diagnostics"]["decisions"]}
        assert decided == {str(row.pk): code}
        assert entry_ids(envelope) == ({str(row.pk)} if recalled else set())

    def test_a_row_failing_several_axes_is_reported_under_the_first(
        self, editor, workload_a, full_floor
    ):
        set_workload(workload_a, memoryTypeAllowed=["fact"], confidenceMin=0.5)
        [row] = factories.memories(
            editor.workspace, {"content": "x", "memory_type": "episode", "confidence": 0.1}
        )

        envelope = recall(editor, workload_a)

        assert envelope["diagnostics"]["reasons"] == {"memory_type_not_allowed": 1}
        assert envelope["diagnostics"]["decisions"] == [
            {"id": str(row.pk), "code": "memory_type_not_allowed"}
        ]

    def test_a_workload_policy_set_through_the_api_applies(self, editor, workload_a):
        response = editor.api().put(
            f"/v1/workloads/{workload_a.id}/policy?environment=prod",
            {"memoryTypeAllowed": ["decision"]},
            format="json",
        )
        assert response.status_code in (200, 201), response.content
        decision, fact = factories.memories(
            editor.workspace,
            {"content": "We decided on summaries", "memory_type": "decision"},
            {"content": "A fact about summaries"},
        )

        envelope = recall(editor, workload_a)

        assert entry_ids(envelope) == {str(decision.pk)}
        assert envelope["diagnostics"]["reasons"]["memory_type_not_allowed"] == 1

    def test_the_environment_picks_the_workload_policy(self, editor, workload_a):
        set_workload(workload_a, memoryTypeAllowed=["decision"])
        factories.memories(
            editor.workspace, {"content": "a decision", "memory_type": "decision"}, {"content": "f"}
        )

        in_prod = recall(editor, workload_a)
        in_dev = recall(editor, workload_a, environment="dev")

        assert len(in_prod["entries"]) == 1
        assert len(in_dev["entries"]) == 2

    def test_another_workspaces_actor_of_the_same_name_is_never_recalled(
        self, editor, workload_a, workspace_b
    ):
        mine = factories.memories(editor.workspace, {"content": "A's Ada: release summary"})
        factories.memories(workspace_b, {"content": "B's Ada: release summary preferences"})

        envelope = recall(editor, workload_a)

        assert entry_ids(envelope) == ids(mine)
        assert envelope["diagnostics"]["counts"]["candidates"] == 1

    def test_an_actor_that_does_not_exist_gets_an_empty_envelope_saying_so(
        self, editor, workload_a
    ):
        # tests/recall/test_unknown_actor.py says the rest
        response = post_recall(editor, workload_a)

        assert response.status_code == 200, response.content
        envelope = response.json()
        assert envelope["entries"] == [] and envelope["truncatedRefs"] == []
        assert envelope["diagnostics"]["warnings"] == ["actor_unknown"]
        assert AuditEvent.objects.filter(type=EventType.ASSEMBLED).count() == 1

    def test_an_actor_with_no_memories_gets_an_empty_envelope(self, editor, workload_a):
        factories.actor(editor.workspace)
        envelope = recall(editor, workload_a)

        assert envelope["entries"] == [] and envelope["truncatedRefs"] == []
        assert envelope["diagnostics"]["counts"] == {
            "candidates": 0, "afterPolicy": 0, "afterRanking": 0, "afterBudgetAllocation": 0,
        }  # fmt: skip
        assert envelope["diagnostics"]["warnings"] == []  # a known actor: not actor_unknown
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert "actorUnknown" not in event.payload


FAIL_CLOSED = [
    {"lifecycle_status": "inactive"},
    {"lifecycle_status": "stale"},
    {"lifecycle_status": "suppressed"},
    {"lifecycle_status": "disabled"},
    {"lifecycle_status": "expired"},
    {"is_current": False},
    {"expires_at": "past"},
    {"consent_policy": "withdrawn"},
]


class FailClosedTests:
    @pytest.fixture
    def wide_open(self, workspace_a: Any, workload_a: Workload) -> Workload:
        set_floor(
            workspace_a, relaxable=list(EVERYTHING), diagnosticsVerbosity="full", **EVERYTHING
        )
        return workload_a

    def rows(self, workspace: Any) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
        now = timezone.now()
        excluded_specs = [
            {**spec, "expires_at": now - timedelta(seconds=1)} if "expires_at" in spec else spec
            for spec in FAIL_CLOSED
        ]
        excluded = factories.memories(
            workspace,
            *(
                {"content": f"HIDDEN-{n} release summary preferences", **spec}
                for n, spec in enumerate(excluded_specs)
            ),
        )
        kept = factories.memories(
            workspace,
            {"content": "Visible release summary"},
            {"content": "Visible until tomorrow", "expires_at": now + timedelta(days=1)},
        )
        return excluded, kept

    def test_fail_closed_rows_never_appear_whatever_the_policy(self, editor, wide_open):
        excluded, kept = self.rows(editor.workspace)

        response = post_recall(editor, wide_open)

        assert response.status_code == 200, response.content
        envelope = response.json()
        assert entry_ids(envelope) == ids(kept)
        diagnostics = envelope["diagnostics"]
        assert diagnostics["verbosity"] == "full"
        assert diagnostics["reasons"]["lifecycle_excluded"] == len(FAIL_CLOSED)
        assert diagnostics["counts"]["candidates"] == len(FAIL_CLOSED) + 2
        assert diagnostics["counts"]["afterPolicy"] == 2
        assert not ids(excluded) & {d["id"] for d in diagnostics["decisions"]}
        assert b"HIDDEN" not in response.content

    def test_an_override_cannot_bring_back_a_fail_closed_row(self, editor, wide_open):
        excluded, kept = self.rows(editor.workspace)

        envelope = recall(editor, wide_open, policyOverride=EVERYTHING)

        assert entry_ids(envelope) == ids(kept)
        assert envelope["diagnostics"]["reasons"]["lifecycle_excluded"] == len(FAIL_CLOSED)

    @pytest.mark.parametrize(
        "unknown",
        [
            {"memory_type": "opinion"},
            {"source_kind": "rumour"},
            {"confirmation_status": "sure"},
            {"sensitivity": "secret"},
            {"consent_policy": "maybe"},
            {"lifecycle_status": "zombie"},
            {"segment_kind": "scratch"},
        ],
    )
    def test_a_value_outside_the_vocabulary_never_passes(self, editor, wide_open, unknown):
        # Rows written around the API (an old import, a manual fix) may carry any label.
        [odd] = factories.memories(
            editor.workspace, {"content": "ODD release summary preferences", **unknown}
        )
        kept = factories.memories(editor.workspace, {"content": "Visible release summary"})

        response = post_recall(editor, wide_open)

        assert response.status_code == 200, response.content
        assert entry_ids(response.json()) == ids(kept)
        assert b"ODD" not in response.content

    def test_fail_closed_rows_are_never_hit_counted(self, editor, wide_open):
        excluded, _ = self.rows(editor.workspace)

        recall(editor, wide_open)
        hits_fold(workspace_id=editor.workspace.pk)  # the recall's hits counted into the rows

        assert not MemoryRecord.objects.filter(pk__in=ids(excluded), hit_count__gt=0).exists()


class OverrideTests:
    @pytest.fixture
    def setup(self, workspace_a: Any, workload_a: Workload) -> dict[str, MemoryRecord]:
        set_floor(
            workspace_a,
            relaxable=["memoryTypeAllowed", "confidenceMin"],
            confidenceMin=0.5,
            diagnosticsVerbosity="full",
        )
        set_workload(workload_a, memoryTypeAllowed=["fact"], confidenceMin=0.8)
        rows = factories.memories(
            workspace_a,
            {"content": "sure fact", "memory_type": "fact", "confidence": 0.9},
            {"content": "sure preference", "memory_type": "preference", "confidence": 0.9},
            {
                "content": "unsure fact",
                "memory_type": "fact",
                "confidence": 0.6,
                "confirmation_status": "inferred",
            },
        )
        return {row.content: row for row in rows}

    def test_without_an_override_the_workload_policy_applies(self, editor, workload_a, setup):
        assert entry_ids(recall(editor, workload_a)) == ids([setup["sure fact"]])

    def test_an_override_of_a_relaxable_set_axis_replaces_the_workloads_value(
        self, editor, workload_a, setup
    ):
        plain = recall(editor, workload_a)

        envelope = recall(editor, workload_a, policyOverride={"memoryTypeAllowed": ["preference"]})

        assert entry_ids(envelope) == ids([setup["sure preference"]])
        assert envelope["effectivePolicyHash"] != plain["effectivePolicyHash"]
        assert envelope["effectiveBudgetHash"] == plain["effectiveBudgetHash"]

    def test_an_override_may_relax_a_number_down_to_the_floor(self, editor, workload_a, setup):
        envelope = recall(editor, workload_a, policyOverride={"confidenceMin": 0.5})

        assert entry_ids(envelope) == ids([setup["sure fact"], setup["unsure fact"]])

    @pytest.mark.parametrize(
        ("override", "axes"),
        [
            ({"sourceKindAllowed": ["user"]}, ["sourceKindAllowed"]),
            ({"totalTokenBudget": 100}, ["totalTokenBudget"]),
            (
                {"sensitivityCeiling": "public", "memoryTypeAllowed": ["fact"], "pinned": []},
                ["sensitivityCeiling", "pinned"],
            ),
        ],
    )
    def test_an_override_of_an_axis_that_is_not_relaxable_is_forbidden(
        self, editor, workload_a, setup, override, axes
    ):
        before = state(editor.workspace)

        response = post_recall(editor, workload_a, policyOverride=override)

        error = error_of(response, 403, "USER_OVERRIDE_NOT_PERMITTED")
        assert sorted(error["details"]["axes"]) == sorted(axes)
        assert state(editor.workspace) == before

    def test_an_override_past_the_floor_is_forbidden(self, editor, workload_a, setup):
        before = state(editor.workspace)

        response = post_recall(editor, workload_a, policyOverride={"confidenceMin": 0.4})

        error = error_of(response, 403, "USER_OVERRIDE_NOT_PERMITTED")
        assert error["details"]["axes"] == ["confidenceMin"]
        assert state(editor.workspace) == before

    def test_an_override_whose_reservations_overcommit_the_budget_is_refused(
        self, editor, workload_a
    ):
        set_floor(editor.workspace, relaxable=["perSegmentReservation"])
        factories.actor(editor.workspace)
        before = state(editor.workspace)
        too_much = {"memory": 1200, "retrieval": 1200, "system_policy": 500, "tool_result": 1400}

        response = post_recall(
            editor, workload_a, policyOverride={"perSegmentReservation": too_much}
        )

        error = error_of(response, 422, "BUDGET_NOT_HONOURABLE")
        assert "4300" in error["details"]["fields"]["perSegmentReservation"]
        assert state(editor.workspace) == before
        # Taken as written when it fits: 3200 tokens reserved of 3200.
        fits = {**too_much, "tool_result": 300}
        envelope = recall(editor, workload_a, policyOverride={"perSegmentReservation": fits})
        reserved = {kind: v["reserved"] for kind, v in envelope["budget"]["perKind"].items()}
        assert {kind: reserved.get(kind) for kind in fits} == fits

    def test_equal_overrides_share_one_cached_effective_policy(self, editor, workload_a, setup):
        """The memo is keyed on the normalised override: order and repeats make no new entry,
        and a request repeating a label 100,000 times costs no more memory than one."""
        policy_selectors._effective_cache.clear()
        a = recall(editor, workload_a, policyOverride={"memoryTypeAllowed": ["fact", "preference"]})
        b = recall(
            editor,
            workload_a,
            policyOverride={"memoryTypeAllowed": ["preference"] * 100_000 + ["fact"]},
        )

        assert a["effectivePolicyHash"] == b["effectivePolicyHash"]
        assert len(policy_selectors._effective_cache) == 1
        (key,) = policy_selectors._effective_cache
        assert len(key[2]) < 200

    @pytest.mark.parametrize(
        "override",
        [{"memoryTypeAllowed": ["opinion"]}, {"confidenceMin": 2}, {"colour": "red"}],
    )
    def test_a_malformed_override_is_a_400(self, editor, workload_a, setup, override):
        before = state(editor.workspace)

        response = post_recall(editor, workload_a, policyOverride=override)

        assert response.status_code == 400, response.content
        assert state(editor.workspace) == before


class RecallRequestTests:
    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"topK": 0}, "topK"),
            ({"topK": 500}, "topK"),
            ({"topK": "x"}, "topK"),
            ({"topK": None}, "topK"),
            ({"query": None}, "query"),
            ({"workloadId": "not-a-uuid"}, "workloadId"),
            ({"environment": "qa"}, "environment"),
            ({"environment": "not a slug"}, "environment"),
            ({"policyOverride": ["memoryTypeAllowed"]}, "policyOverride"),
            ({"colour": "red"}, "colour"),
        ],
    )
    def test_a_bad_request_is_a_400_naming_the_field(self, editor, workload_a, changes, field):
        before = state(editor.workspace)

        response = post_recall(editor, workload_a, **changes)

        error = error_of(response, 400)
        assert field in error["details"]["fields"], error
        assert state(editor.workspace) == before

    @pytest.mark.parametrize("missing", ["query", "workloadId"])
    def test_a_missing_field_is_a_400(self, editor, workload_a, missing):
        body = recall_body(workload_a)
        del body[missing]

        response = editor.api().post(RECALL, body, format="json")

        assert missing in error_of(response, 400)["details"]["fields"]

    def test_top_k_defaults_to_10_and_may_be_200(self, editor, workload_a):
        factories.memories(editor.workspace, *({"content": f"m {n}"} for n in range(12)))
        body = recall_body(workload_a)
        del body["topK"]

        default = editor.api().post(RECALL, body, format="json").json()
        widest = recall(editor, workload_a, topK=200)

        assert default["diagnostics"]["counts"]["afterRanking"] == 10
        assert widest["diagnostics"]["counts"]["afterRanking"] == 12

    @pytest.mark.parametrize(
        ("actor", "field"),
        [
            ("robot:x", "actorId"),
            ("user:a\u200bb", "actorId"),
            # a control character in the path is refused before any view (portal.input_guard)
            ("user:a%00b", "path"),
            ("user:a%1Fb", "path"),
        ],
    )
    def test_a_malformed_actor_id_is_a_400(self, editor, workload_a, actor, field):
        response = post_recall(editor, workload_a, actor=actor)

        assert field in error_of(response, 400)["details"]["fields"]

    def test_an_unknown_workload_is_not_found(self, editor, workload_a):
        response = post_recall(editor, workload_a, workloadId=str(uuid.uuid4()))

        error_of(response, 404, "NOT_FOUND")

    def test_another_workspaces_workload_is_not_found(self, editor, workload_a, workload_b):
        before = state(editor.workspace)

        response = post_recall(editor, workload_b)

        error_of(response, 404, "NOT_FOUND")
        assert state(editor.workspace) == before
        assert not AuditEvent.objects.filter(type=EventType.ASSEMBLED).exists()

    def test_a_viewer_may_not_recall(self, viewer, workload_a):
        factories.memories(viewer.workspace, {"content": "release summary"})
        before = state(viewer.workspace)

        error_of(post_recall(viewer, workload_a), 403, "PERMISSION_DENIED")

        assert state(viewer.workspace) == before

    def test_an_outsider_gets_404_and_changes_nothing(self, outsider, workload_a):
        factories.memories(workload_a.workspace, {"content": "release summary"})
        before = state(workload_a.workspace)

        by_token = post_recall(outsider, workload_a)
        by_slug = outsider.api().post(
            f"{RECALL}?workspace=team-a", recall_body(workload_a), format="json"
        )
        by_session = csrf_session(outsider).post(
            f"{RECALL}?workspace=team-a", recall_body(workload_a), format="json"
        )

        for response in (by_token, by_slug, by_session):
            error_of(response, 404, "NOT_FOUND")
        assert state(workload_a.workspace) == before
        assert not AuditEvent.objects.filter(type=EventType.ASSEMBLED).exists()

    def test_a_session_editor_recalls_with_a_csrf_token(self, editor, workload_a):
        factories.memories(editor.workspace, {"content": "release summary"})

        response = csrf_session(editor).post(
            f"{RECALL}?workspace=team-a", recall_body(workload_a), format="json"
        )

        assert response.status_code == 200, response.content
        assert AuditEvent.objects.get(type=EventType.ASSEMBLED).author == "user:eddie"


@pytest.fixture
def ranked(workspace_a: Any) -> list[MemoryRecord]:
    """Eight eligible memories of decreasing relevance to the query ``recall_body`` sends,
    and two that fail policy."""
    rows = factories.memories(
        workspace_a,
        {"content": "release summary preferences of Ada"},
        {"content": "Ada's release summary preferences, in short"},
        {"content": "release summary"},
        {"content": "summary preferences"},
        {"content": "release notes are read on Mondays"},
        {"content": "preferences about tea"},
        {"content": "Ada lives in Paris"},
        {"content": "The build takes ten minutes"},
    )
    factories.memories(
        workspace_a,
        {"content": "POLICY-FAILED release summary preferences", "sensitivity": "restricted"},
        {"content": "POLICY-FAILED too: release summary", "sensitivity": "restricted"},
    )
    return rows


class EnvelopeTests:
    def test_the_funnel_narrows_and_entries_come_best_first(self, editor, workload_a, ranked):
        envelope = recall(editor, workload_a, topK=5)

        counts = envelope["diagnostics"]["counts"]
        assert counts == {
            "candidates": 10, "afterPolicy": 8, "afterRanking": 5, "afterBudgetAllocation": 5,
        }  # fmt: skip
        scores = [entry["score"] for entry in envelope["entries"]]
        assert scores == sorted(scores, reverse=True)
        assert envelope["entries"][0]["id"] in ids(ranked[:2])
        assert envelope["diagnostics"]["reasons"]["below_top_k"] == 3
        assert envelope["diagnostics"]["reasons"]["sensitivity_above_ceiling"] == 2

    def test_an_entry_carries_the_spec_fields(self, editor, workload_a, ranked):
        entry = recall(editor, workload_a, topK=1)["entries"][0]

        assert set(entry) >= {
            "id", "segmentKind", "memoryType", "sourceKind", "confirmationStatus", "confidence",
            "sensitivity", "content", "tokens", "similarity", "score", "createdAt",
        }  # fmt: skip
        row = MemoryRecord.objects.get(pk=entry["id"])
        assert entry["content"] == row.content
        assert entry["tokens"] == row.token_count
        assert 0 < entry["score"] <= entry["similarity"] <= 1

    def test_the_envelope_has_every_spec_key(self, editor, workload_a, ranked):
        envelope = recall(editor, workload_a)

        assert set(envelope) >= {
            "entries", "truncatedRefs", "budget", "diagnostics", "effectivePolicyHash",
            "effectiveBudgetHash", "prefixFingerprint", "digest", "tokenCounts", "reused",
            "envelopeId",
        }  # fmt: skip
        assert set(envelope["budget"]) >= {"totalTokenBudget", "perKind", "usedTokens", "pressure"}
        for allocation in envelope["budget"]["perKind"].values():
            assert set(allocation) == {"reserved", "ceiling", "demand", "allocated", "used"}
        assert envelope["budget"]["usedTokens"] == sum(e["tokens"] for e in envelope["entries"])
        assert envelope["tokenCounts"]["used"] == envelope["budget"]["usedTokens"]

    @pytest.mark.parametrize("verbosity", ["none", "full"])
    def test_the_envelope_sends_the_keys_of_its_type_in_their_order(
        self, editor, workload_a, verbosity
    ):
        # The types in recall.envelope describe the JSON key for key, in the order it is sent.
        def keys(typed: Any) -> list[str]:
            return list(typed.__annotations__)

        set_floor(
            editor.workspace, perSegmentReservation={}, pinned=[], diagnosticsVerbosity=verbosity
        )
        set_workload(workload_a, totalTokenBudget=40)
        factories.memories(
            editor.workspace,
            # 12 tokens apiece: three fit in 40, and the 4 left over keep a truncated ref.
            *({"content": f"release summary preferences, memory number {n:02d}..."}
              for n in range(5)),
            {"content": "release summary preferences, restricted", "sensitivity": "restricted"},
        )  # fmt: skip

        envelope = recall(editor, workload_a)

        assert list(envelope) == keys(Envelope)
        assert [list(entry) for entry in envelope["entries"]] == [keys(Entry)] * 3
        assert [list(ref) for ref in envelope["truncatedRefs"]] == [keys(TruncatedRef)]
        assert list(envelope["budget"]) == keys(Budget)
        for allocation in envelope["budget"]["perKind"].values():
            assert list(allocation) == keys(KindBudget)
        assert list(envelope["tokenCounts"]) == keys(TokenCounts)
        diagnostics = envelope["diagnostics"]
        assert list(diagnostics["counts"]) == keys(Counts)
        if verbosity == "none":  # the keys marked NotRequired are left out
            assert list(diagnostics) == ["verbosity", "counts", "decisions"]
            assert diagnostics["decisions"] == []
        else:
            assert list(diagnostics) == keys(Diagnostics)
            ranked, rejected = diagnostics["decisions"][:-1], diagnostics["decisions"][-1]
            assert [list(d) for d in ranked] == [keys(ReportedDecision)] * 5
            assert list(rejected) == ["id", "code"]

    def test_the_digest_covers_the_entries_in_order(self, editor, workload_a, ranked):
        envelope = recall(editor, workload_a)

        contents = dict(MemoryRecord.objects.values_list("id", "content"))
        expected = context_digest(
            (e["id"], hashlib.sha256(contents[int(e["id"])].encode()).hexdigest())
            for e in envelope["entries"]
        )
        assert envelope["digest"] == expected

    def test_the_same_recall_twice_gives_the_same_digest_and_is_reused(
        self, editor, workload_a, ranked
    ):
        first = recall(editor, workload_a)
        second = recall(editor, workload_a)

        assert first["reused"] is False
        assert second["reused"] is True
        assert second["digest"] == first["digest"]
        assert second["prefixFingerprint"] == first["prefixFingerprint"]
        assert second["envelopeId"] != first["envelopeId"]

    def test_the_prefix_fingerprint_follows_only_the_pinned_part(self, editor, workload_a):
        system, memory = factories.memories(
            editor.workspace,
            {"content": "Answer release questions in English", "segment_kind": "system_policy"},
            {"content": "Ada likes release summary preferences short"},
        )
        first = recall(editor, workload_a)
        assert entry_ids(first) == ids([system, memory])

        editor.api().patch(
            f"/v1/memory/memories/{memory.pk}",
            {"content": "Ada likes release summary preferences long"},
            format="json",
        )
        memory_edited = recall(editor, workload_a)
        editor.api().patch(
            f"/v1/memory/memories/{system.pk}",
            {"content": "Answer release questions in French"},
            format="json",
        )
        system_edited = recall(editor, workload_a)

        assert memory_edited["digest"] != first["digest"]
        assert memory_edited["prefixFingerprint"] == first["prefixFingerprint"]
        assert memory_edited["reused"] is True
        assert system_edited["prefixFingerprint"] != first["prefixFingerprint"]
        assert system_edited["reused"] is False

    def test_a_different_effective_policy_is_not_reused(self, editor, workload_a, ranked):
        recall(editor, workload_a)
        set_workload(workload_a, sensitivityCeiling="internal")

        changed = recall(editor, workload_a)
        in_another_environment = recall(editor, workload_a, environment="dev")

        assert changed["reused"] is False
        assert in_another_environment["reused"] is False

    def test_the_audit_event_and_the_effective_policy_agree_with_the_envelope(
        self, editor, viewer, workload_a, ranked
    ):
        set_workload(workload_a, confidenceMin=0.3)
        envelope = recall(editor, workload_a)

        events = viewer.api().get("/v1/audit/events/", {"type": "context.assembled"}).json()
        effective = (
            viewer.api()
            .get(f"/v1/workloads/{workload_a.id}/effective-policy", {"environment": "prod"})
            .json()
        )

        assert events["count"] == 1
        event = events["results"][0]
        assert event["type"] == "context.assembled"
        assert event["actorId"] == "user:ada"
        assert event["workloadId"] == str(workload_a.id)
        assert event["environment"] == "prod"
        assert event["author"] == "token:eddie-token"
        payload = event["payload"]
        for key in (
            "envelopeId", "effectivePolicyHash", "effectiveBudgetHash", "prefixFingerprint",
            "digest", "tokenCounts", "reused",
        ):  # fmt: skip
            assert payload[key] == envelope[key], key
        assert payload["counts"] == envelope["diagnostics"]["counts"]
        assert effective["effectivePolicyHash"] == envelope["effectivePolicyHash"]
        assert effective["effectiveBudgetHash"] == envelope["effectiveBudgetHash"]
        assert viewer.api().get("/v1/audit/verify").json()["ok"] is True

    def test_only_returned_entries_are_hit_counted(self, editor, workload_a, ranked):
        start = timezone.now()

        envelope = recall(editor, workload_a, topK=3)
        hits_fold(workspace_id=editor.workspace.pk)  # the recall's hits counted into the rows

        returned = entry_ids(envelope)
        assert len(returned) == 3
        for row in MemoryRecord.objects.filter(workspace=editor.workspace):
            if str(row.pk) in returned:
                assert row.hit_count == 1
                assert start <= row.last_accessed_at <= timezone.now()
            else:
                assert row.hit_count == 0
                assert row.last_accessed_at is None

        recall(editor, workload_a, topK=3)
        hits_fold(workspace_id=editor.workspace.pk)
        assert sorted(
            MemoryRecord.objects.filter(pk__in=returned).values_list("hit_count", flat=True)
        ) == [2, 2, 2]


class VerbosityTests:
    @pytest.mark.parametrize("verbosity", ["none", "summary", "full"])
    def test_each_verbosity_reports_what_it_should(
        self, editor, workload_a, full_floor, ranked, verbosity
    ):
        set_workload(workload_a, diagnosticsVerbosity=verbosity)

        diagnostics = recall(editor, workload_a, topK=5)["diagnostics"]

        assert diagnostics["verbosity"] == verbosity
        assert diagnostics["counts"]["afterRanking"] == 5
        if verbosity == "none":
            assert "reasons" not in diagnostics
            assert diagnostics["decisions"] == []
        elif verbosity == "summary":
            assert diagnostics["reasons"]["included"] == 5
            assert diagnostics["decisions"] == []
        else:
            assert diagnostics["reasons"]["included"] == 5
            codes = [d["code"] for d in diagnostics["decisions"]]
            assert codes == ["included"] * 5 + ["sensitivity_above_ceiling"] * 2

    def test_full_decisions_are_bounded_at_200_and_never_carry_failed_content(
        self, editor, workload_a, full_floor
    ):
        factories.memories(
            editor.workspace,
            *({"content": f"SECRET-{n} release summary", "sensitivity": "restricted"}
              for n in range(250)),
        )  # fmt: skip
        kept = factories.memories(
            editor.workspace, *({"content": f"ok {n} release summary"} for n in range(5))
        )

        response = post_recall(editor, workload_a)

        assert response.status_code == 200, response.content
        diagnostics = response.json()["diagnostics"]
        assert len(diagnostics["decisions"]) == 200
        assert diagnostics["decisions"][:5] == [
            {**d, "code": "included"} for d in diagnostics["decisions"][:5]
        ]
        assert {d["id"] for d in diagnostics["decisions"][:5]} == ids(kept)
        assert diagnostics["reasons"]["sensitivity_above_ceiling"] == 250
        assert b"SECRET" not in response.content
        for decision in diagnostics["decisions"][5:]:
            assert set(decision) == {"id", "code"}


class BudgetTests:
    def test_a_tiny_budget_cuts_entries_and_keeps_a_truncated_ref(self, editor, workload_a):
        set_floor(
            editor.workspace, perSegmentReservation={}, pinned=[], diagnosticsVerbosity="full"
        )
        set_workload(workload_a, totalTokenBudget=40)
        rows = factories.memories(
            editor.workspace,
            # 48 characters each: 12 tokens apiece, so three fit in 40 with 4 left over.
            *(
                {"content": f"release summary preferences, memory number {n:02d}..."}
                for n in range(5)
            ),
        )
        assert {row.token_count for row in rows} == {12}

        envelope = recall(editor, workload_a)

        budget = envelope["budget"]
        assert budget["pressure"] is True
        assert budget["totalTokenBudget"] == 40
        assert budget["usedTokens"] == 36 <= 40
        assert len(envelope["entries"]) == 3
        [ref] = envelope["truncatedRefs"]
        assert set(ref) == {"id", "segmentKind", "memoryType", "tokens"}
        assert ref["id"] not in entry_ids(envelope)
        reasons = envelope["diagnostics"]["reasons"]
        assert reasons["included"] == 3
        assert reasons["truncated"] == 1
        assert reasons["budget_drop_order"] == 1
        counts = envelope["diagnostics"]["counts"]
        assert counts["afterRanking"] == 5
        assert counts["afterBudgetAllocation"] == 4
        contents = {str(r.pk): r.content for r in rows}
        assert envelope["digest"] == context_digest(
            (pk, hashlib.sha256(contents[pk].encode()).hexdigest())
            for pk in [e["id"] for e in envelope["entries"]] + [ref["id"]]
        )
        # A truncated ref is not returned content: it is not hit-counted.
        hits_fold(workspace_id=editor.workspace.pk)
        assert MemoryRecord.objects.get(pk=ref["id"]).hit_count == 0
        assert contents[ref["id"]] not in json.dumps(envelope["entries"])

    def test_a_forbidden_segment_kind_gets_nothing(self, editor, workload_a, full_floor):
        set_workload(workload_a, forbiddenSegmentKinds=["tool_result"])
        memories = factories.memories(
            editor.workspace, {"content": "release summary"}, {"content": "summary preferences"}
        )
        tools = factories.memories(
            editor.workspace,
            {"content": "tool said release summary", "segment_kind": "tool_result"},
            {"content": "tool said preferences", "segment_kind": "tool_result"},
        )

        envelope = recall(editor, workload_a)

        assert entry_ids(envelope) == ids(memories)
        assert envelope["diagnostics"]["reasons"]["segment_kind_forbidden"] == 2
        assert envelope["budget"]["perKind"]["tool_result"] == {
            "reserved": 0, "ceiling": 0, "demand": 0, "allocated": 0, "used": 0,
        }  # fmt: skip
        decided = {d["id"]: d["code"] for d in envelope["diagnostics"]["decisions"]}
        assert {decided[pk] for pk in ids(tools)} == {"segment_kind_forbidden"}


class RecallQueryCountTests:
    @pytest.mark.parametrize("how_many", [3, 60])
    @pytest.mark.parametrize("verbosity", ["summary", "full"])
    def test_recall_runs_a_fixed_number_of_queries(
        self, editor, workload_a, how_many, verbosity, django_assert_num_queries
    ):
        set_floor(editor.workspace, diagnosticsVerbosity=verbosity)
        factories.memories(
            editor.workspace,
            *({"content": f"release summary {n}", "confidence": 0.9 if n % 3 else 0.1}
              for n in range(how_many)),
        )  # fmt: skip
        set_workload(workload_a, confidenceMin=0.3)
        client = editor.api()
        body = recall_body(workload_a, topK=20)

        # token, policy context (workload, environment, floor, workload policy), the read
        # (actor, funnel, rejected ids, previous fingerprint, chain tip, nearest rows), the
        # write (event, chain tip, hit counts in one statement)
        with django_assert_num_queries(4):
            response = client.post(RECALL, body, format="json")

        assert response.status_code == 200, response.content

    def test_a_repeated_recall_checks_the_remembered_policy_in_its_read(
        self, editor, workload_a, django_assert_num_queries
    ):
        factories.memories(editor.workspace, {"content": "release summary"})
        client = editor.api()
        first = client.post(RECALL, recall_body(workload_a), format="json")
        assert first.status_code == 200, first.content

        # token, the read (which checks the policy context is still the one remembered), write
        with django_assert_num_queries(3):
            again = client.post(RECALL, recall_body(workload_a), format="json")
        assert again.status_code == 200, again.content
        set_workload(workload_a, sensitivityCeiling="public")
        # a policy saved since: the context has moved, so it is read again, and the read too
        with django_assert_num_queries(5):
            changed = client.post(RECALL, recall_body(workload_a), format="json")

        assert changed.status_code == 200, changed.content
        hashes = [r.json()["effectivePolicyHash"] for r in (first, again, changed)]
        assert hashes[0] == hashes[1] != hashes[2]
        expected = policy_selectors.effective_policy_for(
            workload=workload_a, environment="prod"
        ).policy_hash
        assert hashes[2] == expected

    def test_a_workload_archived_after_its_policy_was_remembered_is_refused(
        self, editor, workload_a
    ):
        from policies.services import workload_archive

        factories.memories(editor.workspace, {"content": "release summary"})
        client = editor.api()
        assert client.post(RECALL, recall_body(workload_a), format="json").status_code == 200
        workload_archive(workload=workload_a, author="system:test")

        response = client.post(RECALL, recall_body(workload_a), format="json")

        error_of(response, 409, "WORKLOAD_ARCHIVED")

    def test_the_hot_path_statements_are_prepared_and_planned_once(self, editor, workload_a):
        """Each statement of the hot path is prepared on the connection and runs its generic
        plan: PostgreSQL plans the recall read once, not on every call."""
        patterns = (
            "%FROM recall_actor a%",
            "%INTO audit_auditchainhead AS head%",
            "%FROM policies_workspacepolicyversion%",
            "%FROM portal_apitoken t%",
        )

        def plans() -> dict[str, tuple[str, int, int]]:
            # Each prepared statement of the connection matching a pattern: (pattern, generic
            # plans, custom plans). The connection outlives the test, and a rollback keeps what
            # it prepared, so earlier tests' statements may be there too.
            with connection.cursor() as cursor:
                found = {}
                for pattern in patterns:
                    cursor.execute(
                        "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
                        " WHERE statement LIKE %s",
                        [pattern],
                    )
                    for name, generic, custom in cursor.fetchall():
                        # the read names the policy's tables too: its own pattern comes first
                        found.setdefault(name, (pattern, generic, custom))
                return found

        factories.memories(editor.workspace, {"content": "release summary"})
        client = editor.api()
        before = plans()
        for _ in range(5):
            # as every recall would if none remembered the policy: the context is read too
            policy_selectors.remembered_policies_forget()
            response = client.post(RECALL, recall_body(workload_a), format="json")
            assert response.status_code == 200, response.content

        with connection.cursor() as cursor:
            cursor.execute("SHOW plan_cache_mode")
            assert cursor.fetchone()[0] == "force_generic_plan"
        after = plans()
        # The statements these recalls ran on their generic plan, none ever planned for its
        # parameters; run more than once, exactly one per pattern (an actor's first read also
        # tries to store its funnel, a statement of its own run once).
        ran = {
            name: (pattern, generic - before.get(name, (pattern, 0, 0))[1], custom)
            for name, (pattern, generic, custom) in after.items()
            if generic > before.get(name, (pattern, 0, 0))[1]
        }
        repeated = sorted(pattern for pattern, runs, _ in ran.values() if runs >= 2)
        assert repeated == sorted(patterns), ran
        assert all(custom == 0 for _, _, custom in ran.values()), ran


class RecallRequestTypeTests:
    @pytest.mark.parametrize(
        ("change", "field"),
        [({"topK": "5"}, "topK"), ({"query": 12}, "query"), ({"workloadId": 5}, "workloadId")],
    )
    def test_a_value_of_the_wrong_json_type_is_refused(self, editor, workload_a, change, field):
        response = editor.api().post(RECALL, {**recall_body(workload_a), **change}, format="json")

        assert response.status_code == 400, response.content
        assert field in response.json()["error"]["details"]["fields"]

    def test_an_unknown_key_names_the_one_meant_with_every_other_error(self, editor, workload_a):
        body = {**recall_body(workload_a), "top_k": 5, "query": 12}
        response = editor.api().post(RECALL, body, format="json")

        fields = error_of(response, 400)["details"]["fields"]
        assert fields["top_k"] == "Unknown field; did you mean 'topK'?"
        assert "query" in fields  # reported together, not after the unknown key is fixed
        far = editor.api().post(RECALL, {**recall_body(workload_a), "zz": 1}, format="json")
        assert error_of(far, 400)["details"]["fields"]["zz"] == (
            "Unknown field; expected one of: workloadId, environment, query, topK, policyOverride."
        )
