from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

DEEP = "[" * 5000 + "]" * 5000


class HostileBodyTests:
    @pytest.mark.parametrize(
        "url",
        [
            "/v1/context/layout",
            "/v1/workspaces/team-a/workloads/",
            "/v1/memory/actors/user:ada/memories",
            "/v1/memory/actors/user:ada/recall",
        ],
    )
    def test_json_nested_past_the_recursion_limit_is_a_400_not_a_500(self, editor, url):
        response = editor.api().post(url, DEEP, content_type="application/json")

        assert response.status_code == 400, response.content
        assert response.json()["error"]["code"] == "MALFORMED_REQUEST"

    @pytest.mark.parametrize(
        ("config", "why"),
        [
            ("a: " + "[" * 5000, "nested too deeply"),
            ("memory:\n  context_window: " + "9" * 5000, "invalid YAML"),
        ],
    )
    def test_yaml_that_python_cannot_build_is_a_config_error(self, editor, config, why):
        response = editor.api().post("/v1/context/layout", {"config": config}, format="json")

        assert response.status_code == 400, response.content
        assert why in response.json()["error"]["details"]["fields"]["config.memory"]


class OversizedBodyTests:
    def test_a_body_over_the_limit_is_a_json_413(self, editor, settings):
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
        body = '{"content": "' + "x" * (2 * 1024 * 1024) + '"}'

        response = editor.api().post(
            "/v1/memory/actors/user:ada/memories", body, content_type="application/json"
        )

        assert response.status_code == 413, response.content[:200]
        assert response.json()["error"]["code"] == "REQUEST_TOO_LARGE"

    def test_the_default_limit_fits_a_full_batch(self, settings):
        assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE >= 1000 * 20_000 * 2
