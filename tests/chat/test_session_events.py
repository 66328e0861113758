"""A session's start and end are audit events (``session.started``, ``session.ended``),
recorded with the write they record and holding no content, nor the caller's external id (the
event's page reads it from the session); an erasure of the actor leaves them whole (they
name the actor and the session, never what was said) and the chain verifying."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent, EventType
from audit.services import audit_chain_verify
from chat.models import Session
from tests.chat.helpers import start, started, turn
from tests.module_personas import module_scoped

# The personas and workload the tests here act as and on, made once per module.
workspace_a, operator, editor, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "editor", "workload_a"
)

pytestmark = pytest.mark.django_db

CANARY = "CANARY-said-7Qw"


def session_events(workspace: Any) -> list[AuditEvent]:
    types = (EventType.SESSION_STARTED, EventType.SESSION_ENDED)
    return list(AuditEvent.objects.filter(workspace=workspace, type__in=types).order_by("id"))


class SessionEventTests:
    def test_starting_a_session_records_who_with_what_and_where(self, editor, workload_a):
        session = started(editor, workload_a, externalId="conv-42", systemPrompt=CANARY)

        (event,) = session_events(editor.workspace)
        assert event.type == "session.started" and event.author == "token:eddie-token"
        assert (event.actor_id, event.workload_id, event.environment) == (
            "user:ada", workload_a.id, "prod"
        )  # fmt: skip
        # The caller's id may be personal data, and an event outlives an erasure: not in it.
        assert event.payload == {"sessionId": session["id"]}

    def test_ending_it_records_the_turns_once(self, editor, workload_a):
        session = started(editor, workload_a)
        turn(editor, session["id"], ("user", f"hello {CANARY}"))

        for _ in range(2):
            ended = editor.api().post(f"/v1/sessions/{session['id']}/end", format="json")
            assert ended.status_code == 200

        started_, ended_ = session_events(editor.workspace)
        assert ended_.type == "session.ended"
        assert ended_.payload == {"sessionId": session["id"], "turns": 1}
        assert CANARY not in str(started_.payload) + str(ended_.payload)

    def test_a_refused_start_records_nothing(self, editor, workload_a):
        started(editor, workload_a, externalId="conv-42")

        again = start(editor, workload_a, externalId="conv-42")

        assert again.status_code == 409
        assert len(session_events(editor.workspace)) == 1
        assert Session.objects.filter(workspace=editor.workspace).count() == 1

    def test_the_event_page_says_it_in_words(self, operator, workload_a):
        session = started(operator, workload_a, externalId="conv-42")
        operator.api().post(f"/v1/sessions/{session['id']}/end", format="json")
        client = operator.session()

        pages = [
            client.get(f"/w/{operator.workspace.slug}/audit/{event.pk}/").content.decode()
            for event in session_events(operator.workspace)
        ]
        listing = client.get(f"/w/{operator.workspace.slug}/audit/").content.decode()

        assert "Session started" in pages[0] and "Session ended" in pages[1]
        for page in pages:
            assert f"/w/{operator.workspace.slug}/sessions/{session['id']}/" in page
            assert "conv-42" in page and "user:ada" in page and workload_a.name in page
        # The list reads the external id from the session too, while it is kept.
        assert f"session #{session['id']} (conv-42) of user:ada in prod after 0 turns" in listing

    def test_the_list_reads_the_external_ids_of_a_page_at_once(self, operator, workload_a):
        client, url = operator.session(), f"/w/{operator.workspace.slug}/audit/"
        started(operator, workload_a, externalId="conv-1")
        client.get(url)
        with CaptureQueriesContext(connection) as one:
            client.get(url)
        for n in (2, 3, 4):
            started(operator, workload_a, externalId=f"conv-{n}")
        with CaptureQueriesContext(connection) as four:
            listing = client.get(url).content.decode()

        assert len(four) == len(one)
        assert all(f"(conv-{n}) of user:ada" in listing for n in (1, 2, 3, 4))

    def test_an_event_recorded_with_the_id_in_its_payload_still_shows_it(self, operator):
        from audit.services import audit_event_record

        event = audit_event_record(
            workspace=operator.workspace,
            type=EventType.SESSION_STARTED,
            author="token:old",
            payload={"sessionId": "999999", "externalId": "conv-old"},
            actor_id="user:ada",
        )
        page = operator.session().get(f"/w/{operator.workspace.slug}/audit/{event.pk}/")
        assert "<code>conv-old</code>" in page.content.decode()

    def test_an_erasure_leaves_them_whole_and_the_chain_verifying(self, operator, workload_a):
        session = started(operator, workload_a, externalId="chat-with-ada")
        turn(operator, session["id"], ("user", f"hello {CANARY}"))
        operator.api().post(f"/v1/sessions/{session['id']}/end", format="json")

        erased = operator.api().post("/v1/memory/actors/user:ada/erase", {}, format="json")

        assert erased.status_code == 200, erased.content
        assert [e.type for e in session_events(operator.workspace)] == [
            "session.started", "session.ended"
        ]  # fmt: skip
        assert audit_chain_verify(workspace=operator.workspace).ok
        assert not Session.objects.filter(pk=session["id"]).exists()
        client = operator.session()
        for event in session_events(operator.workspace):
            page = client.get(f"/w/{operator.workspace.slug}/audit/{event.pk}/").content.decode()
            assert "not kept: the session was deleted" in page and "chat-with-ada" not in page
        listing = client.get(f"/w/{operator.workspace.slug}/audit/").content.decode()
        assert f"session #{session['id']} of user:ada" in listing
        assert "chat-with-ada" not in listing
