"""The API's tokens and members (/v1/workspaces/{slug}/tokens/, /members/): operators only
(the permission matrix, tests/portal/test_permission_matrix.py, has every role); here what
each endpoint answers, its errors in the one JSON shape, and no secret after the first."""

from __future__ import annotations

import logging

import pytest

from audit.models import AuditEvent, EventType
from portal.models import ApiToken, Membership, hash_token
from tests.helpers import csrf_session, error_of, recall_body
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, viewer, agent, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "viewer", "agent", "workload_a"
)

pytestmark = pytest.mark.django_db

TOKENS = "/v1/workspaces/team-a/tokens/"
MEMBERS = "/v1/workspaces/team-a/members/"


def issue(operator, **body):
    return operator.api().post(
        TOKENS, {"name": "support-agent", "role": "agent", **body}, format="json"
    )


class TokenApiTests:
    def test_an_issued_tokens_secret_is_in_the_answer_once(self, operator, workload_a):
        response = issue(operator, boundWorkloads=[str(workload_a.id)], boundEnvironments=["prod"])

        assert response.status_code == 201, response.content
        assert "no-store" in response["Cache-Control"]
        body = response.json()
        secret = body["secret"]
        assert ApiToken.objects.get(pk=body["id"]).key_hash == hash_token(secret)
        assert body["prefix"] == secret[:10] and body["status"] == "active"
        assert body["scopes"] == ["recall", "memory.create", "session.use", "session.read"]
        assert body["boundWorkloads"] == [str(workload_a.id)]
        listed = operator.api().get(TOKENS)
        detail = operator.api().get(f"{TOKENS}{body['id']}")
        assert secret not in listed.content.decode() and secret not in detail.content.decode()
        assert "secret" not in detail.json()
        events = AuditEvent.objects.filter(type=EventType.TOKEN_ISSUED).values_list("payload")
        assert all(secret not in str(payload) for payload in events)

    def test_the_list_names_each_token_with_what_it_may_do(self, operator, agent):
        listed = operator.api().get(TOKENS).json()["results"]

        by_name = {t["name"]: t for t in listed}
        assert by_name["ada-agent"]["role"] == "agent"
        assert by_name["olga-token"]["scopes"] == []
        assert set(by_name["olga-token"]) == {
            "id", "name", "role", "scopes", "boundWorkloads", "boundEnvironments", "prefix",
            "status", "createdAt", "lastUsedAt", "expiresAt", "revokedAt", "rotatedAt",
            "previousSecretValidUntil", "apiRatePerMinute", "recallRatePerMinute",
        }  # fmt: skip

    def test_an_issued_agent_token_recalls(self, operator, workload_a):
        factories.memories(operator.workspace, {"content": "release summary"})
        secret = issue(operator).json()["secret"]
        from rest_framework.test import APIClient

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        response = client.post(
            "/v1/memory/actors/user:ada/recall", recall_body(workload_a), format="json"
        )

        assert response.status_code == 200, response.content

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"role": "agent"}, "name"),
            ({"name": " ", "role": "agent"}, "name"),
            ({"name": "x", "role": "admin"}, "role"),
            ({"name": "x", "role": "agent", "scopes": ["policy.write"]}, "scopes.0"),
            ({"name": "x", "role": "agent", "scopes": []}, "scopes"),
            ({"name": "x", "role": "agent", "boundWorkloads": ["nope"]}, "boundWorkloads.0"),
            ({"name": "x", "role": "agent", "apiRatePerMinute": 0}, "apiRatePerMinute"),
            ({"name": "x", "role": "agent", "secret": "crp_mine"}, "secret"),
        ],
    )
    def test_a_malformed_issue_is_a_400_naming_the_field(self, operator, body, field):
        response = operator.api().post(TOKENS, body, format="json")

        error = error_of(response, 400, "INVALID_REQUEST")
        assert field in error["details"]["fields"], error
        assert not ApiToken.objects.filter(name="x").exists()

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt"),
            ({"role": "editor", "boundEnvironments": ["prod"]}, "boundEnvironments"),
            ({"role": "viewer", "scopes": ["recall"]}, "scopes"),
            ({"boundEnvironments": ["moon"]}, "boundEnvironments"),
            ({"boundWorkloads": ["00000000-0000-4000-8000-000000000000"]}, "boundWorkloads"),
        ],
    )
    def test_a_grant_the_workspace_cannot_give_is_a_422(self, operator, body, field):
        response = operator.api().post(
            TOKENS, {"name": "x", "role": "agent", **body}, format="json"
        )

        error = error_of(response, 422, "TOKEN_GRANT_INVALID")
        assert field in error["details"]["fields"], error
        assert not ApiToken.objects.filter(name="x").exists()

    def test_a_taken_name_is_a_409(self, operator, agent):
        error = error_of(issue(operator, name="ada-agent"), 409, "TOKEN_NAME_TAKEN")

        assert error["details"]["fields"] == {"name": "Taken by a live token."}

    def test_a_rotation_answers_the_new_secret_once(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")

        response = operator.api().post(
            f"{TOKENS}{token.pk}/rotate", {"graceSeconds": 3600}, format="json"
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["secret"] != agent.token and body["rotatedAt"]
        assert body["previousSecretValidUntil"] is not None
        assert "no-store" in response["Cache-Control"]
        # the old secret still works, for now
        assert (
            agent.api()
            .post(
                "/v1/memory/actors/user:ada/memories",
                {"content": "x", "memoryType": "fact", "sourceKind": "user"},
                format="json",
            )
            .status_code
            == 201
        )

    def test_a_rotation_without_a_body_has_no_grace(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")

        response = operator.api().post(f"{TOKENS}{token.pk}/rotate")

        assert response.status_code == 200, response.content
        assert response.json()["previousSecretValidUntil"] is None
        error_of(agent.api().get("/v1/workspaces/"), 401, "TOKEN_EXPIRED")

    def test_a_grace_past_thirty_days_is_a_400(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")

        response = operator.api().post(
            f"{TOKENS}{token.pk}/rotate", {"graceSeconds": 31 * 86400}, format="json"
        )

        error_of(response, 400, "INVALID_REQUEST")

    def test_revoking_answers_the_token_revoked_and_its_next_call_is_refused(self, operator, agent):
        token = ApiToken.objects.get(name="ada-agent")

        response = operator.api().post(f"{TOKENS}{token.pk}/revoke")

        assert response.json()["status"] == "revoked" and response.json()["revokedAt"]
        error_of(agent.api().get("/v1/workspaces/"), 401, "AUTHENTICATION_FAILED")
        rotated = operator.api().post(f"{TOKENS}{token.pk}/rotate")
        error_of(rotated, 409, "TOKEN_NOT_ACTIVE")

    def test_another_workspaces_token_id_is_not_found(self, operator, outsider):
        theirs = ApiToken.objects.get(name="otto-token")

        for method, path in (
            ("get", f"{TOKENS}{theirs.pk}"),
            ("post", f"{TOKENS}{theirs.pk}/revoke"),
            ("post", f"{TOKENS}{theirs.pk}/rotate"),
        ):
            error_of(getattr(operator.api(), method)(path), 404, "NOT_FOUND")
        assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None

    def test_a_signed_in_operator_manages_tokens_too(self, operator):
        client = csrf_session(operator)

        response = client.post(TOKENS, {"name": "from-a-browser", "role": "viewer"}, format="json")

        assert response.status_code == 201, response.content
        event = AuditEvent.objects.filter(type=EventType.TOKEN_ISSUED).latest("pk")
        assert event.author == "user:olga"

    def test_a_secret_reaches_no_log(self, caplog, operator):
        caplog.set_level(logging.DEBUG)

        secret = issue(operator).json()["secret"]
        token = ApiToken.objects.get(name="support-agent")
        rotated = operator.api().post(f"{TOKENS}{token.pk}/rotate").json()["secret"]
        from rest_framework.test import APIClient

        for used in (secret, rotated + "x"):  # refused (rotated out, unknown): logged
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {used}")
            assert client.get("/v1/workspaces/").status_code == 401

        assert caplog.records
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert secret[4:] not in logged and rotated[4:] not in logged


class MemberApiTests:
    def test_members_are_listed_with_their_roles(self, operator, editor, viewer):
        listed = operator.api().get(MEMBERS).json()["results"]

        assert listed == [
            {"username": "eddie", "role": "editor"},
            {"username": "olga", "role": "operator"},
            {"username": "vera", "role": "viewer"},
        ]

    def test_a_user_is_added_changed_and_removed(self, operator, outsider):
        added = operator.api().post(MEMBERS, {"username": "otto", "role": "viewer"}, format="json")
        changed = operator.api().patch(f"{MEMBERS}otto", {"role": "editor"}, format="json")
        removed = operator.api().delete(f"{MEMBERS}otto")

        assert added.status_code == 201 and added.json() == {"username": "otto", "role": "viewer"}
        assert changed.json() == {"username": "otto", "role": "editor"}
        assert removed.status_code == 204
        types = list(
            AuditEvent.objects.filter(workspace=operator.workspace, type__startswith="member.")
            .order_by("pk")
            .values_list("type", flat=True)
        )
        assert types == ["member.added", "member.role_changed", "member.removed"]
        # otto's own workspace is untouched
        assert Membership.objects.filter(user=outsider.user, workspace=outsider.workspace).exists()

    def test_errors_say_what_to_do(self, operator, viewer):
        unknown = operator.api().post(
            MEMBERS, {"username": "nobody", "role": "viewer"}, format="json"
        )
        again = operator.api().post(MEMBERS, {"username": "vera", "role": "viewer"}, format="json")
        agent = operator.api().patch(f"{MEMBERS}vera", {"role": "agent"}, format="json")
        last = operator.api().delete(f"{MEMBERS}olga")
        stranger = operator.api().patch(f"{MEMBERS}otto", {"role": "viewer"}, format="json")

        error_of(unknown, 404, "NOT_FOUND")
        error_of(again, 409, "MEMBER_EXISTS")
        assert "role" in error_of(agent, 400, "INVALID_REQUEST")["details"]["fields"]
        assert "last operator" in error_of(last, 409, "LAST_OPERATOR")["message"]
        error_of(stranger, 404, "NOT_FOUND")
