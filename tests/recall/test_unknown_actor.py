"""A recall for an actor the workspace does not have yet (a new user's first turn): a 200 with
an empty envelope, the warning ``actor_unknown``, recorded like any recall; no actor created.
A malformed or lookalike actor id stays a 400.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent, EventType, Injection
from policies.algebra import default_floor
from policies.services import workspace_policy_save
from recall import erasure
from recall.models import Actor, MemoryRecord
from tests.helpers import QUERY, error_of, post_recall, recall
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, workload_a, made_first = module_scoped("workspace_a", "editor", "workload_a")

NOBODY = "user:nobody"
ZERO = {"candidates": 0, "afterPolicy": 0, "afterRanking": 0, "afterBudgetAllocation": 0}


def set_verbosity(workspace: Any, verbosity: str) -> None:
    workspace_policy_save(
        workspace=workspace,
        document={**default_floor(), "diagnosticsVerbosity": verbosity, "relaxableAxes": []},
        author="system:test",
        comment="Test floor",
    )


def assembled() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("pk"))


@pytest.fixture
def others(workspace_a: Any) -> list[MemoryRecord]:
    """Another actor's memories, which an unknown actor's recall must leave untouched."""
    return factories.memories(workspace_a, {"content": "release summary preferences"})


class UnknownActorTests:
    @pytest.mark.parametrize("verbosity", ["summary", "full"])
    def test_it_is_an_empty_envelope_with_the_warning(self, editor, workload_a, verbosity):
        set_verbosity(editor.workspace, verbosity)

        envelope = recall(editor, workload_a, actor=NOBODY)

        assert envelope["entries"] == [] and envelope["truncatedRefs"] == []
        diagnostics = envelope["diagnostics"]
        assert diagnostics["counts"] == ZERO
        assert diagnostics["warnings"] == ["actor_unknown"]
        assert diagnostics["reasons"] == {} and diagnostics["decisions"] == []
        assert diagnostics["accessPath"] == "none"
        assert envelope["tokenCounts"]["entries"] == 0 and envelope["budget"]["usedTokens"] == 0

    def test_it_is_recorded_like_any_recall_and_creates_no_actor(self, editor, workload_a, others):
        envelope = recall(editor, workload_a, actor=NOBODY)

        [event] = assembled()
        assert event.actor_id == NOBODY and event.workload_id == workload_a.id
        assert event.payload["envelopeId"] == envelope["envelopeId"]
        assert event.payload["counts"] == ZERO
        assert event.payload["memoryIds"] == [] and event.payload["truncatedIds"] == []
        assert event.payload["actorUnknown"] is True
        assert not Actor.objects.filter(name="nobody").exists()
        # hits nothing: no injection, the other actor's memories untouched
        assert not Injection.objects.filter(event=event).exists()
        assert MemoryRecord.objects.get(pk=others[0].pk).hit_count == 0

    def test_at_verbosity_none_the_envelope_is_bare_and_the_event_says_it(self, editor, workload_a):
        set_verbosity(editor.workspace, "none")

        envelope = recall(editor, workload_a, actor=NOBODY)

        assert envelope["diagnostics"] == {"verbosity": "none", "counts": ZERO, "decisions": []}
        [event] = assembled()
        assert event.payload["actorUnknown"] is True

    def test_a_known_actors_recall_says_nothing_of_it(self, editor, workload_a, others):
        envelope = recall(editor, workload_a)

        assert envelope["entries"] and envelope["diagnostics"]["warnings"] == []
        assert "actorUnknown" not in assembled()[0].payload

    def test_its_fingerprint_is_reused_as_any_recalls(self, editor, workload_a):
        first = recall(editor, workload_a, actor=NOBODY)
        second = recall(editor, workload_a, actor=NOBODY)

        assert first["reused"] is False and second["reused"] is True
        assert first["prefixFingerprint"] == second["prefixFingerprint"]
        assert first["digest"] == second["digest"]
        # the same empty context as an actor that exists without memories
        factories.actor(editor.workspace, "user:empty")
        empty = recall(editor, workload_a, actor="user:empty")
        assert empty["prefixFingerprint"] == first["prefixFingerprint"]
        assert empty["diagnostics"]["warnings"] == []

    def test_once_a_memory_is_written_the_actor_is_known(self, editor, workload_a):
        recall(editor, workload_a, actor=NOBODY)
        factories.memories(
            editor.workspace, {"content": "release summary preferences"}, actor_id=NOBODY
        )

        envelope = recall(editor, workload_a, actor=NOBODY)

        assert len(envelope["entries"]) == 1
        assert envelope["diagnostics"]["warnings"] == []

    def test_an_id_in_decomposed_form_is_recorded_in_its_canonical_form(self, editor, workload_a):
        recall(editor, workload_a, actor="user:" + unicodedata.normalize("NFD", "Zoë"))

        assert assembled()[0].actor_id == "user:Zoë"

    def test_its_event_is_shown_and_can_be_run_again(self, editor, workload_a):
        recall(editor, workload_a, actor=NOBODY)
        [event] = assembled()

        replayed = editor.api().post(
            f"/v1/audit/events/{event.pk}/replay", {"query": QUERY}, format="json"
        )
        assert replayed.status_code == 200, replayed.content
        assert replayed.json()["memories"] == []
        client = Client()
        client.force_login(editor.user)
        page = client.get(reverse("audit:event", args=[editor.workspace.slug, event.pk]))
        assert page.status_code == 200

    def test_an_erased_actor_is_empty_without_the_warning(self, editor, workload_a, others):
        erasure.actor_erase(workspace=editor.workspace, actor_id="user:ada", author="system:test")

        envelope = recall(editor, workload_a)

        assert envelope["entries"] == [] and envelope["diagnostics"]["counts"] == ZERO
        assert envelope["diagnostics"]["warnings"] == []
        assert "actorUnknown" not in assembled()[0].payload

    def test_an_actor_of_another_workspace_is_unknown_here(self, editor, workload_a, workspace_b):
        factories.memories(workspace_b, {"content": "B's release summary"}, actor_id=NOBODY)

        envelope = recall(editor, workload_a, actor=NOBODY)

        assert envelope["entries"] == []
        assert envelope["diagnostics"]["warnings"] == ["actor_unknown"]

    def test_an_outsider_or_a_viewer_is_refused_and_nothing_is_recorded(
        self, outsider, viewer, workload_a
    ):
        error_of(post_recall(outsider, workload_a, actor=NOBODY), 404, "NOT_FOUND")
        error_of(post_recall(viewer, workload_a, actor=NOBODY), 403, "PERMISSION_DENIED")

        assert assembled() == []

    @pytest.mark.parametrize(
        ("actor", "why"),
        [
            ("user:\u0430da", "mixes scripts"),  # a Cyrillic а among Latin letters
            ("user:ada\u200b", "invisible"),
            ("user:\uff41da", "compatibility form"),  # a full-width a
            ("nobody", "kind:name"),
            ("robot:ada", "kind:name"),
        ],
    )
    def test_a_malformed_or_lookalike_id_is_still_a_400(self, editor, workload_a, actor, why):
        error = error_of(post_recall(editor, workload_a, actor=actor), 400, "INVALID_REQUEST")

        assert why in error["details"]["fields"]["actorId"]
        assert assembled() == [] and not Actor.objects.exists()

    def test_it_runs_as_many_statements_as_a_known_actors_recall(
        self, editor, workload_a, others, django_assert_num_queries
    ):
        client = editor.api()
        for actor in ("user:ada", NOBODY):  # the token and the policy remembered
            response = client.post(
                f"/v1/memory/actors/{actor}/recall",
                {"workloadId": str(workload_a.id), "environment": "prod", "query": "q"},
                format="json",
            )
            assert response.status_code == 200, response.content

        for actor in ("user:ada", NOBODY):
            # token, the read, the write
            with django_assert_num_queries(3):
                response = client.post(
                    f"/v1/memory/actors/{actor}/recall",
                    {"workloadId": str(workload_a.id), "environment": "prod", "query": "q"},
                    format="json",
                )
            assert response.status_code == 200, response.content
