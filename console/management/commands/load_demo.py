"""Load the demo workspace ``acme``: a week of its life, played through the services.

Safe to run again (``make run`` runs it on every start): once the workspace exists, nothing
is added to it; a second run only makes sure the demo users can log in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone

from audit.services import audit_backdated
from chat.models import Session, Turn
from chat.services import session_create, session_turns_post
from console.demo.history import (
    OPERATOR,
    SLUG,
    ChangeMemory,
    CreateWorkload,
    CreateWorkspace,
    ImportMemories,
    IssueToken,
    PostTurns,
    Recall,
    SaveFloor,
    SavePolicy,
    StartSession,
    Step,
    StoreQueries,
    week,
)
from console.demo.memories import demo_data
from maintenance.services import maintenance_start
from policies import services
from policies.models import Workload
from policies.selectors import workspace_policy_current
from portal.models import Membership, Role, Workspace
from recall.assembly import RecallRequest, recall_assemble
from recall.models import Actor, MemoryRecord
from recall.services import (
    actor_parse,
    memory_embed,
    memory_import,
    memory_set_status,
    memory_update,
)
from team.services import api_token_create

DEMO_PASSWORD = "acme-demo-pass"
USERS = [("operator", Role.OPERATOR), ("editor", Role.EDITOR), ("viewer", Role.VIEWER)]


class Command(BaseCommand):
    help = "Create the demo workspace 'acme': users, workloads, memories and a week of recalls."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            # The demo users share a published password: never on a production deployment.
            raise CommandError("load_demo refuses to run with DJANGO_PRODUCTION=true.")
        workspace = Workspace.objects.filter(slug=SLUG).first()
        if workspace is None:
            demo = DemoWeek()
            workspace = demo.play(week(demo_data(), now=timezone.now()))
            # Now, after the week: the agents wrote two insights again, which dedup would merge.
            maintenance_start(workspace=workspace, sweep="dedup", mode="preview", author=OPERATOR)
            summary = (
                f"{demo.memories} memories, {demo.recalls} recalls over the last week,"
                f" {len(demo.sessions)} chat session{'s' if len(demo.sessions) != 1 else ''}"
            )
        else:
            summary = "already loaded; nothing added"
        self._users(workspace)
        self.stdout.write(f"Demo workspace '{SLUG}' ready ({summary}).")

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


def _dated(row: models.Model, at: datetime) -> None:
    """Give a row the demo time it was made at (``auto_now_add`` wrote the real one)."""
    type(row)._default_manager.filter(pk=row.pk).update(created_at=at)


class DemoWeek:
    """Carries the week's steps out in order, each recorded at its time."""

    def __init__(self) -> None:
        self._workspace: Workspace | None = None
        self.workloads: dict[str, Workload] = {}
        self.last_recalled: dict[int, datetime] = {}
        self.memories = 0
        self.recalls = 0
        self.sessions: dict[str, Session] = {}

    @property
    def workspace(self) -> Workspace:
        assert self._workspace is not None, "the week starts by creating the workspace"
        return self._workspace

    def play(self, steps: list[Step]) -> Workspace:
        for step in steps:
            with audit_backdated(slug=SLUG, at=step.at):
                self._play(step)
        # Recall counted each hit at the real time; the memories were last recalled in the week.
        MemoryRecord.objects.bulk_update(
            [MemoryRecord(pk=pk, last_accessed_at=at) for pk, at in self.last_recalled.items()],
            ["last_accessed_at"],
            batch_size=500,
        )
        return self.workspace

    def _play(self, step: Step) -> None:
        match step:
            case CreateWorkspace():
                self._create_workspace(step)
            case Recall():
                self._recall(step)
            case ImportMemories():
                self._import(step)
            case ChangeMemory():
                self._change_memory(step)
            case SaveFloor():
                self._save_floor(step)
            case CreateWorkload():
                workload = services.workload_create(
                    workspace=self.workspace,
                    name=step.name,
                    author=step.author,
                    description=step.description,
                )
                _dated(workload, step.at)
                self.workloads[step.name] = workload
            case SavePolicy():
                version = services.workload_policy_save(
                    workload=self.workloads[step.workload],
                    environment=step.environment,
                    document=step.document,
                    author=step.author,
                    comment=step.comment,
                )
                _dated(version, step.at)
            case IssueToken():
                token, _ = api_token_create(
                    workspace=self.workspace, name=step.name, role=step.role, author=step.author
                )
                _dated(token, step.at)
            case StartSession():
                self._start_session(step)
            case PostTurns():
                self._post_turns(step)
            case StoreQueries():
                # The recalls read the flag from the workspace they are given.
                self._workspace = services.workspace_store_queries_set(
                    workspace=self.workspace, enabled=step.enabled, author=step.author
                )
            case _:
                raise TypeError(f"no way to play {type(step).__name__}")

    def _create_workspace(self, step: CreateWorkspace) -> None:
        self._workspace = services.workspace_create(
            slug=step.slug, name=step.name, author=step.author
        )
        _dated(self._workspace, step.at)
        _dated(self._workspace.policy_versions.get(), step.at)

    def _recall(self, step: Recall) -> None:
        envelope = recall_assemble(
            request=RecallRequest(
                workspace=self.workspace,
                workload=self.workloads[step.workload],
                environment=step.environment,
                actor_id=step.actor_id,
                query=step.query,
                top_k=step.top_k,
                override=step.override,
                author=step.author,
            )
        ).envelope
        for entry in envelope["entries"]:
            self.last_recalled[int(entry["id"])] = step.at
        self.recalls += 1

    def _import(self, step: ImportMemories) -> None:
        rows = memory_import(
            workspace=self.workspace, actor_id=step.actor_id, items=step.items, author=step.author
        )
        ids = [row.pk for row in rows]
        # With a broker the embedding job runs after the commit; the week's recalls need the
        # vectors now (embedding is idempotent: the job then finds nothing left to do).
        memory_embed(ids=ids)
        MemoryRecord.objects.filter(pk__in=ids).update(updated_at=F("created_at"))
        Actor.objects.filter(pk=rows[0].actor_id, created_at__gt=step.at).update(created_at=step.at)
        self.memories += len(rows)

    def _change_memory(self, step: ChangeMemory) -> None:
        kind, name = actor_parse(step.actor_id)
        memory = MemoryRecord.objects.select_related("actor", "workspace").get(
            workspace=self.workspace,
            actor__kind=kind,
            actor__name=name,
            content__startswith=step.starts_with,
        )
        if step.status:
            memory_set_status(memory=memory, status=step.status, author=step.author)
        if step.changes:
            memory_update(memory=memory, changes=step.changes, author=step.author)
        MemoryRecord.objects.filter(pk=memory.pk).update(updated_at=step.at)

    def _save_floor(self, step: SaveFloor) -> None:
        current = workspace_policy_current(workspace=self.workspace)
        document = {**current.document, "relaxableAxes": current.relaxable_axes, **step.changes}
        version = services.workspace_policy_save(
            workspace=self.workspace, document=document, author=step.author, comment=step.comment
        )
        _dated(version, step.at)

    def _start_session(self, step: StartSession) -> None:
        session = session_create(
            workspace=self.workspace,
            actor_id=step.actor_id,
            workload_id=self.workloads[step.workload].pk,
            environment=step.environment,
            author=step.author,
            external_id=step.external_id,
            system_prompt=step.system_prompt,
        )
        _dated(session, step.at)
        self.sessions[step.external_id] = session

    def _post_turns(self, step: PostTurns) -> None:
        session = self.sessions[step.external_id]
        posted = session_turns_post(
            session=session,
            messages=[{"role": role, "content": text} for role, text in step.messages],
            author=step.author,
        )
        Turn.objects.filter(pk__in=[turn.pk for turn in posted.turns]).update(created_at=step.at)
        if posted.context is not None:
            _dated(posted.context, step.at)
            for memory_id in posted.context.recall["memoryIds"]:
                self.last_recalled[int(memory_id)] = step.at
        Session.objects.filter(pk=session.pk).update(updated_at=step.at)
