from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from portal.models import Membership, Role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def login(form_login):
    """Here the login form is what is tested."""
    return form_login


class LoginTests:
    def test_an_operator_logs_in_and_lands_on_the_workspace_dashboard(
        self, page, live_server, login, operator, shot
    ):
        login(page, "olga", "pw-olga")
        assert page.url.endswith("/w/team-a/")
        assert page.get_by_role("heading", name="Team A").is_visible()
        who = page.locator(".topbar .who")
        expect(who).to_contain_text("olga")
        expect(who.locator(".badge.role")).to_have_text("role: operator")
        expect(who).not_to_contain_text("·")
        shot(page, "dashboard")

    def test_a_wrong_password_shows_an_error_and_stays_on_the_login_page(
        self, page, live_server, login, operator
    ):
        login(page, "olga", "wrong")
        assert "/login/" in page.url
        assert page.get_by_role("alert").is_visible()


class PageFrameTests:
    def test_a_username_that_is_its_role_is_shown_once(
        self, page, live_server, login, workspace_a, shot
    ):
        user = get_user_model().objects.create_user(username="operator", password="pw-operator")
        Membership.objects.create(user=user, workspace=workspace_a, role=Role.OPERATOR)
        login(page, "operator", "pw-operator")
        who = page.locator(".topbar .who")
        expect(who.locator(".badge.role")).to_have_text("operator")
        assert who.inner_text().split().count("operator") == 1, who.inner_text()
        shot(page, "header-username-is-role")

    def test_every_page_has_a_favicon(self, page, live_server, login, operator):
        page.goto(f"{live_server.url}/login/")
        hrefs = [page.locator("link[rel=icon]").get_attribute("href")]
        login(page, "olga", "pw-olga")
        for path in ("/w/team-a/", "/w/team-a/policies/"):
            page.goto(live_server.url + path)
            hrefs.append(page.locator("link[rel=icon]").get_attribute("href"))
        assert len(set(hrefs)) == 1 and hrefs[0].endswith("/portal/favicon.svg"), hrefs
        response = page.request.get(live_server.url + hrefs[0])
        assert response.ok and response.headers["content-type"].startswith("image/svg+xml")
        assert response.text().startswith("<svg")

    def test_the_dashboard_offers_the_api_docs_and_labels_the_schema_as_a_download(
        self, page, live_server, login, operator, shot
    ):
        login(page, "olga", "pw-olga")
        links = page.locator(".api-links")
        expect(links.get_by_role("link", name="API docs")).to_have_attribute("href", "/v1/docs/")
        schema = links.get_by_role("link", name="OpenAPI schema (download, YAML)")
        expect(schema).to_have_attribute("download", "")
        with page.expect_download() as info:
            schema.click()
        download = info.value
        assert download.suggested_filename.endswith(".yaml")  # the server names it
        assert open(download.path(), encoding="utf-8").read().startswith("openapi:")
        links.scroll_into_view_if_needed()
        shot(page, "dashboard-api-links")
