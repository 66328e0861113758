"""The demo's queries with the default embedder (all-MiniLM-L6-v2 on onnxruntime): each query
of ``console/demo/acme.yaml`` names the memory it is asked for, and the embedder must rank
that memory among its actor's first three; the recall, under the demo's policies and their
similarity floors, ranks it among its first three whenever the policies let it through, and
``make run``'s sandbox answers Ada with it on top."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import override_settings

from chat.models import Session
from console.demo.memories import DemoQuery, demo_data
from policies.models import Workload
from portal.models import Workspace
from recall import runtime
from recall.embedding import HashingEmbedder
from recall.embedding_onnx import MODEL_NAME, MiniLMOnnxEmbedder
from recall.engine.policy_filter import POLICY_CODES
from recall.models import MemoryRecord
from recall.page_selectors import recall_preview


def asked() -> list[tuple[str, str, DemoQuery]]:
    """Every (workload, actor, query) of the demo."""
    return [
        (workload, actor, query)
        for workload, by_actor in demo_data().queries.items()
        for actor, queries in by_actor.items()
        for query in queries
    ]


def ranks(embedder: MiniLMOnnxEmbedder | HashingEmbedder) -> dict[str, int]:
    """Each query's memory's rank among its actor's memories, by cosine similarity."""
    data = demo_data()
    out = {}
    vectors_of: dict[str, np.ndarray] = {}  # each actor's memories, embedded once
    for _, actor, query in asked():
        memories = data.memories(actor)
        if actor not in vectors_of:
            texts = [m.text.replace("{date}", "14 March") for m in memories]
            vectors_of[actor] = np.array(embedder.embed(texts))
        vectors = vectors_of[actor]
        [wanted] = data.found_by(actor, query)
        scores = vectors @ np.array(embedder.embed([query.text])[0])
        mine = scores[memories.index(wanted)]
        out[f"{actor}: {query.text}"] = int((scores >= mine).sum())
    return out


@pytest.fixture(scope="module")
def onnx() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(384)


@pytest.fixture(scope="module")
def demo_loaded(module_db: None) -> Iterator[None]:
    """The demo, loaded once for the module with the default embedder (the tests' is the
    hashing one), which the tests then recall with."""
    with override_settings(RECALL_EMBEDDER="minilm-onnx"):
        runtime.embedder.cache_clear()
        runtime.query_vector_cache.cache_clear()
        call_command("load_demo", stdout=StringIO())
        yield
    runtime.embedder.cache_clear()
    runtime.query_vector_cache.cache_clear()


class DemoQueryTests:
    def test_the_embedder_ranks_every_query_s_memory_among_the_first_three(self, onnx):
        found = ranks(onnx)
        assert len(found) == 66
        assert {query: rank for query, rank in found.items() if rank > 3} == {}
        assert sum(rank == 1 for rank in found.values()) >= 0.8 * len(found)

    def test_the_hashing_embedder_misses_some_of_them(self):
        found = ranks(HashingEmbedder(384))
        assert sum(rank > 3 for rank in found.values()) >= 5


# Where the demo recalls each workload (console/demo/history.py ``CALLERS``).
ENVIRONMENTS = {
    "support-assistant": ("prod", "staging"),
    "release-planner": ("prod", "staging"),
    "onboarding-guide": ("prod", "dev"),
}
# The queries of Ada's whose memory the policy lets through but which is not the top entry: a
# memory of the demo's week ("Ada asked for credit-note approval reminders", 5 days old,
# similarity 0.48 and 0.45 to them) outranks FR-2291 (0.75, about 90 days old) and the
# Northwind approvals (0.89, older still) on age, and the support assistant's floor (0.45)
# cannot leave it out without leaving out another query's memory (0.47). Both rank second or
# third here; int8 kernels of another CPU may round the 0.45 above or below the floor.
NOT_ON_TOP = {
    "status of the bulk credit notes request",
    "who approves a credit note above SEK 50,000 at Northwind",
}


def asked_for(actor_id: str, query: DemoQuery) -> MemoryRecord:
    """The memory the demo wrote for ``query``, as loaded."""
    kind, _, name = actor_id.partition(":")
    return MemoryRecord.objects.get(
        workspace__slug="acme", actor__kind=kind, actor__name=name, is_current=True,
        content__contains=query.finds,
    )  # fmt: skip


@pytest.mark.django_db
class DemoSandboxTests:
    def test_a_sandbox_recall_for_ada_answers_each_query_with_the_memory_written_for_it(
        self, demo_loaded, client
    ):
        assert set(MemoryRecord.objects.values_list("embedding_model", flat=True)) == {MODEL_NAME}
        client.force_login(get_user_model().objects.get(username="editor"))
        workload = Workload.objects.get(workspace__slug="acme", name="support-assistant")
        on_top, filtered = set(), {}
        for query in demo_data().queries["support-assistant"]["user:ada"]:
            response = client.post(
                "/w/acme/sandbox/",
                {"workload": workload.pk, "environment": "staging", "actor": "user:ada",
                 "query": query.text, "top_k": 5},
            )  # fmt: skip
            assert response.status_code == 200
            envelope = response.context["envelope"]
            wanted = str(asked_for("user:ada", query).pk)
            entries = [e["id"] for e in envelope["entries"]]
            decided = {d["id"]: d["code"] for d in envelope["diagnostics"]["decisions"]}
            if wanted in entries:
                assert entries.index(wanted) < 3, query.text
                if entries[0] == wanted:
                    on_top.add(query.text)
            else:
                # Left out by the staging policy (a drawn sensitivity, consent or age): the
                # sandbox says which axis, at the staging workload's full verbosity.
                assert decided[wanted] in POLICY_CODES, (query.text, decided.get(wanted))
                filtered[query.text] = decided[wanted]
            # Nothing unrelated: every entry is at least as similar as the support floor.
            assert all(e["similarity"] >= 0.45 for e in envelope["entries"]), query.text
        asked = {q.text for q in demo_data().queries["support-assistant"]["user:ada"]}
        # Those two are on the edge (0.45 and 0.48 against a floor of 0.45): either way.
        assert asked - set(filtered) - NOT_ON_TOP <= on_top <= asked - set(filtered)
        assert "credit note stuck waiting for approval" in on_top
        assert "similarity_below_min" not in filtered.values()  # the floor keeps them all

    def test_every_query_of_the_demo_finds_its_memory_in_the_first_three_unless_filtered(
        self, demo_loaded
    ):
        """Through the real recall (the sandbox's, which records nothing), under the demo's
        policies, in every environment the demo recalls the workload in."""
        workspace = Workspace.objects.get(slug="acme")
        found, filtered = 0, {}
        for workload_name, actor_id, query in asked():
            workload = Workload.objects.get(workspace=workspace, name=workload_name)
            wanted = str(asked_for(actor_id, query).pk)
            for environment in ENVIRONMENTS[workload_name]:
                preview = recall_preview(
                    workspace=workspace, workload=workload, environment=environment,
                    actor_id=actor_id, query=query.text, top_k=5, override=None,
                )  # fmt: skip
                code = preview.codes.get(wanted)
                if code in POLICY_CODES or code == "lifecycle_excluded" or code is None:
                    # Left out before ranking (an axis other than the similarity floor, or
                    # suppressed, expired): counted, with its code where it is listed.
                    assert code != "similarity_below_min", (environment, query.text)
                    filtered[(environment, query.text)] = code
                    continue
                assert wanted in preview.included[:3], (environment, query.text, code)
                found += 1
        assert found + len(filtered) == 2 * len(asked())
        assert found >= 70  # 72 when measured: the other 60 pairs' memories are filtered

    def test_each_turn_of_the_demo_s_chat_sessions_was_given_the_memory_it_asks_for(
        self, demo_loaded
    ):
        """The user's message of each post is a query too: the context assembled for it (the
        session's workload in its environment) carries the memory the conversation names."""
        conversations = demo_data().conversations
        assert conversations
        for conversation in conversations:
            session = Session.objects.get(external_id=conversation.external_id)
            contexts = list(session.contexts.order_by("turn"))
            assert len(contexts) == len(conversation.posts)
            for post, context in zip(conversation.posts, contexts, strict=True):
                asked = DemoQuery(post.messages[-1][1], post.finds)
                wanted = asked_for(conversation.actor_id, asked)
                assert str(wanted.pk) in context.recall["memoryIds"], post.finds
