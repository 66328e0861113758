"""Sessions and their turns, through the services: starting one (the actor, the workload, the
environment and the external id checked), appending checked messages, ending, deleting."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from chat.models import Session, Turn
from chat.services import (
    MESSAGE_MAX_CHARS,
    Message,
    MessageTooLarge,
    messages_check,
    session_create,
    session_end,
    sessions_delete,
    turns_numbered,
)
from policies.services import workload_archive
from portal.errors import ConflictError, NotFoundError, ValidationFailed
from recall.erasure import actor_erase
from recall.models import Actor
from recall.tokens import estimate_tokens
from tests.module_personas import module_scoped

# The workspace and workload the tests here act on, made once per module.
workspace_a, workload_a, made_first = module_scoped("workspace_a", "workload_a")

pytestmark = pytest.mark.django_db


def start(workspace: Any, workload: Any, **fields: Any) -> Session:
    return session_create(
        workspace=workspace,
        actor_id=fields.pop("actor_id", "user:ada"),
        workload_id=workload.id,
        environment=fields.pop("environment", "prod"),
        author="system:test",
        **fields,
    )


def append(session: Session, *messages: tuple[str, str]) -> list[Turn]:
    with transaction.atomic():
        turns = Turn.objects.bulk_create(
            turns_numbered(session=session, messages=[Message(r, c) for r, c in messages])
        )
        session.save()
    return turns


class SessionCreateTests:
    def test_a_session_belongs_to_an_actor_a_workload_and_an_environment(
        self, workspace_a, workload_a
    ):
        session = start(workspace_a, workload_a, external_id="conv-1", system_prompt="Be brief.")

        assert session.status == "active" and session.ended_at is None
        assert session.actor.external_id == "user:ada"
        assert session.workload == workload_a and session.environment == "prod"
        assert session.system_prompt_tokens == estimate_tokens("Be brief.")

    def test_the_actor_is_created_as_a_memory_write_would(self, workspace_a, workload_a):
        start(workspace_a, workload_a, actor_id="user:new")

        assert Actor.objects.filter(workspace=workspace_a, name="new").exists()

    def test_a_second_session_with_the_same_external_id_names_the_first(
        self, workspace_a, workload_a
    ):
        first = start(workspace_a, workload_a, external_id="conv-1")

        with pytest.raises(ConflictError) as caught:
            start(workspace_a, workload_a, external_id="conv-1", actor_id="user:bob")

        assert caught.value.code == "SESSION_EXISTS"
        assert caught.value.details["sessionId"] == str(first.pk)
        assert Session.objects.count() == 1

    def test_the_external_id_is_unique_per_workspace_only(
        self, workspace_a, workspace_b, workload_a, workload_b
    ):
        start(workspace_a, workload_a, external_id="conv-1")
        start(workspace_b, workload_b, external_id="conv-1")

        assert Session.objects.count() == 2

    def test_another_workspaces_workload_is_not_found(self, workspace_a, workload_b):
        with pytest.raises(NotFoundError):
            start(workspace_a, workload_b)

    def test_an_archived_workload_and_an_unknown_environment_are_refused(
        self, workspace_a, workload_a
    ):
        with pytest.raises(ValidationFailed) as caught:
            start(workspace_a, workload_a, environment="moon")
        assert "environment" in caught.value.details["fields"]

        workload_archive(workload=workload_a, author="system:test")
        with pytest.raises(ConflictError) as archived:
            start(workspace_a, workload_a)
        assert archived.value.code == "WORKLOAD_ARCHIVED"
        assert not Session.objects.exists()

    def test_an_erased_actor_gets_no_session(self, workspace_a, workload_a):
        start(workspace_a, workload_a)
        actor_erase(workspace=workspace_a, actor_id="user:ada", author="system:test")

        with pytest.raises(ConflictError) as caught:
            start(workspace_a, workload_a)

        assert caught.value.code == "ACTOR_ERASED"
        assert not Session.objects.exists()


class MessagesCheckTests:
    @pytest.mark.parametrize(
        ("messages", "field"),
        [
            ([], "messages"),
            ("hello", "messages"),
            ([{"role": "system", "content": "x"}], "messages[0].role"),
            ([{"role": "user"}], "messages[0].content"),
            ([{"role": "user", "content": 3}], "messages[0].content"),
            ([{"role": "user", "content": "  "}], "messages[0].content"),
            ([{"role": "user", "content": "x", "name": "a"}], "messages[0].name"),
            (["x"], "messages[0]"),
        ],
    )
    def test_bad_messages_are_named(self, messages, field):
        with pytest.raises(ValidationFailed) as caught:
            messages_check(messages)

        assert field in caught.value.details["fields"]

    def test_a_message_over_the_limit_is_a_413_that_says_which(self):
        with pytest.raises(MessageTooLarge) as caught:
            messages_check(
                [{"role": "user", "content": "ok"}, {"role": "tool", "content": "x" * 100_001}]
            )

        assert caught.value.status == 413
        assert caught.value.details == {"index": 1, "size": 100_001, "limit": MESSAGE_MAX_CHARS}

    def test_an_empty_tool_or_assistant_message_is_fine(self):
        checked = messages_check(
            [{"role": "assistant", "content": ""}, {"role": "tool", "content": ""}]
        )

        assert [m.role for m in checked] == ["assistant", "tool"]


class TurnsTests:
    def test_turns_are_numbered_on_with_their_tokens(self, workspace_a, workload_a):
        session = start(workspace_a, workload_a)

        append(session, ("user", "hello there"), ("assistant", "hi"))
        append(session, ("user", "what now?"))

        turns = list(session.turns.order_by("index").values_list("index", "role", "tokens"))
        assert turns == [
            (1, "user", estimate_tokens("hello there")),
            (2, "assistant", estimate_tokens("hi")),
            (3, "user", estimate_tokens("what now?")),
        ]
        session.refresh_from_db()
        assert session.turn_count == 3

    def test_ending_twice_changes_nothing_the_second_time(self, workspace_a, workload_a):
        session = start(workspace_a, workload_a)

        ended = session_end(session=session, author="system:test")
        again = session_end(session=session, author="system:test")

        assert ended.status == "ended" and again.ended_at == ended.ended_at


class SessionsDeleteTests:
    def test_it_deletes_the_actors_sessions_and_says_how_many(self, workspace_a, workload_a):
        ada = start(workspace_a, workload_a)
        append(ada, ("user", "one"), ("assistant", "two"))
        append(start(workspace_a, workload_a), ("user", "three"))
        bob = start(workspace_a, workload_a, actor_id="user:bob")
        append(bob, ("user", "bob's"))

        with transaction.atomic():
            deleted = sessions_delete(workspace=workspace_a, actor=ada.actor)

        assert (deleted.sessions, deleted.turns) == (2, 3)
        assert list(Session.objects.values_list("pk", flat=True)) == [bob.pk]
        assert Turn.objects.count() == 1
