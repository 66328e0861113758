"""The portal's own pages: login, home, dashboard, health probes and the API docs."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from policies.services import workspace_create
from portal.models import Membership, Role


def logged_in(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


class LoginPageTests:
    def test_it_renders_a_login_form_with_a_csrf_token(self, db):
        response = Client().get("/login/")

        assert response.status_code == 200
        html = response.content.decode()
        assert 'name="username"' in html
        assert 'name="password"' in html
        assert 'name="csrfmiddlewaretoken"' in html

    def test_a_user_logs_in_with_the_form_and_lands_on_their_dashboard(self, editor):
        client = Client(enforce_csrf_checks=True)
        page = client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())

        response = client.post(
            "/login/",
            {"username": "eddie", "password": "pw-eddie", "csrfmiddlewaretoken": token.group(1)},
            follow=True,
        )

        assert response.redirect_chain[-1][0] == "/w/team-a/"
        assert response.status_code == 200

    def test_a_wrong_password_shows_the_form_again(self, editor):
        client = Client()

        response = client.post("/login/", {"username": "eddie", "password": "nope"})

        assert response.status_code == 200
        assert 'role="alert"' in response.content.decode()
        assert "_auth_user_id" not in client.session


class HomePageTests:
    def test_it_sends_an_anonymous_visitor_to_the_login_page(self, db):
        response = Client().get("/")

        assert response.status_code == 302
        assert response["Location"] == "/login/?next=/"

    def test_a_member_of_one_workspace_goes_straight_to_its_dashboard(self, editor):
        response = logged_in(editor).get("/")

        assert response.status_code == 302
        assert response["Location"] == "/w/team-a/"

    def test_a_member_of_several_workspaces_chooses_one(self, editor, workspace_b):
        Membership.objects.create(user=editor.user, workspace=workspace_b, role=Role.VIEWER)

        response = logged_in(editor).get("/")

        assert response.status_code == 200
        html = response.content.decode()
        assert "/w/team-a/" in html
        assert "/w/team-b/" in html


class DashboardPageTests:
    def test_a_member_sees_their_workspace_dashboard(self, viewer, workload_a):
        response = logged_in(viewer).get("/w/team-a/")

        assert response.status_code == 200
        html = response.content.decode()
        assert "Team A" in html
        assert "support-bot" in html

    def test_another_workspaces_dashboard_is_not_found(self, viewer, workspace_b):
        response = logged_in(viewer).get("/w/team-b/")

        assert response.status_code == 404
        assert "Team B" not in response.content.decode()

    def test_an_unknown_workspace_dashboard_is_not_found(self, viewer):
        assert logged_in(viewer).get("/w/no-such/").status_code == 404

    def test_an_anonymous_visitor_is_sent_to_log_in(self, workspace_a):
        response = Client().get("/w/team-a/")

        assert response.status_code == 302
        assert response["Location"].startswith("/login/")

    def test_a_superuser_sees_every_dashboard(self, workspace_a, workspace_b):
        admin = get_user_model().objects.create_superuser("root", password="pw-root")
        client = Client()
        client.force_login(admin)

        assert client.get("/w/team-b/").status_code == 200

    def test_a_user_without_workspaces_is_told_so(self, db):
        loner = get_user_model().objects.create_user("loner", password="pw-loner")
        workspace_create(slug="elsewhere", name="Elsewhere", author="system:test")
        client = Client()
        client.force_login(loner)

        response = client.get("/")

        assert response.status_code == 200
        assert "/w/elsewhere/" not in response.content.decode()


class HealthTests:
    def test_healthz_answers_without_a_login(self, db):
        response = Client().get("/healthz")

        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"status": "ok", "process": "ok", "database": "ok"}

    def test_readyz_checks_the_database_and_pgvector(self, db):
        response = Client().get("/readyz")

        assert response.status_code == 200
        assert response.json()["status"] == "ok"
        assert re.match(r"^\d+\.\d+", response.json()["pgvector"])

    def test_probes_only_answer_get(self, db):
        assert Client().post("/healthz").status_code == 405


class ApiDocsTests:
    def test_the_openapi_schema_documents_the_api(self, db):
        response = Client().get("/v1/schema/", HTTP_ACCEPT="application/json")

        assert response.status_code == 200
        schema = response.json()
        assert schema["info"]["title"] == "Context Recall Governance API"
        for path in (
            "/v1/workspaces/",
            "/v1/workspaces/{slug}/policy",
            "/v1/workloads/{workload_id}/policy",
            "/v1/workloads/{workload_id}/effective-policy",
            "/v1/audit/events/",
            "/v1/audit/verify",
        ):
            assert path in schema["paths"], path

    def test_the_swagger_ui_is_served_from_static_files_not_a_cdn(self, db):
        response = Client().get("/v1/docs/")

        assert response.status_code == 200
        html = response.content.decode()
        assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
        # Its start-up script is a separate URL (no inline script: the CSP forbids it).
        assert '<script src="/v1/docs/?script="></script>' in html
        assert "<script>" not in html
        script = Client().get("/v1/docs/?script=").content.decode()
        assert "/v1/schema/" in script
        for cdn in ("cdn.jsdelivr.net", "unpkg.com", "cdnjs", "googleapis"):
            assert cdn not in html and cdn not in script
        assert not re.search(r"""(src|href)=["']https?://""", html)

    def test_the_swagger_ui_assets_exist(self, db):
        from django.contrib.staticfiles import finders

        for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "swagger-ui-standalone-preset.js"):
            assert finders.find(f"drf_spectacular_sidecar/swagger-ui-dist/{asset}"), asset
