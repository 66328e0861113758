"""Every response under /v1/ is JSON, in DEBUG and production settings alike."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from tests.helpers import error_of

pytestmark = pytest.mark.django_db

SECRET = "Ada's bank PIN is 4321"  # memory content that must never reach a log


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


@pytest.fixture
def failing_urls(settings):
    settings.ROOT_URLCONF = "tests.portal.failing_urls"


class UnknownPathTests:
    @pytest.mark.parametrize(
        "path",
        ["/v1/nope", "/v1/", "/v1/workspaces/team-a/nothing-here", "/v1/workloads/42/policy"],
    )
    def test_an_unknown_path_is_a_json_404(self, debug, path):
        error = error_of(Client().get(path), 404, "NOT_FOUND")

        assert error["message"] == "No such resource."

    def test_a_signed_in_caller_gets_the_same_404(self, debug, editor):
        error_of(editor.api().get("/v1/memory/nothing"), 404, "NOT_FOUND")
        error_of(editor.api().post("/v1/nothing", {"a": 1}, format="json"), 404, "NOT_FOUND")

    def test_a_session_post_to_an_unknown_path_is_a_404_not_a_csrf_failure(self, debug, editor):
        response = editor.session().post("/v1/nothing", {"a": 1}, format="json")

        error_of(response, 404, "NOT_FOUND")

    @pytest.mark.parametrize("method", ["get", "post", "put", "delete"])
    def test_a_path_missing_its_trailing_slash_is_told_so(self, debug, editor, method):
        response = getattr(editor.api(), method)(
            "/v1/workspaces", {"slug": "x", "name": "X"}, format="json"
        )

        error = error_of(response, 404, "NOT_FOUND")
        assert "needs its trailing slash" in error["message"]
        assert error["details"] == {"path": "/v1/workspaces", "suggestedPath": "/v1/workspaces/"}

    def test_a_path_with_an_extra_trailing_slash_is_told_so(self, debug, editor):
        response = editor.api().put("/v1/workspaces/team-a/policy/", {}, format="json")

        error = error_of(response, 404, "NOT_FOUND")
        assert "takes no trailing slash" in error["message"]
        assert error["details"]["suggestedPath"] == "/v1/workspaces/team-a/policy"

    def test_pages_outside_the_api_keep_their_html_404(self, settings, db):
        settings.DEBUG = False

        response = Client().get("/no-such-page/")

        assert response.status_code == 404
        assert response["Content-Type"].startswith("text/html")


class PathIdTests:
    """Ids in paths (``portal.ids.IdConverter``): 1 to 10^18 - 1 in ASCII digits, as the
    schema says; anything else names nothing, a 404, never a query bigint cannot hold."""

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("get", "/v1/memory/memories/{id}"),
            ("get", "/v1/memory/memories/{id}/lifecycle"),
            ("post", "/v1/memory/memories/{id}/suppress"),
            ("get", "/v1/audit/events/{id}"),
            ("post", "/v1/audit/events/{id}/replay"),
            ("get", "/v1/maintenance/runs/{id}"),
            ("post", "/v1/maintenance/runs/{id}/cancel"),
        ],
    )
    @pytest.mark.parametrize("raw", ["0", "9" * 19, "9" * 30, "12a", "%EF%BC%91"])
    def test_an_id_out_of_range_or_not_in_digits_is_a_json_404(self, operator, method, path, raw):
        response = getattr(operator.api(), method)(path.format(id=raw), format="json")

        error_of(response, 404, "NOT_FOUND")


class WrongMethodTests:
    def test_a_wrong_method_on_an_api_view_is_a_json_405(self, debug, viewer):
        response = viewer.api().delete("/v1/policy/axes")

        error = error_of(response, 405, "METHOD_NOT_ALLOWED")
        assert "DELETE" in error["message"]

    @pytest.mark.parametrize("path", ["/v1/docs/", "/v1/schema/"])
    def test_a_wrong_method_on_the_docs_is_a_json_405_that_keeps_allow(self, debug, path):
        response = Client().post(path, {"a": 1})

        error = error_of(response, 405, "METHOD_NOT_ALLOWED")
        assert "GET" in response["Allow"]
        assert "GET" in error["details"]["allowed"]


class ServerErrorTests:
    @pytest.mark.parametrize("path", ["/v1/test/broken-api", "/v1/test/broken-plain"])
    def test_an_unexpected_exception_is_a_json_500(self, debug, failing_urls, editor, path):
        response = editor.api().post(path, {"content": SECRET}, format="json")

        error = error_of(response, 500, "SERVER_ERROR")
        assert SECRET not in response.content.decode()
        assert "Traceback" not in error["message"]

    def test_it_is_logged_with_its_traceback_but_not_the_body(
        self, debug, failing_urls, editor, caplog
    ):
        with caplog.at_level(logging.ERROR, logger="django.request"):
            editor.api().post("/v1/test/broken-api", {"content": SECRET}, format="json")

        records = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(records) == 1
        record = records[0]
        assert record.name == "django.request"
        assert record.getMessage() == "Internal Server Error: POST /v1/test/broken-api"
        assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError
        assert not hasattr(record, "request")  # handlers must not format the request (its body)
        assert SECRET not in caplog.text
        assert "Bearer" not in caplog.text


class FrameworkErrorTests:
    def test_a_disallowed_host_is_a_json_400(self, debug, db):
        response = Client().get("/v1/workspaces/", HTTP_HOST="evil.example")

        error_of(response, 400, "MALFORMED_REQUEST")

    def test_a_body_that_is_not_json_is_a_json_415(self, debug, operator):
        response = operator.api().put(
            "/v1/workspaces/team-a/policy", data="a=1", content_type="text/plain"
        )

        error_of(response, 415, "UNSUPPORTED_MEDIA_TYPE")

    def test_missing_credentials_are_a_json_401(self, debug, db):
        error_of(Client().get("/v1/workspaces/"), 401, "NOT_AUTHENTICATED")
