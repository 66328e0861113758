from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class LoginTests:
    def test_an_operator_logs_in_and_lands_on_the_workspace_dashboard(
        self, page, live_server, login, operator, shot
    ):
        login(page, "olga", "pw-olga")
        assert page.url.endswith("/w/team-a/")
        assert page.get_by_role("heading", name="Team A").is_visible()
        shot(page, "dashboard")

    def test_a_wrong_password_shows_an_error_and_stays_on_the_login_page(
        self, page, live_server, login, operator
    ):
        login(page, "olga", "wrong")
        assert "/login/" in page.url
        assert page.get_by_role("alert").is_visible()
