"""The recall endpoint's lean path (recall/api/lean.py): the usual call answered without
Django's request handling around it, with the answer Django would give; every other call
handed on to Django, untouched, and answered there as always.

These tests drive the WSGI application the servers run (``portal.wsgi.application`` is a
``LeanRecall``), with Django's own handler behind it, counted: a call Django answered went
through it. The connection keeps the scope a request left, as in a production worker
(``scope_kept``), so that tokens are remembered between calls.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections, connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent, EventType
from portal import throttling
from portal.models import ApiToken, Workspace
from portal.throttling import COUNTED
from recall import assembly
from recall.api import lean
from recall.api.lean import LeanRecall
from team.services import api_token_revoke
from tests.helpers import error_of, recall_body
from tests.recall import factories

RECALL = "/v1/memory/actors/user:ada/recall"


@dataclass
class Answer:
    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    def __getitem__(self, name: str) -> str:
        return self.headers[name]


class Counted:
    """Django's handler, counting the calls it answers."""

    def __init__(self) -> None:
        self.handler = WSGIHandler()
        self.calls = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.calls += 1
        return self.handler(environ, start_response)


class Watched(LeanRecall):
    """The lean path, counting the calls it took (a remembered token, a body plainly valid:
    counted by its throttle), whether it then answered them or handed them on, refused."""

    taken = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        answer = super().__call__(environ, start_response)
        self.taken += COUNTED in environ
        return answer


@dataclass
class Server:
    """A ``LeanRecall`` over a counted Django handler, called as a WSGI server calls it."""

    django: Counted = field(default_factory=Counted)

    def __post_init__(self) -> None:
        self.app = Watched(self.django)

    def post_django(self, token: str | None, body: Any, **headers: str) -> Answer:
        """The same call, answered by Django's handler alone (not counted)."""
        app, self.app = self.app, self.django.handler  # type: ignore[assignment]
        try:
            return self.post(token, body, **headers)
        finally:
            self.app = app

    def post(
        self,
        token: str | None,
        body: Any,
        *,
        path: str = RECALL,
        query: str = "",
        **headers: str,
    ) -> Answer:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        environ = {
            "REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": query,
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(raw)),
            "SERVER_NAME": "testserver", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1", "wsgi.input": io.BytesIO(raw), "wsgi.url_scheme": "http",
            "wsgi.errors": io.StringIO(), "wsgi.version": (1, 0), "wsgi.multithread": False,
            "wsgi.multiprocess": True, "wsgi.run_once": False,
            **({"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}),
            **headers,
        }  # fmt: skip
        started: list[tuple[str, list[tuple[str, str]]]] = []
        # As Django's test client does: the test's transaction must outlive the request.
        signals.request_started.disconnect(close_old_connections)
        signals.request_finished.disconnect(close_old_connections)
        try:
            chunks = self.app(environ, lambda status, hs, *exc: started.append((status, hs)))
            try:
                content = b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        finally:
            signals.request_started.connect(close_old_connections)
            signals.request_finished.connect(close_old_connections)
        status, header_list = started[0]
        return Answer(int(status.split()[0]), dict(header_list), content)


@pytest.fixture
def server(scope_kept: None, hits_fold_unasked: None) -> Server:
    return Server()


@pytest.fixture
def taught(server: Server, editor: Any, workload_a: Any) -> Server:
    """The server after the editor's first recall, which Django answered: the token is
    remembered, the headers of such a call learned."""
    factories.memories(editor.workspace, {"content": "release summary"}, {"content": "notes"})
    first = server.post(editor.token, recall_body(workload_a))
    assert first.status_code == 200, first.content
    assert server.django.calls == 1
    return server


def _assembled() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM audit_auditevent WHERE type = %s", [EventType.ASSEMBLED]
        )
        return int(cursor.fetchone()[0])


class LeanPathTests:
    def test_the_servers_run_it(self):
        from portal import serve, wsgi

        assert isinstance(wsgi.application, LeanRecall)
        assert serve._django() is wsgi.application

    def test_a_usual_recall_is_answered_by_its_read_and_its_write_alone(
        self, taught, editor, workload_a
    ):
        before = _assembled()
        with CaptureQueriesContext(connection) as queries:
            answer = taught.post(editor.token, recall_body(workload_a))

        assert answer.status_code == 200, answer.content
        assert taught.django.calls == 1  # not Django's
        statements = [q["sql"] for q in queries.captured_queries]
        assert len(statements) == 2, statements
        assert "FROM recall_actor a" in statements[0] and "audit_auditevent" in statements[1]
        assert answer.json()["entries"]
        assert _assembled() == before + 1
        event = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("pk")
        assert event.payload["envelopeId"] == answer.json()["envelopeId"]
        assert event.author == ApiToken.objects.get(name="eddie-token").label

    @pytest.mark.parametrize(
        "headers",
        [
            {},
            {"HTTP_ACCEPT": "*/*"},
            {"HTTP_ACCEPT": "application/json"},
            {"CONTENT_TYPE": "application/json; charset=UTF-8"},
        ],
    )
    def test_its_answer_is_the_one_django_gives(self, taught, editor, workload_a, headers):
        lean = taught.post(editor.token, recall_body(workload_a), **headers)
        django = taught.post_django(editor.token, recall_body(workload_a), **headers)

        assert taught.django.calls == 1 and taught.app.taken == 1  # the first was Django's
        assert lean.status_code == django.status_code == 200
        lean_headers = {k: v for k, v in lean.headers.items() if k != "Content-Length"}
        assert lean_headers == {k: v for k, v in django.headers.items() if k != "Content-Length"}
        assert lean.headers["Content-Length"] == str(len(lean.content))
        fast, slow = lean.json(), django.json()
        assert set(fast) == set(slow)
        assert [(e["id"], e["similarity"]) for e in fast["entries"]] == [
            (e["id"], e["similarity"]) for e in slow["entries"]
        ]
        for key in ("effectivePolicyHash", "effectiveBudgetHash", "prefixFingerprint"):
            assert fast[key] == slow[key], key

    def test_an_unknown_actor_gets_the_answer_django_gives(self, taught, editor, workload_a):
        before = _assembled()
        path = "/v1/memory/actors/user:nobody/recall"

        lean = taught.post(editor.token, recall_body(workload_a), path=path)
        django = taught.post_django(editor.token, recall_body(workload_a), path=path)

        assert taught.django.calls == 1 and taught.app.taken == 1  # the lean path answered
        assert lean.status_code == django.status_code == 200, lean.content
        fast, slow = lean.json(), django.json()
        for answer in (fast, slow):
            answer.pop("envelopeId"), answer.pop("generatedAt")
        assert fast == {**slow, "reused": False}  # Django's came second
        assert fast["entries"] == [] and fast["diagnostics"]["warnings"] == ["actor_unknown"]
        assert _assembled() == before + 2
        events = AuditEvent.objects.filter(type=EventType.ASSEMBLED).order_by("-pk")[:2]
        assert [e.actor_id for e in events] == ["user:nobody"] * 2
        assert all(e.payload["actorUnknown"] is True for e in events)

    @pytest.mark.parametrize("actor", ["user:\u0430da", "nobody"])
    def test_a_malformed_or_lookalike_actor_is_refused_as_django_refuses_it(
        self, taught, editor, workload_a, actor
    ):
        # as a WSGI server gives a path: its UTF-8 bytes, one character each
        path = f"/v1/memory/actors/{actor}/recall".encode().decode("latin-1")
        before = _assembled()

        lean = taught.post(editor.token, recall_body(workload_a), path=path)
        django = taught.post_django(editor.token, recall_body(workload_a), path=path)

        assert error_of(lean, 400, "INVALID_REQUEST") == error_of(django, 400, "INVALID_REQUEST")
        assert _assembled() == before

    def test_each_kind_of_call_gets_the_headers_django_gives_it(
        self, scope_kept, hits_fold_unasked, editor, workload_a, settings
    ):
        settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
        settings.SECURE_HSTS_SECONDS = 3600
        server = Server()  # its middleware reads these settings as it starts
        factories.memories(editor.workspace, {"content": "release summary"})
        https = {"HTTP_X_FORWARDED_PROTO": "https"}

        answers = [server.post(editor.token, recall_body(workload_a), **https) for _ in range(2)]
        answers += [server.post(editor.token, recall_body(workload_a)) for _ in range(2)]

        assert [a.status_code for a in answers] == [200] * 4
        assert server.django.calls == 2  # the first of each kind
        secure = [a.headers.get("Strict-Transport-Security") for a in answers]
        assert secure == ["max-age=3600", "max-age=3600", None, None]

    @pytest.mark.parametrize(
        ("changes", "status", "cycles"),
        [
            ({}, 200, 1),  # answered by the lean path
            ({"topK": 0}, 400, 1),  # Django's alone
            ({"workloadId": "00000000-0000-4000-8000-000000000000"}, 404, 2),  # refused
        ],
    )
    def test_each_request_is_started_and_finished_as_django_does(
        self, taught, editor, workload_a, changes, status, cycles
    ):
        seen: list[str] = []

        def started(**kwargs: Any) -> None:
            seen.append("started")

        def finished(**kwargs: Any) -> None:
            seen.append("finished")

        signals.request_started.connect(started)
        signals.request_finished.connect(finished)
        try:
            answer = taught.post(editor.token, recall_body(workload_a, **changes))
        finally:
            signals.request_started.disconnect(started)
            signals.request_finished.disconnect(finished)

        assert answer.status_code == status, answer.content
        assert seen == ["started", "finished"] * cycles

    def test_the_kinds_learned_are_learned_afresh_once_there_are_too_many(
        self, taught, editor, workload_a, settings, monkeypatch
    ):
        monkeypatch.setattr(lean, "_KINDS_KEPT", 2)
        settings.ALLOWED_HOSTS = ["*"]
        hosts = ["a.example", "b.example", "c.example"]

        answers = [taught.post(editor.token, recall_body(workload_a), HTTP_HOST=h) for h in hosts]

        assert [a.status_code for a in answers] == [200, 200, 200]
        assert taught.django.calls == 4
        # full (the taught kind and a's) when b's came: learned afresh from b's
        assert {kind[1] for kind in taught.app.headers} == {"b.example", "c.example"}


class HandedOnTests:
    """Whatever is not the usual call is Django's, and answered as Django answers it."""

    @pytest.mark.parametrize(
        ("body", "extra", "status"),
        [
            (b'{"workloadId": ', {}, 400),  # not JSON
            ({"topK": "many"}, {}, 400),  # not valid
            (None, {"HTTP_ACCEPT": "application/xml"}, 406),
            (None, {"HTTP_ACCEPT": ""}, 406),
            (None, {"CONTENT_TYPE": "text/plain"}, 415),
            (None, {"path": "/v1/memory/actors/user:ada/recal"}, 404),
            (None, {"path": "/v1/memory/actors/user:a\x00da/recall"}, 400),
        ],
    )
    def test_a_call_not_plainly_the_usual_one(
        self, taught, editor, workload_a, body, extra, status
    ):
        before = _assembled()

        answer = taught.post(
            editor.token, recall_body(workload_a) if body is None else body, **extra
        )

        error_of(answer, status)
        assert taught.django.calls == 2
        assert _assembled() == before

    def test_a_workspace_parameter(self, taught, editor, workload_a):
        answer = taught.post(
            editor.token, recall_body(workload_a), query=f"workspace={editor.workspace.slug}"
        )

        assert answer.status_code == 200, answer.content
        assert taught.django.calls == 2

    def test_a_token_not_remembered(self, taught, viewer, workload_a):
        error_of(taught.post(viewer.token, recall_body(workload_a)), 403)
        error_of(taught.post("mp_not-a-token", recall_body(workload_a)), 401)
        error_of(taught.post(None, recall_body(workload_a)), 401)
        assert taught.django.calls == 4

    def test_a_role_short_of_recall_is_refused_by_django_with_nothing_recorded(
        self, taught, viewer, workload_a
    ):
        error_of(taught.post(viewer.token, recall_body(workload_a)), 403)  # now remembered
        before = _assembled()

        error_of(taught.post(viewer.token, recall_body(workload_a)), 403, "PERMISSION_DENIED")

        assert taught.django.calls == 3 and taught.app.taken == 1
        assert _assembled() == before

    def test_a_workload_of_another_workspace_is_not_found_and_not_run_twice(
        self, workload_b, taught, editor
    ):
        before = _assembled()
        with CaptureQueriesContext(connection) as queries:
            answer = taught.post(editor.token, recall_body(workload_b))

        error_of(answer, 404)
        assert taught.django.calls == 2 and taught.app.taken == 1
        assert _assembled() == before
        # the lean path's (the token looked up, the policy context, refused); Django's answers
        # the refusal with the token confirmed already, running nothing again
        statements = [q["sql"] for q in queries.captured_queries]
        assert len(statements) == 2, statements
        assert sum("FROM policies_environment" in sql for sql in statements) == 1, statements

    def test_a_token_revoked_since_is_refused_with_nothing_recorded(
        self, taught, editor, workload_a
    ):
        before = _assembled()
        api_token_revoke(token=ApiToken.objects.get(name="eddie-token"))

        answer = taught.post(editor.token, recall_body(workload_a))

        error_of(answer, 401, "AUTHENTICATION_FAILED")
        assert answer["WWW-Authenticate"] == "Bearer"
        assert taught.django.calls == 2 and taught.app.taken == 1
        assert _assembled() == before

    def test_a_token_changed_since_is_recalled_once_as_it_is_now(
        self, scope_kept, hits_fold_unasked, editor, workload_a
    ):
        Workspace.objects.filter(pk=editor.workspace.pk).update(store_queries=True)
        server = Server()
        factories.memories(editor.workspace, {"content": "release summary"})
        assert server.post(editor.token, recall_body(workload_a)).status_code == 200
        Workspace.objects.filter(pk=editor.workspace.pk).update(store_queries=False)
        before = _assembled()

        answer = server.post(editor.token, recall_body(workload_a))

        assert answer.status_code == 200, answer.content
        assert server.django.calls == 2 and server.app.taken == 1
        assert _assembled() == before + 1
        latest = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("pk")
        assert "query" not in latest.payload


class AfterTheWriteTests:
    def test_a_failure_after_the_write_is_answered_and_not_run_again(
        self, taught, editor, workload_a, monkeypatch
    ):
        # After the write, a failure (a thread that cannot start to send a task, say) while
        # the token changed since the read: answered as a 500, recorded once.
        def fails(*, workspace_id: int) -> None:
            Workspace.objects.filter(pk=workspace_id).update(store_queries=True)
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(assembly, "hits_fold_due", fails)
        before = _assembled()

        answer = taught.post(editor.token, recall_body(workload_a))

        error_of(answer, 500, "SERVER_ERROR")
        assert taught.django.calls == 2 and taught.app.taken == 1
        assert _assembled() == before + 1


class ThrottleTests:
    def _counted(self, token: ApiToken, scope: str) -> int:
        window, _ = throttling._window(60)
        return throttling._count(throttling._key(scope, f"token:{token.pk}", window), 60, add=False)

    def test_each_call_is_counted_once_wherever_it_is_answered(
        self, taught, editor, workload_a, settings
    ):
        token = ApiToken.objects.get(name="eddie-token")
        settings.RECALL_RATE_PER_MINUTE = 3  # the first recall (taught) counted one

        answers = [taught.post(editor.token, recall_body(workload_a)) for _ in range(3)]

        assert [a.status_code for a in answers] == [200, 200, 429]
        assert int(answers[2]["Retry-After"]) > 0
        error_of(answers[2], 429, "THROTTLED")
        assert taught.django.calls == 2 and taught.app.taken == 3  # the refusal is Django's
        assert self._counted(token, "recall") == 4
        assert self._counted(token, "api") == 4

    def test_a_call_handed_on_is_counted_once(self, taught, editor, workload_a):
        token = ApiToken.objects.get(name="eddie-token")

        error_of(taught.post(editor.token, recall_body(workload_a, topK=0)), 400)
        other = recall_body(workload_a, workloadId="00000000-0000-4000-8000-000000000000")
        error_of(taught.post(editor.token, other), 404)

        assert taught.django.calls == 3 and taught.app.taken == 1  # the second
        assert self._counted(token, "recall") == 3

    def test_a_throttle_that_cannot_count_is_djangos_to_answer(self, taught, editor, workload_a):
        gone = "redis://127.0.0.1:9/0"  # nothing listens there
        cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": gone}
        before = _assembled()

        with override_settings(CACHE_URL=gone, CACHES={"default": cache}):
            lean = taught.post(editor.token, recall_body(workload_a))
            django = taught.post(editor.token, recall_body(workload_a), HTTP_COOKIE="theme=dark")

        assert lean.status_code == django.status_code >= 500
        assert error_of(lean, lean.status_code) == error_of(django, django.status_code)
        assert taught.django.calls == 3 and taught.app.taken == 0
        assert _assembled() == before
