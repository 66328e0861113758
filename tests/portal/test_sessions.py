"""Sessions: a new session id at login (no fixation), none left usable after logout, and CSRF
required on session-authenticated unsafe API calls."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db


def _csrf(client: Client, path: str) -> str:
    page = client.get(path).content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def test_login_rotates_the_session_and_logout_kills_it(operator):
    client = Client(enforce_csrf_checks=True)
    token = _csrf(client, "/login/")
    client.cookies[settings.SESSION_COOKIE_NAME] = "planted-by-an-attacker"
    response = client.post(
        "/login/", {"username": "olga", "password": "pw-olga", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert session and session != "planted-by-an-attacker"
    assert client.get("/w/team-a/").status_code == 200

    stolen = Client()
    stolen.cookies[settings.SESSION_COOKIE_NAME] = session
    assert stolen.get("/w/team-a/").status_code == 200  # the same cookie works while signed in
    token = _csrf(client, "/w/team-a/")
    assert client.post("/logout/", {"csrfmiddlewaretoken": token}).status_code in (200, 302)

    assert stolen.get("/w/team-a/").status_code == 302  # sent to log in: the session is dead
    assert stolen.get("/v1/workspaces/").status_code in (401, 403)


def test_an_unsafe_session_api_call_needs_the_csrf_token(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator.user)

    refused = client.patch(
        "/v1/workspaces/team-a/", {"name": "Renamed"}, content_type="application/json"
    )

    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "PERMISSION_DENIED"
    assert "CSRF" in refused.json()["error"]["message"]
    token = _csrf(client, "/w/team-a/")
    allowed = client.patch(
        "/v1/workspaces/team-a/",
        {"name": "Renamed"},
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert allowed.status_code == 200, allowed.content
