"""The page frame every portal page shares: who is signed in, the favicon, the API links."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

from portal.models import Membership, Role


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
class PageFrameTests:
    def test_the_header_shows_the_username_and_the_role_as_a_badge(self, operator):
        html = client_for(operator.user).get(reverse("dashboard", args=["team-a"])).content
        html = html.decode()
        assert '<span class="sr-only">Signed in as</span> olga <span class="badge role"' in html
        assert '<span class="sr-only">role: </span>operator</span>' in html
        assert "olga · operator" not in html

    def test_a_username_that_is_its_role_reads_once(self, workspace_a):
        user = get_user_model().objects.create_user(username="editor", password="x")
        Membership.objects.create(user=user, workspace=workspace_a, role=Role.EDITOR)
        html = client_for(user).get(reverse("dashboard", args=["team-a"])).content.decode()
        who = html.split('<span class="who">', 1)[1].split("</form>", 1)[0]
        visible = re.sub(r"<[^>]+>", " ", re.sub(r'<span class="sr-only">[^<]*</span>', "", who))
        assert visible.split() == ["editor", "Log", "out"], visible

    def test_every_page_links_the_svg_favicon_and_it_exists(self, operator):
        for url in (reverse("login"),):
            assert 'rel="icon" href="/static/portal/favicon.svg" type="image/svg+xml"' in (
                Client().get(url).content.decode()
            )
        html = client_for(operator.user).get(reverse("policies:floor", args=["team-a"])).content
        assert b'rel="icon" href="/static/portal/favicon.svg"' in html
        found = finders.find("portal/favicon.svg")
        assert found and open(found, encoding="utf-8").read().startswith("<svg")

    def test_the_dashboard_labels_the_schema_as_a_download_beside_the_api_docs(self, operator):
        html = client_for(operator.user).get(reverse("dashboard", args=["team-a"])).content
        html = html.decode()
        assert '<a href="/v1/docs/">API docs</a> (interactive)' in html
        assert (
            '<a href="/v1/schema/" download type="application/yaml">'
            "OpenAPI schema (download, YAML)</a>" in html
        )
        schema = client_for(operator.user).get("/v1/schema/")
        assert schema.status_code == 200
        assert schema.content.startswith(b"openapi:")
