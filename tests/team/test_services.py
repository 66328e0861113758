"""Tokens issued, rotated and revoked, members added, re-roled and removed: each checked, each
written with its audit event in words, and no secret in any event."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from audit.models import AuditEvent, EventType
from audit.presenters import presenter_for, summary
from policies.services import workload_archive, workload_create
from portal.errors import ConflictError, NotFoundError, UnprocessableError, ValidationFailed
from portal.models import ApiToken, Membership, Role, hash_token
from team.services import (
    api_token_create,
    api_token_revoke,
    api_token_rotate,
    membership_add,
    membership_remove,
    membership_role_change,
)
from tests.helpers import run_in_threads

pytestmark = pytest.mark.django_db


def latest(workspace: Any, type: str) -> AuditEvent:
    return AuditEvent.objects.filter(workspace=workspace, type=type).latest("pk")


def facts(event: AuditEvent) -> dict[str, str]:
    from audit.presenters import Shown

    shown = Shown(event, event.payload, event.workspace, None)
    return {fact.label: fact.value for fact in presenter_for(event.type).facts(shown)}


class TokenIssueTests:
    def test_an_agent_token_holds_every_agent_scope_and_its_binding(self, workspace_a, workload_a):
        token, raw = api_token_create(
            workspace=workspace_a,
            name="support-agent",
            role=Role.AGENT,
            workloads=[str(workload_a.id)],
            environments=["prod"],
            expires_at=timezone.now() + timedelta(days=30),
            recall_rate_per_minute=60,
            author="user:olga",
        )

        assert token.key_hash == hash_token(raw) and raw.startswith("crp_")
        assert token.scopes == ["recall", "memory.create", "session.use", "session.read"]
        assert token.bound_workloads == [workload_a.id]
        assert token.bound_environments == ["prod"]
        event = latest(workspace_a, EventType.TOKEN_ISSUED)
        assert event.author == "user:olga"
        assert event.payload["boundWorkloads"] == [str(workload_a.id)]
        assert event.payload["recallRatePerMinute"] == 60
        assert raw not in json.dumps(event.payload) and raw[10:] not in json.dumps(event.payload)
        assert summary(event) == f"support-agent (agent), {token.prefix}…"
        assert facts(event)["Environments"] == "prod"

    def test_every_problem_is_said_at_once_and_nothing_is_issued(self, workspace_a, workload_b):
        with pytest.raises(UnprocessableError) as refused:
            api_token_create(
                workspace=workspace_a,
                name="x",
                role=Role.AGENT,
                scopes=["recall", "policy.write"],
                workloads=[str(workload_b.id)],  # another workspace's
                environments=["moon"],
                expires_at=timezone.now() - timedelta(days=1),
            )

        assert refused.value.code == "TOKEN_GRANT_INVALID" and refused.value.status == 422
        fields = refused.value.details["fields"]
        assert set(fields) == {"scopes", "boundWorkloads", "boundEnvironments", "expiresAt"}
        assert not ApiToken.objects.filter(name="x").exists()
        assert not AuditEvent.objects.filter(type=EventType.TOKEN_ISSUED).exists()

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"role": "admin"}, "role"),
            ({"api_rate_per_minute": 0}, "apiRatePerMinute"),
            ({"name": " "}, "name"),
            ({"name": "a\tb"}, "name"),
        ],
    )
    def test_a_malformed_value_is_a_400(self, workspace_a, changes, field):
        with pytest.raises(ValidationFailed) as refused:
            api_token_create(**{"workspace": workspace_a, "name": "x", "role": "agent", **changes})

        assert field in refused.value.details["fields"]

    def test_an_archived_workload_cannot_be_bound(self, workspace_a, workload_a):
        workload_archive(workload=workload_a, author="t")

        with pytest.raises(UnprocessableError) as refused:
            api_token_create(
                workspace=workspace_a, name="x", role=Role.AGENT, workloads=[workload_a.id]
            )

        assert "boundWorkloads" in refused.value.details["fields"]

    def test_only_an_agent_token_takes_scopes_or_a_binding(self, workspace_a):
        with pytest.raises(UnprocessableError) as refused:
            api_token_create(
                workspace=workspace_a, name="x", role=Role.EDITOR, environments=["prod"]
            )

        assert "Only agent tokens" in refused.value.details["fields"]["boundEnvironments"]

    def test_a_live_tokens_name_is_taken_until_it_is_revoked(self, workspace_a):
        first, _ = api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)

        with pytest.raises(ConflictError) as taken:
            api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)
        api_token_revoke(token=first, author="t")
        second, _ = api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)

        assert taken.value.code == "TOKEN_NAME_TAKEN"
        assert second.pk != first.pk

    def test_existing_tokens_keep_their_role_and_no_scopes(self, editor):
        token = ApiToken.objects.get(name="eddie-token")

        assert token.role == Role.EDITOR and token.scopes == [] and token.bound_workloads == []
        assert token.expires_at is None and token.api_rate_per_minute is None


class TokenRotateTests:
    def test_a_rotation_keeps_the_token_and_its_previous_secret_for_the_grace(self, workspace_a):
        token, old = api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)

        rotated, new = api_token_rotate(token=token, grace=timedelta(hours=2), author="user:olga")

        assert rotated.pk == token.pk and new != old
        assert rotated.key_hash == hash_token(new)
        assert rotated.previous_key_hash == hash_token(old)
        assert rotated.previous_valid_until - rotated.rotated_at == timedelta(hours=2)
        event = latest(workspace_a, EventType.TOKEN_ROTATED)
        assert event.payload["previousPrefix"] == old[:10]
        assert event.payload["prefix"] == new[:10]
        assert event.payload["graceSeconds"] == 7200
        text = json.dumps(event.payload)
        assert old[10:] not in text and new[10:] not in text
        assert summary(event).endswith("the previous secret valid for 2 hours")
        assert facts(event)["Previous secret valid for"] == "2 hours"

    def test_a_revoked_token_cannot_be_rotated(self, workspace_a):
        token, _ = api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)
        api_token_revoke(token=token, author="t")

        with pytest.raises(ConflictError) as refused:
            api_token_rotate(token=token, grace=timedelta(0), author="t")

        assert refused.value.code == "TOKEN_NOT_ACTIVE"

    def test_a_grace_longer_than_thirty_days_is_refused(self, workspace_a):
        token, _ = api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)

        with pytest.raises(ValidationFailed):
            api_token_rotate(token=token, grace=timedelta(days=31), author="t")

    def test_revoking_twice_records_once(self, workspace_a):
        token, _ = api_token_create(workspace=workspace_a, name="bot", role=Role.AGENT)

        api_token_revoke(token=token, author="t")
        api_token_revoke(token=token, author="t")

        assert AuditEvent.objects.filter(type=EventType.TOKEN_REVOKED).count() == 1


@pytest.fixture
def nina(db: Any) -> Any:
    return get_user_model().objects.create_user(username="nina", password="pw-nina")


class MembershipTests:
    def test_an_existing_user_is_added_with_a_role(self, operator, nina):
        membership = membership_add(
            workspace=operator.workspace, username="nina", role=Role.EDITOR, author="user:olga"
        )

        assert membership.role == Role.EDITOR
        event = latest(operator.workspace, EventType.MEMBER_ADDED)
        assert event.payload == {"username": "nina", "role": "editor"}
        assert summary(event) == "nina as editor"

    def test_an_unknown_user_or_a_member_already_is_refused(self, operator, viewer):
        with pytest.raises(NotFoundError):
            membership_add(
                workspace=operator.workspace, username="nobody", role="viewer", author="t"
            )
        with pytest.raises(ConflictError) as already:
            membership_add(workspace=operator.workspace, username="vera", role="editor", author="t")

        assert already.value.code == "MEMBER_EXISTS"

    def test_agent_is_no_members_role(self, operator, nina):
        with pytest.raises(ValidationFailed):
            membership_add(
                workspace=operator.workspace, username="nina", role=Role.AGENT, author="t"
            )

    def test_a_role_change_is_recorded_before_and_after(self, operator, viewer):
        membership = Membership.objects.get(user=viewer.user)

        membership_role_change(membership=membership, role=Role.EDITOR, author="user:olga")

        event = latest(operator.workspace, EventType.MEMBER_ROLE_CHANGED)
        assert event.payload == {"username": "vera", "before": "viewer", "after": "editor"}
        assert summary(event) == "vera: viewer → editor"
        assert facts(event) == {"Member": "vera", "Role before": "viewer", "Role after": "editor"}

    def test_the_same_role_again_records_nothing(self, operator):
        membership = Membership.objects.get(user=operator.user)

        membership_role_change(membership=membership, role=Role.OPERATOR, author="t")

        assert not AuditEvent.objects.filter(type=EventType.MEMBER_ROLE_CHANGED).exists()

    def test_the_last_operator_can_neither_be_removed_nor_lose_the_role(self, operator, editor):
        membership = Membership.objects.get(user=operator.user)

        with pytest.raises(ConflictError) as demoted:
            membership_role_change(membership=membership, role=Role.EDITOR, author="t")
        with pytest.raises(ConflictError) as removed:
            membership_remove(membership=membership, author="t")

        assert demoted.value.code == removed.value.code == "LAST_OPERATOR"
        assert "olga" in removed.value.message
        assert Membership.objects.get(user=operator.user).role == Role.OPERATOR

    def test_an_operator_may_go_once_another_is_one(self, operator, editor):
        other = Membership.objects.get(user=editor.user)
        membership_role_change(membership=other, role=Role.OPERATOR, author="t")

        membership_remove(membership=Membership.objects.get(user=operator.user), author="t")

        event = latest(operator.workspace, EventType.MEMBER_REMOVED)
        assert event.payload == {"username": "olga", "role": "operator"}
        assert summary(event) == "olga, who was operator"
        assert not Membership.objects.filter(user=operator.user).exists()


class LastOperatorRaceTests:
    @pytest.mark.django_db(transaction=True)
    def test_two_operators_demoting_each_other_at_once_leave_one(self, operator, editor):
        second = Membership.objects.get(user=editor.user)
        membership_role_change(membership=second, role=Role.OPERATOR, author="t")
        both = [Membership.objects.get(user=operator.user), second]

        def demote(n: int) -> str:
            try:
                membership_role_change(membership=both[n], role=Role.VIEWER, author="t")
            except ConflictError as exc:
                return exc.code
            return "demoted"

        results = run_in_threads(demote, 2, together=True)

        assert sorted(map(str, results)) == ["LAST_OPERATOR", "demoted"]
        assert Membership.objects.filter(role=Role.OPERATOR).count() == 1


class WorkloadNamesTests:
    def test_a_binding_to_a_workload_renamed_since_still_holds_its_id(self, workspace_a):
        workload = workload_create(workspace=workspace_a, name="a-bot", author="t")
        token, _ = api_token_create(
            workspace=workspace_a, name="bot", role=Role.AGENT, workloads=[workload.id]
        )

        assert token.bound_workloads == [workload.id]
