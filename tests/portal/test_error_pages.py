"""The portal's own error pages: a refusal says which role the page needs and who in the
workspace has it, logged in one line without a traceback; an unknown path gets the product's
404 in DEBUG (``make run``) as in production."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def logged_in(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


class ForbiddenPageTests:
    @pytest.fixture
    def page(self, operator: Any, editor: Any) -> str:
        response = logged_in(editor).get(self.url(editor))
        assert response.status_code == 403
        return response.content.decode()

    def url(self, persona: Any) -> str:
        # Erasing an actor: operators only.
        return "/w/team-a/memories/erase/?actor=user:ada"

    def test_it_says_which_role_the_page_needs_and_who_has_it(self, page):
        assert "This page needs the operator role" in page
        assert "You are editor in" in page and "Team A" in page
        assert "<strong>olga</strong>" in page  # the workspace's operator
        assert "<strong>eddie</strong>" not in page

    def test_it_is_a_page_of_the_portal(self, page):
        assert "<nav" in page and "Log out" in page
        assert 'href="/w/team-a/"' in page  # back to the workspace's dashboard

    def test_it_is_logged_in_one_line_without_a_traceback(self, operator, editor, caplog):
        with caplog.at_level(logging.WARNING, logger="django.request"):
            logged_in(editor).get(self.url(editor))

        [record] = [r for r in caplog.records if r.name == "django.request"]
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert "Forbidden" in record.getMessage() and "operator role" in record.getMessage()

    def test_the_api_still_answers_json(self, viewer, workload_a):
        response = viewer.api().put(
            f"/v1/workloads/{workload_a.id}/policy", {"totalTokenBudget": 10}, format="json"
        )
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "PERMISSION_DENIED"


class NotFoundPageTests:
    @pytest.mark.parametrize("debug", [True, False])
    def test_an_unknown_path_gets_the_products_404(self, editor, settings, debug):
        settings.DEBUG = debug

        response = logged_in(editor).get("/no/such/page/")

        assert response.status_code == 404
        html = response.content.decode()
        assert "There is nothing here" in html and "Log out" in html
        assert "Using the URLconf" not in html  # Django's technical page

    def test_an_unknown_api_path_stays_json_in_debug(self, editor, settings):
        settings.DEBUG = True

        response = editor.api().get("/v1/no/such/thing")

        assert response.status_code == 404
        assert response.json()["error"]["code"] == "NOT_FOUND"
