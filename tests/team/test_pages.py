"""Settings → Tokens and members (/w/<slug>/settings/access/): operators only; a token issued
or rotated shows its secret in that answer and never again; revoking, and changing members,
say what was done; with htmx each form gets the page's body back in place."""

from __future__ import annotations

import re

import pytest

from audit.models import AuditEvent, EventType
from portal.models import ApiToken, Membership, hash_token
from tests.helpers import csrf_session
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, editor, viewer, agent, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer", "agent"
)

pytestmark = pytest.mark.django_db

PAGE = "/w/team-a/settings/access/"
SECRET = re.compile(r'<code id="new-secret" class="secret">(crp_[^<]+)</code>')
HTMX = {"HTTP_HX_REQUEST": "true"}


def secret_in(html: str) -> str:
    found = SECRET.search(html)
    assert found, "no secret shown"
    return found.group(1)


class AccessTests:
    def test_an_operator_sees_the_tokens_and_the_members(self, operator, editor, agent):
        page = operator.session().get(PAGE)

        assert page.status_code == 200
        html = page.content.decode()
        assert "Tokens and members" in html and "ada-agent" in html and "eddie" in html
        assert ApiToken.objects.get(name="ada-agent").prefix in html
        assert agent.token not in html and "new-secret" not in html

    @pytest.mark.parametrize("persona", ["editor", "viewer"])
    def test_anyone_else_gets_a_403(self, request, persona):
        client = csrf_session(request.getfixturevalue(persona))

        assert client.get(PAGE).status_code == 403
        assert client.post(PAGE, {"name": "x", "role": "agent"}).status_code == 403
        assert not ApiToken.objects.filter(name="x").exists()

    def test_an_outsider_gets_a_404(self, outsider, workspace_a):
        assert outsider.session().get(PAGE).status_code == 404

    def test_only_an_operator_sees_the_settings_link(self, operator, editor):
        link = 'href="/w/team-a/settings/access/"'

        assert link in operator.session().get("/w/team-a/").content.decode()
        assert link not in editor.session().get("/w/team-a/").content.decode()


class IssueTests:
    def test_the_secret_is_shown_once_with_a_copy_button(self, operator, workload_a):
        client = csrf_session(operator)

        issued = client.post(
            PAGE,
            {
                "name": "support-agent",
                "role": "agent",
                "scopes": ["recall", "memory.create"],
                "workloads": [str(workload_a.id)],
                "environments": ["prod"],
                "expires": "2099-01-31",
            },
        )

        assert issued.status_code == 200
        assert "no-store" in issued["Cache-Control"]
        html = issued.content.decode()
        secret = secret_in(html)
        assert 'data-copy-from="new-secret"' in html and ">Copy</button>" in html
        token = ApiToken.objects.get(name="support-agent")
        assert token.key_hash == hash_token(secret)
        assert token.scopes == ["recall", "memory.create"]
        assert token.bound_environments == ["prod"] and token.expires_at.year == 2099
        again = client.get(PAGE).content.decode()
        assert secret not in again and secret[4:] not in again and "support-agent" in again
        event = AuditEvent.objects.filter(type=EventType.TOKEN_ISSUED).latest("pk")
        assert event.author == "user:olga"

    def test_with_htmx_the_body_comes_back_with_the_secret(self, operator):
        response = csrf_session(operator).post(PAGE, {"name": "bot", "role": "viewer"}, **HTMX)

        html = response.content.decode()
        assert response.status_code == 200 and "<html" not in html
        assert html.lstrip().startswith('<div id="access-body">')
        assert ApiToken.objects.get(name="bot").scopes == []  # the boxes ticked: an agent's
        secret_in(html)
        assert response["HX-Reswap"] == "outerHTML show:#access-body:top"

    def test_an_agent_token_needs_a_scope(self, operator):
        response = csrf_session(operator).post(PAGE, {"name": "x", "role": "agent"})

        assert response.status_code == 422
        assert "Choose at least one of: recall" in response.content.decode()

    def test_a_form_with_problems_says_each_and_issues_nothing(self, operator, workload_a):
        response = csrf_session(operator).post(
            PAGE, {"name": "", "role": "editor", "environments": ["prod"]}
        )

        assert response.status_code == 422
        html = response.content.decode()
        assert "This field is required." in html
        assert "new-secret" not in html
        response = csrf_session(operator).post(
            PAGE, {"name": "x", "role": "editor", "environments": ["prod"]}
        )
        assert response.status_code == 422
        assert "Only agent tokens are bound to environments" in response.content.decode()
        assert not ApiToken.objects.filter(name="x").exists()

    def test_a_taken_name_is_said_next_to_the_name(self, operator, agent):
        response = csrf_session(operator).post(
            PAGE, {"name": "ada-agent", "role": "agent", "scopes": ["recall"]}
        )

        assert response.status_code == 422
        assert "Taken by a live token." in response.content.decode()


class RotateAndRevokeTests:
    def test_a_rotation_shows_the_new_secret_once(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")

        response = csrf_session(operator).post(
            f"{PAGE}tokens/{token.pk}/rotate/", {"grace": "3600"}, **HTMX
        )

        html = response.content.decode()
        secret = secret_in(html)
        assert secret != agent.token and "keeps working until" in html
        assert ApiToken.objects.get(pk=token.pk).key_hash == hash_token(secret)

    def test_revoking_says_so_and_the_token_is_listed_revoked(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")
        client = csrf_session(operator)

        response = client.post(f"{PAGE}tokens/{token.pk}/revoke/")

        assert response.status_code == 302
        page = client.get(response["Location"]).content.decode()
        assert "Revoked token &#x27;ada-agent&#x27;" in page
        assert f'id="token-{token.pk}" class="status-revoked"' in page
        assert ApiToken.objects.get(pk=token.pk).revoked_at is not None

    def test_a_revoked_token_cannot_be_rotated(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")
        client = csrf_session(operator)
        client.post(f"{PAGE}tokens/{token.pk}/revoke/")

        response = client.post(f"{PAGE}tokens/{token.pk}/rotate/", {"grace": "0"}, **HTMX)

        assert response.status_code == 409
        assert "cannot be rotated" in response.content.decode()

    def test_another_workspaces_token_is_not_found(self, operator, outsider):
        theirs = ApiToken.objects.get(name="otto-token")

        response = csrf_session(operator).post(f"{PAGE}tokens/{theirs.pk}/revoke/")

        assert response.status_code == 404
        assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None


class MemberPageTests:
    def test_a_member_is_added_re_roled_and_removed(self, operator, outsider):
        client = csrf_session(operator)

        added = client.post(f"{PAGE}members/", {"username": "otto", "role": "viewer"}, **HTMX)
        membership = Membership.objects.get(user=outsider.user, workspace=operator.workspace)
        changed = client.post(f"{PAGE}members/{membership.pk}/role/", {"role": "editor"}, **HTMX)
        removed = client.post(f"{PAGE}members/{membership.pk}/remove/", **HTMX)

        assert "Added otto as viewer." in added.content.decode()
        assert "otto is editor now." in changed.content.decode()
        assert "Removed otto from the workspace." in removed.content.decode()
        assert not Membership.objects.filter(pk=membership.pk).exists()

    def test_an_unknown_user_is_said_on_the_form(self, operator):
        response = csrf_session(operator).post(
            f"{PAGE}members/", {"username": "nobody", "role": "viewer"}
        )

        assert response.status_code == 422
        assert "No such user." in response.content.decode()

    def test_the_last_operator_stays_and_the_page_says_why(self, operator):
        mine = Membership.objects.get(user=operator.user)

        response = csrf_session(operator).post(f"{PAGE}members/{mine.pk}/remove/", **HTMX)

        assert response.status_code == 409
        html = response.content.decode()
        # said in the members' card, which the browser is scrolled to
        assert html.index("last operator of this workspace") > html.index('id="members"')
        assert response["HX-Reswap"] == "outerHTML show:#members:top"
        assert Membership.objects.filter(pk=mine.pk).exists()

    def test_a_post_without_its_csrf_token_is_refused(self, operator, viewer):
        membership = Membership.objects.get(user=viewer.user)

        response = operator.session().post(f"{PAGE}members/{membership.pk}/remove/")

        assert response.status_code == 403
        assert Membership.objects.filter(pk=membership.pk).exists()
