"""The management commands an operator runs: load_demo and create_api_token."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import Injection
from audit.selectors import assembled_per_day
from audit.services import audit_chain_verify
from chat.models import Session
from maintenance.models import MaintenanceRun
from policies.models import Workload
from policies.services import workspace_create
from portal.models import MEMBER_ROLES, ApiToken, Membership, Role, Workspace
from recall.engine.impact import memory_policy_impact
from recall.models import Actor, MemoryRecord
from team.services import api_token_create


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


def event_counts(workspace: Workspace) -> dict[str, int]:
    return dict(workspace.audit_events.values_list("type").annotate(n=Count("id")).order_by("type"))


@pytest.fixture(scope="class")
def demo_loaded(class_db: None) -> None:
    """The demo, loaded once for the class's tests (each runs in a savepoint of its own)."""
    call_command("load_demo", stdout=StringIO())


@pytest.fixture
def demo(demo_loaded: None, db: Any) -> Workspace:
    return Workspace.objects.get(slug="acme")


class LoadDemoTests:
    def test_it_creates_the_workspace_its_workloads_actors_and_users(self, demo):
        assert demo.name == "Acme Corp"
        assert set(demo.environments.values_list("slug", flat=True)) == {"dev", "staging", "prod"}
        assert sorted(demo.workloads.values_list("name", flat=True)) == [
            "onboarding-guide",
            "release-planner",
            "support-assistant",
        ]
        actors = set(Actor.objects.filter(workspace=demo).values_list("kind", "name"))
        assert {("user", "ada"), ("user", "priya"), ("agent", "planner")} <= actors
        assert len(actors) == 8
        assert 250 <= MemoryRecord.objects.filter(workspace=demo).count() <= 1000
        operator = get_user_model().objects.get(username="operator")
        assert Membership.objects.get(user=operator, workspace=demo).role == Role.OPERATOR
        assert operator.check_password("acme-demo-pass")
        assert {m.role for m in Membership.objects.filter(workspace=demo)} == {
            value for value, _ in MEMBER_ROLES
        }

    def test_the_floor_is_a_real_operator_s_and_was_edited_with_comments(self, demo):
        versions = list(demo.policy_versions.order_by("version"))
        floor = versions[-1]

        assert [v.version for v in versions] == [1, 2, 3]
        assert all(v.comment for v in versions)
        assert floor.document["confidenceMin"] >= 0.5
        assert floor.document["consentPolicyAllowed"] == [
            "contractual",
            "explicit",
            "legitimate_interest",
        ]
        assert floor.document["maxAgeSeconds"] == 365 * 24 * 3600
        assert floor.document["sensitivityCeiling"] == "confidential"
        assert "memoryTypeAllowed" in floor.relaxable_axes
        # A real operator's floor lets a fair share through: neither nearly all, nor nothing.
        [(recallable, _)] = memory_policy_impact(
            workspace=demo, pairs=[(floor.document, floor.document)], now=timezone.now()
        )
        assert 0.3 <= recallable / MemoryRecord.objects.filter(workspace=demo).count() <= 0.6
        # Each version dated when its event says it was saved, oldest first.
        events = demo.audit_events.filter(type="context.workspace_policy_set").order_by("id")
        assert [v.created_at for v in versions] == [e.occurred_at for e in events]

    def test_a_week_of_recalls_went_through_the_recall_service(self, demo):
        assembled = demo.audit_events.filter(type="context.assembled")
        chart = assembled_per_day(workspace=demo, since=timezone.now() - timedelta(days=14))
        workloads = set(assembled.values_list("workload_id", flat=True))

        assert assembled.count() >= 100
        assert len([day for day, n in chart.items() if n]) >= 6
        assert workloads == set(demo.workloads.values_list("id", flat=True))
        assert set(assembled.values_list("environment", flat=True)) == {"dev", "staging", "prod"}
        assert Injection.objects.filter(workspace=demo).exists()
        assert MemoryRecord.objects.filter(workspace=demo, hit_count__gt=0).exists()
        # The trail has more than recalls: policy edits, memory changes, tokens, a preview.
        assert {
            "context.workload_policy_set",
            "memory.changed",
            "token.issued",
            "workspace.settings_set",
            "maintenance.previewed",
        } <= set(event_counts(demo))
        # The preview made at the end finds the two insights the agents wrote twice.
        run = MaintenanceRun.objects.get(workspace=demo)
        assert (run.sweep, run.mode, run.status, run.total) == ("dedup", "preview", "succeeded", 2)

    def test_the_chain_verifies_and_every_time_is_the_week_s(self, demo):
        times = list(demo.audit_events.order_by("id").values_list("occurred_at", flat=True))
        last = Injection.objects.filter(workspace=demo, truncated=False).latest("event_id")
        memory = MemoryRecord.objects.get(pk=last.memory_id)

        assert audit_chain_verify(workspace=demo).ok
        assert times == sorted(times)
        assert times[0] < timezone.now() - timedelta(days=6)
        # Recall counted the hit at the real time; the demo dates it with its context.
        assert memory.last_accessed_at == last.event.occurred_at

    def test_every_memory_s_times_are_in_order(self, demo):
        now = timezone.now()
        rows = MemoryRecord.objects.filter(workspace=demo).values(
            "pk", "created_at", "last_accessed_at", "stale_since", "updated_at", "expires_at",
            "lifecycle_status",
        )  # fmt: skip

        assert rows
        for m in rows:
            created, last, stale = m["created_at"], m["last_accessed_at"], m["stale_since"]
            assert created <= m["updated_at"] <= now, m
            assert last is None or created <= last <= now, m
            assert (stale is not None) == (m["lifecycle_status"] == "stale"), m
            if stale is not None:
                # Stale after it was made and last recalled, not before (issue 36's #145).
                assert max(created, last or created) < stale <= now, m
            assert m["expires_at"] is None or m["expires_at"] > created, m

    def test_an_agent_s_chat_session_with_ada_is_open_with_its_turns(self, demo):
        [session] = Session.objects.filter(workspace=demo)
        turns = list(session.turns.order_by("index"))
        contexts = list(session.contexts.order_by("turn"))
        started = demo.audit_events.get(type="session.started")

        assert (session.actor.kind, session.actor.name) == ("user", "ada")
        assert (session.workload.name, session.environment) == ("support-assistant", "prod")
        assert (session.status, session.external_id) == ("active", "support-chat-ada-0001")
        assert session.system_prompt.startswith("You are Acme's support assistant")
        assert session.system_prompt_tokens > 0
        assert [t.role for t in turns] == ["user", "assistant", "user"]
        assert "auditors" in turns[0].content
        # A context for each of the user's turns, each with its context.assembled event.
        assert [c.turn for c in contexts] == [1, 3]
        events = demo.audit_events.filter(pk__in=[c.event_id for c in contexts])
        assert set(events.values_list("type", flat=True)) == {"context.assembled"}
        # Dated hours ago, two minutes between the posts, like the events.
        now = timezone.now()
        assert session.created_at == started.occurred_at
        assert now - timedelta(hours=2) < session.created_at == turns[0].created_at < now
        assert turns[2].created_at - turns[0].created_at == timedelta(minutes=2)
        assert session.updated_at == turns[2].created_at
        assert sorted(e.occurred_at for e in events) == [
            contexts[0].created_at,
            turns[2].created_at,
        ]

    def test_running_it_twice_changes_nothing(self, demo):
        before = counts()
        events = event_counts(demo)

        out = StringIO()
        call_command("load_demo", stdout=out)

        assert counts() == before
        assert event_counts(demo) == events
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

        assert [w["slug"] for w in listed.json()["results"]] == ["acme"]
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

    def test_an_agent_token_is_bound_by_workload_name_and_expires(self, acme):
        workload = Workload.objects.create(workspace=acme, name="support-assistant")

        create_token(
            "--workspace", "acme", "--role", "agent", "--name", "bot", "--scope", "recall",
            "--workload", "support-assistant", "--environment", "prod", "--expires", "2099-01-31",
        )  # fmt: skip

        token = ApiToken.objects.get(workspace=acme, name="bot")
        assert token.role == Role.AGENT and token.scopes == ["recall"]
        assert token.bound_workloads == [workload.id] and token.bound_environments == ["prod"]
        assert token.expires_at.isoformat() == "2099-01-31T00:00:00+00:00"

    @pytest.mark.parametrize(
        "args",
        [
            ("--expires", "someday"),
            ("--expires", "2001-01-01"),
            ("--workload", "no-such-bot"),
            ("--environment", "moon"),
        ],
    )
    def test_a_bad_binding_or_expiry_is_an_error(self, acme, args):
        with pytest.raises(CommandError):
            create_token("--workspace", "acme", "--role", "agent", *args)

        assert not ApiToken.objects.exists()

    def test_a_live_tokens_name_is_taken_without_replace(self, acme):
        create_token("--workspace", "acme", "--role", "viewer", "--name", "ci")

        with pytest.raises(CommandError, match="live token named"):
            create_token("--workspace", "acme", "--role", "viewer", "--name", "ci")

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
