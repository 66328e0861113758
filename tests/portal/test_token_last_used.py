"""When an API token was last used: noted in the process's memory at each call (no statement),
written for every token noted in one statement by the first call TOKEN_LAST_USED_SECONDS after
the first use noted since the last write (portal/tokens.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal import tokens
from portal.models import ApiToken

pytestmark = pytest.mark.django_db


def _writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "SET last_used_at" in q["sql"]]


def _column(name: str) -> object:
    return ApiToken.objects.get(name=name).last_used_at


class LastUsedTests:
    def test_a_call_notes_its_use_and_writes_nothing(self, viewer, settings):
        settings.TOKEN_LAST_USED_SECONDS = 3600
        with CaptureQueriesContext(connection) as queries:
            for _ in range(3):
                assert viewer.api().get("/v1/workspaces/").status_code == 200

        assert _writes(queries) == []
        assert _column("vera-token") is None
        token = ApiToken.objects.get(name="vera-token")
        assert tokens.token_last_used(token) is not None  # noted, not written yet

    def test_the_uses_noted_are_written_once_the_interval_has_passed(
        self, viewer, editor, settings
    ):
        settings.TOKEN_LAST_USED_SECONDS = 3600
        viewer.api().get("/v1/workspaces/")
        settings.TOKEN_LAST_USED_SECONDS = 0  # as if an hour had passed

        with CaptureQueriesContext(connection) as queries:
            editor.api().get("/v1/workspaces/")

        assert len(_writes(queries)) == 1  # both tokens, one statement
        assert _column("vera-token") is not None and _column("eddie-token") is not None

    def test_a_write_never_moves_a_use_back(self, viewer):
        later = timezone.now() + timedelta(minutes=5)
        ApiToken.objects.filter(name="vera-token").update(last_used_at=later)
        tokens.token_used(ApiToken.objects.get(name="vera-token").pk)

        assert tokens.token_uses_write() == 1
        assert _column("vera-token") == later

    def test_a_refused_token_notes_no_use(self, viewer, settings):
        settings.TOKEN_LAST_USED_SECONDS = 0
        ApiToken.objects.filter(name="vera-token").update(revoked_at=timezone.now())

        assert viewer.api().get("/v1/workspaces/").status_code == 401

        assert tokens.token_uses_write() == 0
        assert _column("vera-token") is None

    def test_the_token_list_shows_a_use_not_written_yet(self, operator, settings):
        settings.TOKEN_LAST_USED_SECONDS = 3600

        listed = operator.api().get("/v1/workspaces/team-a/tokens/").json()["results"]

        [own] = [t for t in listed if t["name"] == "olga-token"]
        assert own["lastUsedAt"] is not None  # this very call
        assert _column("olga-token") is None
