"""Settings → Tokens and members in a real browser: an operator issues an agent token, sees
its secret once with a button that copies it, and revokes it; the page at a laptop's width
and a phone's."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from portal.models import ApiToken, hash_token

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


class TokensPageTests:
    def test_an_operator_issues_a_token_sees_its_secret_once_and_revokes_it(
        self, page, live_server, login, operator, workload_a, shot
    ):
        page.context.grant_permissions(
            ["clipboard-read", "clipboard-write"], origin=live_server.url
        )
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/")
        page.get_by_role("link", name="Settings").click()
        page.get_by_label("Token name").fill("support-agent")
        page.get_by_label("support-bot").check()
        page.get_by_label("prod").check()
        page.get_by_role("button", name="Issue the token").click()

        secret_box = page.locator("#new-secret")
        secret_box.wait_for()
        secret = secret_box.inner_text().strip()
        token = ApiToken.objects.get(name="support-agent")
        assert token.key_hash == hash_token(secret)
        assert token.bound_workloads == [workload_a.id] and token.bound_environments == ["prod"]
        page.get_by_role("button", name="Copy").click()
        page.get_by_text("Copied.").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == secret
        shot(page, "tokens-issued")

        page.reload()
        assert secret not in page.content() and secret[4:] not in page.content()
        assert page.locator("#new-secret").count() == 0
        row = page.locator(f"#token-{token.pk}")
        assert "support-bot" in row.inner_text() and "active" in row.inner_text()
        shot(page, "tokens-list")

        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Revoke token support-agent").click()
        page.get_by_text("Revoked token 'support-agent'").wait_for()
        assert "revoked" in page.locator(f"#token-{token.pk}").inner_text()
        assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert client.get("/v1/workspaces/").status_code == 401

    def test_the_page_fits_a_phone(self, page, live_server, login, operator, agent, shot):
        page.set_viewport_size(PHONE)
        login(page, "olga", "pw-olga")
        page.goto(f"{live_server.url}/w/team-a/settings/access/")
        page.get_by_label("Token name").fill("phone-agent")
        page.get_by_role("button", name="Issue the token").click()
        page.locator("#new-secret").wait_for()

        extra = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert extra <= 0, f"the page is {extra} px wider than the phone"
        copy = page.get_by_role("button", name="Copy").bounding_box()
        assert copy is not None and copy["x"] + copy["width"] <= PHONE["width"]
        shot(page, "tokens-phone")
