"""No memory content, query text, search text, password or token ever reaches the logs:
canaries go in through the API and the pages, errors included, and every log record of the
run (DEBUG and up, every logger) is searched for them."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from tests.recall.test_api_memories import new_memory

pytestmark = pytest.mark.django_db

CONTENT, QUERY, SEARCH, PASSWORD, TURN = (
    "CANARY-content-7Qx",
    "CANARY-query-7Qx",
    "CANARY-search-7Qx",
    "CANARY-password-7Qx",
    "CANARY-turn-7Qx",
)


def test_canaries_sent_everywhere_are_logged_nowhere(caplog, operator, editor, workload_a):
    caplog.set_level(logging.DEBUG)
    api = editor.api()
    created = api.post(
        "/v1/memory/actors/user:ada/memories", new_memory(content=CONTENT), format="json"
    )
    assert created.status_code == 201, created.content
    memory_id = created.json()["id"]
    recall = {"workloadId": str(workload_a.id), "environment": "prod", "query": QUERY}
    assert api.post("/v1/memory/actors/user:ada/recall", recall, format="json").status_code == 200
    api.get("/v1/memory/actors/user:ada/memories", {"q": SEARCH})
    api.patch(f"/v1/memory/memories/{memory_id}", {"content": CONTENT + "-2"}, format="json")
    # errors carry the canaries too
    api.post(
        "/v1/memory/actors/user:ada/memories",
        new_memory(content=CONTENT, confidence=7),
        format="json",
    )
    api.post("/v1/memory/actors/user:ada/recall", {**recall, "topK": -1}, format="json")
    api.post(
        "/v1/memory/actors/user:ada/recall",
        b"{" + CONTENT.encode(),
        content_type="application/json",
    )
    # a chat session's turns, their prompt, and refused turns
    session = api.post(
        "/v1/sessions",
        {"actorId": "user:ada", "workloadId": str(workload_a.id), "environment": "prod",
         "systemPrompt": TURN},
        format="json",
    ).json()  # fmt: skip
    turns = f"/v1/sessions/{session['id']}/turns"
    for messages in (
        [{"role": "user", "content": TURN}],
        [{"role": "assistant", "content": TURN}, {"role": "user", "content": TURN + CONTENT}],
        [{"role": "narrator", "content": TURN}],
        [{"role": "user", "content": TURN * 10_000}],
    ):
        api.post(turns, {"messages": messages}, format="json")
    operator.api().get(f"/v1/sessions/{session['id']}/turns/1/prompt")
    Client().post("/login/", {"username": "olga", "password": PASSWORD})
    Client().get("/v1/workspaces/", HTTP_AUTHORIZATION="Bearer crp_" + PASSWORD)
    pages = Client()
    pages.force_login(operator.user)
    pages.get("/w/team-a/memories/", {"actor": "user:ada", "q": SEARCH})
    pages.post(
        "/w/team-a/sandbox/",
        {"actor": "user:ada", "workload": str(workload_a.id), "environment": "prod",
         "query": QUERY, "top_k": "5"},
    )  # fmt: skip
    pages.get("/w/team-a/audit/", {"actor": SEARCH})

    assert caplog.records, "the run should have logged something (requests, warnings)"
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    for canary in (CONTENT, QUERY, SEARCH, PASSWORD, TURN, editor.token):
        assert canary not in logged, canary
