"""Load the demo workspace ``acme``. Safe to run again: nothing is duplicated."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from policies import algebra, services
from policies.models import Environment, Workload, Workspace
from portal.models import Membership, Role
from recall.models import MemoryRecord
from recall.services import actor_get_or_create, memory_create_many

DEMO_PASSWORD = "acme-demo-pass"
USERS = [("operator", Role.OPERATOR), ("editor", Role.EDITOR), ("viewer", Role.VIEWER)]
ACTORS = ["user:ada", "user:grace", "user:linus", "agent:planner", "team:platform"]
TOPICS = [
    "release summary",
    "deployment window",
    "code review",
    "on-call rotation",
    "billing export",
    "quarterly roadmap",
    "incident postmortem",
    "database migration",
    "API rate limits",
    "design review",
    "customer escalation",
    "holiday schedule",
    "test coverage",
    "security audit",
]
PHRASES = {
    "fact": "{actor} owns the {topic} process for the platform team.",
    "preference": "{actor} prefers short bullet-point updates about the {topic}.",
    "decision": "It was decided that the {topic} happens on Tuesdays after standup.",
    "instruction": "Always link the {topic} ticket when writing to {actor}.",
    "episode": "Last week {actor} asked for help with the {topic} and it was resolved.",
    "summary": "Summary: the {topic} thread closed with three follow-ups for {actor}.",
    "insight": "{actor} responds faster when the {topic} notes include a deadline.",
    "entity": "The {topic} dashboard is maintained in the ops workspace.",
}
INSIGHT_REPEATS = "{actor} reads release notes faster when they open with the deadline"
SEGMENTS = ["memory"] * 6 + ["retrieval"] * 2 + ["tool_result", "system_policy"]


class Command(BaseCommand):
    help = "Create (or complete) the demo workspace 'acme' with users, workloads and memories."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--memories-per-actor", type=int, default=80)

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            # The demo users share a published password: never on a production deployment.
            raise CommandError("load_demo refuses to run with DJANGO_PRODUCTION=true.")
        workspace = Workspace.objects.filter(slug="acme").first()
        if workspace is None:
            workspace = services.workspace_create(
                slug="acme", name="Acme Corp", author="system:demo"
            )
            floor = {
                **algebra.default_floor(),
                "diagnosticsVerbosity": "full",
                "relaxableAxes": ["memoryTypeAllowed", "diagnosticsVerbosity", "confidenceMin"],
            }
            services.workspace_policy_save(
                workspace=workspace,
                document=floor,
                author="system:demo",
                comment="Let agents narrow memory types and ask for full diagnostics",
            )
        for env in ("prod", "staging"):
            Environment.objects.get_or_create(workspace=workspace, slug=env)
        self._users(workspace)
        self._workloads(workspace)
        created = self._memories(workspace, options["memories_per_actor"])
        self.stdout.write(f"Demo workspace 'acme' ready ({created} new memories).")

    def _users(self, workspace: Workspace) -> None:
        User = get_user_model()
        for username, role in USERS:
            user, made = User.objects.get_or_create(username=username)
            if made:
                user.set_password(DEMO_PASSWORD)
                user.save()
            Membership.objects.get_or_create(
                user=user, workspace=workspace, defaults={"role": role}
            )

    def _workloads(self, workspace: Workspace) -> None:
        if not Workload.objects.filter(workspace=workspace, name="support-assistant").exists():
            support = services.workload_create(
                workspace=workspace,
                name="support-assistant",
                author="system:demo",
                description="Answers customer questions",
            )
            services.workload_policy_save(
                workload=support,
                environment="prod",
                author="system:demo",
                document={
                    "sensitivityCeiling": "internal",
                    "confidenceMin": 0.5,
                    "memoryTypeAllowed": [
                        "fact",
                        "preference",
                        "decision",
                        "instruction",
                        "summary",
                    ],
                },
                comment="Support sees internal memory only",
            )
        if not Workload.objects.filter(workspace=workspace, name="release-planner").exists():
            planner = services.workload_create(
                workspace=workspace,
                name="release-planner",
                author="system:demo",
                description="Drafts release plans",
            )
            services.workload_policy_save(
                workload=planner,
                environment=None,
                author="system:demo",
                document={"diagnosticsVerbosity": "summary", "totalTokenBudget": 3000},
                comment="Planner default for every environment",
            )

    def _memories(self, workspace: Workspace, per_actor: int) -> int:
        rng = random.Random(20261202)
        now = timezone.now()
        created = 0
        for actor_id in ACTORS:
            actor = actor_get_or_create(workspace=workspace, actor_id=actor_id)
            if MemoryRecord.objects.filter(actor=actor).exists():
                continue
            items = []
            for n in range(per_actor):
                memory_type = rng.choice(list(PHRASES))
                content = PHRASES[memory_type].format(
                    actor=actor.name.capitalize(), topic=rng.choice(TOPICS)
                )
                made_at = now - timedelta(hours=rng.uniform(0, 24 * 120))
                hits = rng.choice([0, 0, 1, 2, 3, 5, 8, 12, 20])
                # Most recalled memories were recalled lately; a few not for weeks, so the
                # decay preview has something to show.
                recalled = (
                    min(now, made_at + timedelta(hours=rng.uniform(0, 48)))
                    if rng.random() < 0.15
                    else max(made_at, now - timedelta(hours=rng.uniform(0, 96)))
                )
                status = rng.choices(["active", "stale", "suppressed"], weights=[18, 1, 1])[0]
                expires = now - timedelta(days=rng.uniform(1, 20)) if n % 29 == 0 else None
                items.append(
                    {
                        "content": content,
                        "memory_type": memory_type,
                        "source_kind": rng.choice(algebra.VOCABULARIES["sourceKind"]),
                        "confirmation_status": rng.choice(
                            algebra.VOCABULARIES["confirmationStatus"]
                        ),
                        "confidence": round(rng.uniform(0.3, 1.0), 2),
                        "sensitivity": rng.choices(
                            algebra.VOCABULARIES["sensitivity"], weights=[4, 4, 2, 1]
                        )[0],
                        "consent_policy": rng.choices(
                            algebra.VOCABULARIES["consentPolicy"], weights=[4, 2, 2, 2, 1, 1]
                        )[0],
                        "segment_kind": rng.choice(SEGMENTS),
                        "lifecycle_status": status,
                        "created_at": made_at,
                        "hit_count": hits,
                        "last_accessed_at": recalled if hits else None,
                        "expires_at": expires,
                        "stale_since": now - timedelta(days=rng.uniform(1, 60))
                        if status == "stale"
                        else None,
                    }
                )
            # Two insights that say the same thing, for the dedup sweep.
            repeated = INSIGHT_REPEATS.format(actor=actor.name.capitalize())
            for days, text in ((20, repeated), (3, repeated + " again")):
                items.append(
                    {**items[0], "content": text, "memory_type": "insight",
                     "lifecycle_status": "active", "expires_at": None, "stale_since": None,
                     "created_at": now - timedelta(days=days)}
                )  # fmt: skip
            created += len(memory_create_many(workspace=workspace, actor=actor, items=items))
        return created
