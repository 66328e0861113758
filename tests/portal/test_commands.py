"""The management commands an operator runs: load_demo and create_api_token."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from audit.services import audit_chain_verify
from policies.models import Workload, Workspace
from policies.services import workspace_create
from portal.models import ApiToken, Membership, Role
from portal.services import api_token_create
from recall.models import Actor, MemoryRecord


def counts() -> dict[str, int]:
    return {
        "workspaces": Workspace.objects.count(),
        "workloads": Workload.objects.count(),
        "memories": MemoryRecord.objects.count(),
        "actors": Actor.objects.count(),
        "users": get_user_model().objects.count(),
        "memberships": Membership.objects.count(),
    }


def create_token(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("create_api_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def demo(db: Any) -> Workspace:
    call_command("load_demo", "--memories-per-actor", "60", stdout=StringIO())
    return Workspace.objects.get(slug="acme")


class LoadDemoTests:
    def test_it_creates_the_acme_workspace(self, demo):
        assert demo.name == "Acme Corp"
        assert {"prod", "staging"} <= set(demo.environments.values_list("slug", flat=True))
        assert sorted(demo.workloads.values_list("name", flat=True)) == [
            "release-planner",
            "support-assistant",
        ]
        assert Actor.objects.filter(workspace=demo).count() == 5
        ada = Actor.objects.get(workspace=demo, kind="user", name="ada")
        assert ada.external_id == "user:ada"
        # and two insights that repeat each other, for the dedup sweep
        assert MemoryRecord.objects.filter(workspace=demo, actor=ada).count() == 60 + 2
        assert MemoryRecord.objects.filter(workspace=demo).count() == (60 + 2) * 5

    def test_it_creates_an_operator_who_can_log_in(self, demo):
        operator = get_user_model().objects.get(username="operator")

        assert Membership.objects.get(user=operator, workspace=demo).role == Role.OPERATOR
        assert operator.check_password("acme-demo-pass")
        assert {m.role for m in Membership.objects.filter(workspace=demo)} == set(Role.values)

    def test_the_demo_policies_are_saved_and_audited(self, demo):
        floor = demo.policy_versions.order_by("-version").first()

        assert floor.version == 2
        assert "memoryTypeAllowed" in floor.relaxable_axes
        support = demo.workloads.get(name="support-assistant")
        assert support.policy_versions.get().environment == "prod"
        planner = demo.workloads.get(name="release-planner")
        assert planner.policy_versions.get().environment == ""
        assert audit_chain_verify(workspace=demo).ok

    def test_running_it_twice_changes_nothing(self, demo):
        before = counts()
        events = demo.audit_events.count()

        call_command("load_demo", "--memories-per-actor", "60", stdout=StringIO())

        assert counts() == before
        assert demo.audit_events.count() == events
        assert demo.policy_versions.count() == 2

    def test_the_default_load_has_a_few_hundred_memories(self, db):
        out = StringIO()

        call_command("load_demo", stdout=out)

        assert 200 <= MemoryRecord.objects.count() <= 1000
        assert "ready" in out.getvalue()


@pytest.fixture
def acme(db: Any) -> Workspace:
    return workspace_create(slug="acme", name="Acme Corp", author="system:test")


class CreateApiTokenTests:
    def test_it_prints_the_token_alone_on_the_last_line(self, acme):
        out, err = create_token("--workspace", "acme", "--role", "editor")

        token = out.strip().splitlines()[-1]
        assert token.startswith("crp_")
        assert " " not in token
        assert token not in err
        stored = ApiToken.objects.get(workspace=acme, name="cli")
        assert stored.role == Role.EDITOR
        assert stored.key_hash != token

    def test_the_printed_token_works_against_the_api_with_its_role(self, acme):
        out, _ = create_token("--workspace", "acme", "--role", "editor")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {out.strip().splitlines()[-1]}")

        listed = client.get("/v1/workspaces/")
        created = client.post("/v1/workspaces/acme/workloads/", {"name": "cli-bot"}, format="json")
        floor = client.put("/v1/workspaces/acme/policy", {}, format="json")

        assert [w["slug"] for w in listed.json()] == ["acme"]
        assert created.status_code == 201
        assert floor.status_code == 403

    def test_replace_revokes_the_earlier_token_of_that_name(self, acme):
        first, _ = create_token("--workspace", "acme", "--role", "viewer", "--name", "ci")
        second, _ = create_token(
            "--workspace", "acme", "--role", "viewer", "--name", "ci", "--replace"
        )
        old, new = APIClient(), APIClient()
        old.credentials(HTTP_AUTHORIZATION=f"Bearer {first.strip()}")
        new.credentials(HTTP_AUTHORIZATION=f"Bearer {second.strip()}")

        assert old.get("/v1/workspaces/").status_code == 401
        assert new.get("/v1/workspaces/").status_code == 200

    def test_an_unknown_workspace_is_an_error(self, db):
        with pytest.raises(CommandError, match="nowhere"):
            create_token("--workspace", "nowhere", "--role", "editor")

        assert not ApiToken.objects.exists()

    def test_an_unknown_role_is_an_error(self, acme):
        with pytest.raises(CommandError):
            create_token("--workspace", "acme", "--role", "admin")

        assert not ApiToken.objects.exists()

    def test_a_too_long_name_is_an_error(self, acme):
        with pytest.raises(CommandError, match="name"):
            create_token("--workspace", "acme", "--role", "viewer", "--name", "n" * 101)

        assert not ApiToken.objects.exists()


class TokenAuditTests:
    def test_issuing_and_replacing_a_token_is_audited_without_the_secret(self, db, workspace_a):
        from audit.models import AuditEvent

        _, first = api_token_create(workspace=workspace_a, name="ci", role="viewer")
        _, second = api_token_create(workspace=workspace_a, name="ci", role="viewer", replace=True)

        events = list(
            AuditEvent.objects.filter(workspace=workspace_a, type__startswith="token.")
            .order_by("id")
            .values_list("type", "payload")
        )
        assert [t for t, _ in events] == ["token.issued", "token.revoked", "token.issued"]
        assert all(first not in str(p) and second not in str(p) for _, p in events)


class DemoInProductionTests:
    def test_load_demo_refuses_to_run_in_production(self, db, settings):
        settings.PRODUCTION = True
        with pytest.raises(CommandError, match="DJANGO_PRODUCTION"):
            call_command("load_demo")
