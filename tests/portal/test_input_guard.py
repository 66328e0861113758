"""Control characters in a path or query never reach SQL: a 400 naming the parameter."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, made_first = module_scoped("workspace_a", "operator")

pytestmark = pytest.mark.django_db

GETS = [
    "/v1/audit/events/",
    "/v1/audit/verify",
    "/v1/memory/actors/user:ada/memories",
    "/v1/workspaces/team-a/workloads/",
    "/v1/workspaces/team-a/maintenance/runs/",
]


@pytest.mark.parametrize("path", GETS)
@pytest.mark.parametrize("param", ["workspace", "environment", "q"])
@pytest.mark.parametrize("char", ["%00", "%01", "%1b", "%7f", "%0b"])
def test_a_control_character_in_a_query_parameter_is_a_400_naming_it(operator, path, param, char):
    response = operator.session().get(f"{path}?{param}=team{char}a")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "INVALID_REQUEST"
    assert param in error["details"]["fields"]


def test_a_recall_with_nul_in_the_workspace_is_a_400(operator, workload_a):
    response = operator.session().post(
        "/v1/memory/actors/user:ada/recall?workspace=team%00a",
        {"workloadId": str(workload_a.id), "environment": "prod", "query": "q"},
        format="json",
    )
    assert response.status_code == 400
    assert "workspace" in response.json()["error"]["details"]["fields"]


def test_a_control_character_in_the_path_is_a_400(operator):
    response = operator.session().get("/v1/memory/memories/1%00")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("The path holds a control character")


def test_pages_say_so_in_plain_words(operator):
    client = Client()
    client.force_login(operator.user)
    response = client.get("/w/team-a/audit/?environment=pr%00d")
    assert response.status_code == 400
    assert "environment parameter holds a control character" in response.content.decode()


@pytest.mark.parametrize("memory_id", ["%EF%BC%91", "%D9%A1", "+1", "%201", "1.0", "0"])
def test_only_ascii_digits_name_a_memory(editor, memory_id):
    from tests.recall import factories

    factories.memories(editor.workspace, {"content": "the first memory"})
    response = editor.api().get(f"/v1/memory/memories/{memory_id}")
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "NOT_FOUND"


def test_ordinary_text_with_spaces_and_accents_passes(operator):
    from tests.recall import factories

    factories.actor(operator.workspace)
    response = operator.session().get(
        "/v1/memory/actors/user:ada/memories",
        {"workspace": "team-a", "q": "café au lait\tand\r\nmore"},
    )
    # not a 400: spaces, accents, tabs and line breaks (a textarea's value) are text
    assert response.status_code == 200, response.content
