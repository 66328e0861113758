"""A turn's statements (``chat.statements``): how many it runs, and what its fewer statements
must still read and write as the ORM did."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext

from chat.models import Session, Turn, TurnContext
from chat.services import session_locked, session_turns_post
from chat.statements import session_locked_for_turns
from policies.models import Workload
from portal.db.scope import ALL, SETTING, scope_set
from portal.models import ApiToken, Workspace
from recall.models import Actor
from team.services import api_token_revoke
from tests.chat.helpers import in_flight, layout, post_turns, started, turn
from tests.helpers import error_of
from tests.recall import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(editor, workload_a) -> dict[str, Any]:
    factories.memories(editor.workspace, {"content": "Ada prefers short release notes"})
    return started(editor, workload_a, systemPrompt="Be brief.")


def _posted(client: Any, session_id: str, *messages: tuple[str, str]) -> tuple[Any, list[str]]:
    body = {"messages": [{"role": role, "content": content} for role, content in messages]}
    with CaptureQueriesContext(connection) as captured:
        response = client.post(f"/v1/sessions/{session_id}/turns", body, format="json")
    assert response.status_code == 201, response.content
    return response.json(), [query["sql"] for query in captured.captured_queries]


class TurnStatementsTests:
    def test_a_turn_runs_six_statements(self, editor, session):
        client = editor.api()
        _posted(client, session["id"], ("user", "release notes?"))  # primed; policy computed

        _, statements = _posted(
            client, session["id"], ("assistant", "ok"), ("user", "and the changelog?")
        )

        # The token's lookup (the tests' connection sees every workspace after a request, so
        # the token is never taken as remembered here: RememberedTokenTurnTests); then, in
        # one transaction, the session read and locked with its
        # workload's layout configuration and its first assembled turn (the access check's
        # read too), the current and prior-session histories, the recall's read and its
        # context.assembled event, and the turns, the context and the session written
        # together. A request wraps the five in BEGIN and COMMIT; under the test's
        # transaction they are a savepoint and its release, counted here.
        savepoints = [sql for sql in statements if "SAVEPOINT" in sql]
        assert len(savepoints) == 2, statements
        assert len(statements) - len(savepoints) == 6, statements

    def test_a_layout_saved_between_two_turns_applies_to_the_next(
        self, editor, session, workload_a
    ):
        turn(editor, session["id"], ("user", "first question"))
        second = turn(editor, session["id"], ("assistant", "first answer"), ("user", "second"))
        assert second["layout"]["parts"]["history"]["kept"] == 2

        layout(workload_a, {"max_history_turns": 1})
        third = turn(editor, session["id"], ("assistant", "second answer"), ("user", "third"))

        assert third["layout"]["configVersion"] == 1
        assert third["layout"]["parts"]["history"] == {
            "given": 4,
            "kept": 1,
            "tokens": third["layout"]["parts"]["history"]["tokens"],
        }
        assert [m["content"] for m in third["prompt"]["messages"][1:]] == [
            "second answer",
            "third",
        ]

    def test_the_turns_appended_before_the_query_end_its_history(self, editor, session, workload_a):
        layout(workload_a, {"max_history_turns": 2})
        turn(editor, session["id"], ("user", "q1"))
        turn(editor, session["id"], ("assistant", "a1"), ("user", "q2"))

        answer = turn(editor, session["id"], ("assistant", "a2"), ("tool", "t2"), ("user", "q3"))

        assert [m["content"] for m in answer["prompt"]["messages"][1:]] == ["a2", "t2", "q3"]
        assert [p["turn"] for p in answer["parts"] if p["kind"] == "history"] == [4, 5]
        history = answer["layout"]["parts"]["history"]
        assert (history["given"], history["kept"]) == (5, 2)
        assert answer["layout"]["filtered"]["history_over_max_turns"] == 3

    def test_the_turns_the_context_and_the_session_are_written_as_answered(self, editor, session):
        answer = turn(editor, session["id"], ("assistant", "hello"), ("user", "notes?"))

        rows = list(Turn.objects.filter(session_id=session["id"]).order_by("index"))
        assert [(t.index, t.role, t.content) for t in rows] == [
            (1, "assistant", "hello"),
            (2, "user", "notes?"),
        ]
        assert all(t.tokens > 0 and t.created_at is not None for t in rows)
        context = TurnContext.objects.get(session_id=session["id"])
        assert context.turn == 2 and context.primed
        assert context.prompt == answer["prompt"]["messages"]
        assert context.parts == answer["parts"]
        assert context.layout == answer["layout"] and context.recall == answer["recall"]
        assert context.compaction == answer["compaction"]
        assert context.event_id == answer["recall"]["eventId"]
        stored = Session.objects.get(pk=session["id"])
        assert stored.turn_count == 2 and stored.last_budget == answer["budgetStatus"]
        assert stored.monitor_turns == 1 and stored.monitor_recent == [answer["budgetStatus"]]

    def test_an_assistant_message_alone_is_appended_without_a_context(self, editor, session):
        turn(editor, session["id"], ("user", "notes?"))

        answer = turn(editor, session["id"], ("assistant", "short ones"))

        assert answer["appended"] == [2] and answer["turn"] is None
        assert Session.objects.get(pk=session["id"]).turn_count == 2
        assert TurnContext.objects.filter(session_id=session["id"]).count() == 1


class TurnSessionLockedAndCheckedTests:
    """A token caller's turn reads its session once, locked, and checks it there."""

    def test_another_workspaces_session_takes_no_turn(self, outsider, session):
        error_of(post_turns(outsider, session["id"], ("user", "hi")), 404, "NOT_FOUND")

        assert not Turn.objects.filter(session_id=session["id"]).exists()

    @pytest.mark.parametrize("session_id", ["abc", "99999999"])
    def test_an_unknown_session_is_not_found(self, editor, session, session_id):
        error_of(post_turns(editor, session_id, ("user", "hi")), 404, "NOT_FOUND")

    def test_a_viewer_is_refused_before_its_messages_are_read(self, viewer, session):
        error_of(post_turns(viewer, session["id"], {"role": "robot"}), 403, "PERMISSION_DENIED")

        assert not Turn.objects.filter(session_id=session["id"]).exists()

    def test_a_turn_waits_for_the_run_in_flight_with_the_lock_let_go(
        self, editor, session, settings
    ):
        settings.COMPACTION_WAIT_MS = 50
        turn(editor, session["id"], ("user", "first"))
        stored = Session.objects.get(pk=session["id"])
        running = in_flight(stored)

        answer = turn(editor, session["id"], ("user", "second"))

        waited = answer["compaction"]["waitedFor"]
        assert (waited["runId"], waited["finished"]) == (str(running.pk), False)
        assert waited["waitedMs"] >= 50
        assert answer["appended"] == [2]
        assert Session.objects.get(pk=stored.pk).turn_count == 2


@pytest.mark.django_db(transaction=True)
class ConcurrentTurnsTests:
    def test_a_turn_that_waited_for_the_first_is_not_primed_again(self, editor, workload_a):
        """The second turn's lock waits for the first turn's transaction; it then reads the
        session as the first left it (its lock statement's other reads would not see what
        the first wrote), so only the first is primed."""
        created = started(editor, workload_a)
        session = Session.objects.get(pk=created["id"])
        second: list[Any] = []

        def post_second() -> None:
            try:
                second.append(
                    session_turns_post(
                        session=session,
                        messages=[{"role": "user", "content": "second"}],
                        author="system:test",
                    )  # fmt: skip
                )
            finally:
                connection.close()

        waiting = threading.Thread(target=post_second)
        with transaction.atomic():  # the first turn, committed after the second asked
            first = session_turns_post(
                session=session, messages=[{"role": "user", "content": "first"}], author="t"
            )
            waiting.start()
            time.sleep(0.5)  # the second turn waits for the session's lock
        waiting.join(30)

        assert first.context is not None and first.context.primed
        assert second and second[0].context is not None
        assert second[0].turns[0].index == 2 and not second[0].context.primed


TOKEN_LOOKUP = f"set_config('{SETTING}', w.id::text, false)"


def _unseen_scope(value: str) -> None:
    """Scope the connection behind the process's back, as a rolled-back ``set_config`` would."""
    connection.connection.execute("SELECT set_config(%s, %s, false)", [SETTING, value])


class RememberedTokenTurnTests:
    """A turn takes a token this process looked up before as remembered: the statement that
    locks the session checks it (``portal.tokens.TokenCheck``), as the recall's read does."""

    @pytest.fixture
    def remembered(self, scope_kept: None, editor: Any, session: dict[str, Any]) -> Any:
        """The editor's client after a first turn: its token remembered, the connection
        scoped to its workspace."""
        client = editor.api()
        _posted(client, session["id"], ("user", "release notes?"))
        return client

    def test_a_turn_then_runs_five_statements(self, remembered, session):
        answer, statements = _posted(remembered, session["id"], ("user", "and the changelog?"))

        assert not any(TOKEN_LOOKUP in sql for sql in statements), statements
        assert len([sql for sql in statements if "SAVEPOINT" not in sql]) == 5, statements
        assert answer["turn"] == 2

    def test_a_token_revoked_since_is_refused_and_nothing_is_appended(
        self, remembered, editor, session
    ):
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        response = post_turns(editor, session["id"], ("user", "and the changelog?"))

        error_of(response, 401, "AUTHENTICATION_FAILED")
        scope_set(ALL)
        assert Turn.objects.filter(session_id=session["id"]).count() == 1

    def test_a_revoked_token_is_refused_before_an_id_not_valid_is_answered(
        self, remembered, editor
    ):
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        error_of(post_turns(editor, "abc", ("user", "hi")), 401, "AUTHENTICATION_FAILED")

    def test_a_connection_scoped_otherwise_is_looked_up_and_the_turn_goes_on(
        self, remembered, session
    ):
        _unseen_scope(ALL)  # sees every workspace: not what the token may see

        answer, statements = _posted(remembered, session["id"], ("user", "and the changelog?"))

        assert answer["turn"] == 2
        assert TOKEN_LOOKUP in statements[2], statements  # after the savepoint and the lock

    def test_a_role_lowered_since_appends_nothing(self, remembered, editor, session):
        ApiToken.objects.filter(name="eddie-token").update(role="viewer")

        response = post_turns(editor, session["id"], ("user", "and the changelog?"))

        error_of(response, 403, "PERMISSION_DENIED")
        scope_set(ALL)
        assert Turn.objects.filter(session_id=session["id"]).count() == 1


@pytest.mark.django_db(transaction=True)
class SessionLockTests:
    """A turn locks its session's row only: a write elsewhere in the workspace (an audit
    event, a memory: anything whose foreign key takes a key-share lock on the workspace,
    actor or workload row) goes on while a turn runs."""

    @staticmethod
    def key_share_refused(tables: dict[str, int]) -> list[str]:
        """From another connection, the rows of ``tables`` (table: id) that cannot be
        key-share locked at once."""
        refused: list[str] = []
        failed: list[BaseException] = []

        def other() -> None:
            try:
                scope_set(ALL)
                for table, pk in tables.items():
                    try:
                        with transaction.atomic(), connection.cursor() as cursor:
                            cursor.execute(
                                f"SELECT 1 FROM {table} WHERE id = %s FOR KEY SHARE NOWAIT", [pk]
                            )
                    except OperationalError:
                        refused.append(table)
            except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
                failed.append(exc)
            finally:
                connection.close()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(30)
        if failed:
            raise failed[0]
        return refused

    @pytest.mark.parametrize("path", ["statement", "orm"])
    def test_the_workspace_actor_and_workload_rows_stay_free(self, editor, workload_a, path):
        created = started(editor, workload_a)
        stored = Session.objects.select_related("actor").get(pk=created["id"])
        tables = {
            Workspace._meta.db_table: stored.workspace_id,
            Actor._meta.db_table: stored.actor_id,
            Workload._meta.db_table: stored.workload_id,
            Session._meta.db_table: stored.pk,
        }
        with transaction.atomic():
            if path == "statement":
                assert session_locked_for_turns(pk=stored.pk, workspace_id=stored.workspace_id)
            else:
                session_locked(stored)
            refused = self.key_share_refused(tables)

        # The session's row takes key-share locks too (turns, contexts and runs refer to it):
        # only an update or a delete of it waits.
        assert refused == []

    def test_a_second_lock_of_the_session_waits(self, editor, workload_a):
        created = started(editor, workload_a)
        stored = Session.objects.get(pk=created["id"])
        waited: list[bool] = []

        def other() -> None:
            try:
                scope_set(ALL)
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '200ms'")
                    try:
                        session_locked(stored)
                    except OperationalError:
                        waited.append(True)
            finally:
                connection.close()

        with transaction.atomic():
            session_locked(stored)
            thread = threading.Thread(target=other)
            thread.start()
            thread.join(30)

        assert waited == [True]
