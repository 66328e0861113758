"""Throttling: failed logins per account and per address (429, the same words whether the
account exists or not), API calls and recalls per token (429 THROTTLED with Retry-After)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def attempt(client: Client, username: str, password: str, **extra):
    return client.post("/login/", {"username": username, "password": password}, **extra)


class LoginThrottleTests:
    def test_after_five_failures_even_the_right_password_waits(self, operator, settings):
        client = Client()
        for _ in range(5):
            assert attempt(client, "olga", "wrong").status_code == 200

        refused = attempt(client, "olga", "pw-olga")

        assert refused.status_code == 429
        assert int(refused["Retry-After"]) > 0
        assert "Too many failed attempts" in refused.content.decode()
        assert "_auth_user_id" not in client.session

    def test_an_unknown_account_reads_exactly_the_same(self, operator):
        client = Client()
        for name in ("olga", "nobody"):
            for _ in range(5):
                attempt(client, name, "wrong")
        known, unknown = attempt(client, "olga", "x"), attempt(client, "nobody", "x")
        assert known.status_code == unknown.status_code == 429

        def words(response, name):
            text = re.sub(r"[A-Za-z0-9]{32,}", "TOKEN", response.content.decode())
            return text.replace(name, "?")

        assert words(known, "olga") == words(unknown, "nobody")

    def test_another_account_is_not_locked_by_ones_failures(self, operator, editor):
        client = Client()
        for _ in range(5):
            attempt(client, "olga", "wrong")
        assert attempt(client, "eddie", "pw-eddie").status_code == 302

    def test_an_address_is_limited_across_accounts(self, operator, settings):
        settings.LOGIN_FAILURES_PER_ADDRESS = 3
        client = Client()
        for name in ("a", "b", "c"):
            attempt(client, name, "wrong", REMOTE_ADDR="10.0.0.9")
        assert attempt(client, "olga", "pw-olga", REMOTE_ADDR="10.0.0.9").status_code == 429
        assert attempt(client, "olga", "pw-olga", REMOTE_ADDR="10.0.0.10").status_code == 302

    def test_a_success_before_the_limit_logs_in(self, operator):
        client = Client()
        for _ in range(4):
            attempt(client, "olga", "wrong")
        assert attempt(client, "olga", "pw-olga").status_code == 302


class ApiThrottleTests:
    def test_a_token_over_its_rate_gets_429_with_retry_after(self, viewer, settings):
        settings.API_RATE_PER_MINUTE = 3
        api = viewer.api()
        assert [api.get("/v1/workspaces/").status_code for _ in range(3)] == [200] * 3

        response = api.get("/v1/workspaces/")

        assert response.status_code == 429
        assert response.json()["error"]["code"] == "THROTTLED"
        assert 0 < int(response["Retry-After"]) <= 60

    def test_recalls_have_their_own_limit_and_a_workspace_may_set_it(
        self, operator, editor, workload_a, settings
    ):
        from tests.recall import factories

        factories.memories(editor.workspace, {"content": "release notes"})
        body = {"workloadId": str(workload_a.id), "environment": "prod", "query": "release"}
        patch = operator.api().patch(
            "/v1/workspaces/team-a/", {"recallRatePerMinute": 2}, format="json"
        )
        assert patch.status_code == 200 and patch.json()["recallRatePerMinute"] == 2
        api = editor.api()
        codes = [
            api.post("/v1/memory/actors/user:ada/recall", body, format="json").status_code
            for _ in range(3)
        ]
        assert codes == [200, 200, 429]
        assert api.get("/v1/workspaces/").status_code == 200  # other calls are not recalls

    def test_the_rate_must_be_a_positive_integer_or_null(self, operator):
        for bad in (0, -5, "fast", 1.5):
            response = operator.api().patch(
                "/v1/workspaces/team-a/", {"recallRatePerMinute": bad}, format="json"
            )
            assert response.status_code == 400, bad
        reset = operator.api().patch(
            "/v1/workspaces/team-a/", {"recallRatePerMinute": None}, format="json"
        )
        assert reset.status_code == 200 and reset.json()["recallRatePerMinute"] is None


def test_the_shared_cache_counts_the_same_way(viewer, settings):
    """With CACHE_URL set, counts live in Django's cache (Redis in production; the test's
    local-memory cache here) instead of the process's own dict."""
    settings.CACHE_URL = "redis://shared-in-production"
    settings.API_RATE_PER_MINUTE = 2
    api = viewer.api()
    codes = [api.get("/v1/workspaces/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
