"""The recall endpoint's lean path: the usual recall, answered without Django's request
handling, its middleware and DRF's dispatch around it.

Those layers cost a recall ~0.6 ms of its ~4 ms in the process (docs/performance.md, "The
lean path"), and the recall endpoint is what every agent calls on every turn. This WSGI
application, in front of Django's (``portal.wsgi``), takes a call only when it is plainly
the usual one, and hands everything else, untouched, to Django, where ``RecallView`` answers
it as it always did. Taken, a call is:

- ``POST`` to the route Django resolves to ``RecallView``, no query string (no ``workspace``
  parameter), no control character in the path, no cookie (so no session, CSRF or messages
  to mind), a JSON body of a size Django would read, ``Accept`` absent, ``*/*`` or JSON
  (an empty one is a 406 from DRF);
- a bearer token the process remembers (``portal.tokens.token_remembered``), the connection
  scoped to its workspace: the recall's read checks it, as it does for ``RecallView``;
- a body ``recall_request_plain`` finds plainly valid, parsed by orjson (a body orjson
  refuses, or that is not plainly valid, is DRF's to parse and to refuse with its messages);
- within the token's limits: counted here once (``portal.throttling.api_call_counted``); a
  call over them is handed on with the count's answer, so DRF refuses it without counting it
  again.

The recall itself is the view's (``recall_envelope``): the same role check, the same read,
the same write committed before the answer. A call it refuses (a role short, a workload not
the workspace's, the token changed or revoked since it was remembered, the database gone) is
handed on too, with the exception (``LeanRefused``), which ``RecallView`` raises as its own
and so answers exactly as it answers a refusal of its own: confirming the token first if the
read had not checked it, never running the call again once it had (after the read, a
failure may follow the write).

The answer's headers are the ones Django's stack gave the same kind of call (the scheme,
the host, and the forwarding headers Django is told to read) the first time this process
saw it, learned from that answer: the middleware decides them (security headers, cache
control), not this module. A call of a kind not yet seen goes through Django, and teaches
the headers. A call taken is one request to ``request_started`` and ``request_finished``,
sent as Django sends them, so connections are checked and closed as for any request; one
the recall refused is two, the lean path's and Django's.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson
from django.conf import settings
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler, get_path_info, get_script_name
from django.urls import Resolver404, get_resolver, set_script_prefix
from rest_framework.exceptions import AuthenticationFailed

from portal.access import Caller
from portal.api.renderers import FastJSONRenderer
from portal.authentication import TokenUser, bearer_key_hash
from portal.input_guard import has_control
from portal.models import ApiToken
from portal.throttling import COUNTED, api_call_counted, token_ident
from portal.tokens import TokenCheck, token_remembered, token_used
from recall.api.serializers import recall_request_plain
from recall.api.views import (
    LEAN_REFUSED,
    LeanRefused,
    RecallView,
    recall_envelope,
    recall_target,
)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_JSON = frozenset({"application/json", "application/json; charset=utf-8"})
_ACCEPTS = frozenset({"*/*", "application/json"})  # or no Accept header at all
# What Django's stack reads of a call, besides its path, when it decides the headers of its
# answer (HSTS on a secure request) or refuses it (a host not allowed, a redirect to HTTPS):
# the kinds of call whose headers are learned, up to this many (then learned afresh).
_KIND = ("wsgi.url_scheme", "HTTP_HOST", "SERVER_NAME", "SERVER_PORT")
_KINDS_KEPT = 64


class LeanRecall:
    """The WSGI application: ``application`` (Django's) behind the recall's lean path."""

    def __init__(self, application: WSGIApp):
        self.application = application
        self.headers: dict[tuple[Any, ...], list[tuple[str, str]]] = {}
        proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
        self._kind = (
            *_KIND,
            *([proxy[0]] if proxy else []),
            *(["HTTP_X_FORWARDED_HOST"] if settings.USE_X_FORWARDED_HOST else []),
            *(["HTTP_X_FORWARDED_PORT"] if settings.USE_X_FORWARDED_PORT else []),
        )
        self._renderer = FastJSONRenderer()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or not environ.get("PATH_INFO", "").endswith(
            "/recall"
        ):
            return self.application(environ, start_response)
        taken = _taken(environ)
        if taken is None:
            return self.application(environ, start_response)
        kind = tuple(environ.get(name) for name in self._kind)
        headers = self.headers.get(kind)
        if headers is None:
            return self.application(environ, self._learning(kind, start_response))
        actor_id, key_hash, length = taken
        try:
            counted = _counted(environ, key_hash, length)
        except Exception:  # a body orjson refuses, a throttle cache down: Django's to answer
            environ.pop(COUNTED, None)  # (and count)
            counted = None
        if counted is None:
            return self.application(environ, start_response)
        set_script_prefix(get_script_name(environ))
        signals.request_started.send(sender=WSGIHandler, environ=environ)
        body = self._recalled(environ, actor_id, *counted)
        if body is None:
            # Refused: this request ends here, and Django's answers the refusal.
            signals.request_finished.send(sender=WSGIHandler)
            return self.application(environ, start_response)
        start_response("200 OK", [*headers, ("Content-Length", str(len(body)))])
        return _Answer(body)

    def _recalled(
        self,
        environ: dict[str, Any],
        actor_id: str,
        token: ApiToken,
        check: TokenCheck,
        data: dict[str, Any],
    ) -> bytes | None:
        """The envelope, rendered; None if the recall refused the call (``LEAN_REFUSED`` in
        ``environ``: Django's ``RecallView`` answers it, without running it again)."""
        caller = Caller(user=TokenUser(token, check), token=token)
        try:
            workspace, actor_id = recall_target(caller, None, actor_id)
            envelope = recall_envelope(caller, workspace, actor_id, data, check)
            return self._renderer.render(envelope)
        except Exception as refused:
            environ[LEAN_REFUSED] = LeanRefused(refused, token_checked=not check.pending)
            return None

    def _learning(self, kind: tuple[Any, ...], start_response: Callable[..., Any]) -> Any:
        """``start_response``, keeping the headers of a recall Django answered (200) as this
        kind of call's."""

        def learn(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            names = {name.lower() for name, _ in headers}
            if status.startswith("200 ") and "set-cookie" not in names:
                if len(self.headers) >= _KINDS_KEPT:
                    self.headers.clear()
                self.headers[kind] = [h for h in headers if h[0].lower() != "content-length"]
            return start_response(status, headers, *exc_info)

        return learn


def _taken(environ: dict[str, Any]) -> tuple[str, str, int] | None:
    """The actor id, the token's hash and the body's length of a call the lean path may take
    (above); None for any other."""
    if (
        environ.get("QUERY_STRING")
        or "HTTP_COOKIE" in environ
        or environ.get("CONTENT_TYPE", "").lower() not in _JSON
        or ("HTTP_ACCEPT" in environ and environ["HTTP_ACCEPT"].strip() not in _ACCEPTS)
    ):
        return None
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length <= 0 or (limit is not None and length > limit):
        return None
    try:
        key_hash = bearer_key_hash(environ.get("HTTP_AUTHORIZATION", ""))
    except AuthenticationFailed:  # malformed: Django's to refuse
        return None
    if key_hash is None:
        return None
    path = get_path_info(environ)
    if has_control(path):
        return None
    try:
        match = get_resolver().resolve(path)
    except Resolver404:
        return None
    if getattr(match.func, "view_class", None) is not RecallView:
        return None
    return str(match.kwargs["actor_id"]), key_hash, length


def _counted(
    environ: dict[str, Any], key_hash: str, length: int
) -> tuple[ApiToken, TokenCheck, dict[str, Any]] | None:
    """The remembered token, its check and the body, plainly valid, of a call counted within
    the token's limits; None for a call to hand on (its count's answer in ``environ`` once
    counted)."""
    remembered = token_remembered(key_hash)
    if remembered is None:
        return None
    token, check = remembered
    token_used(token.pk)
    data = recall_request_plain(orjson.loads(_body(environ, length)))
    if data is None:
        return None
    wait = environ[COUNTED] = api_call_counted(ident=token_ident(token), token=token, recall=True)
    return None if wait is not None else (token, check, data)


def _body(environ: dict[str, Any], length: int) -> bytes:
    """The request's body, read; left in ``environ`` to be read again if the call is handed
    on."""
    raw: bytes = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(raw)
    return raw


class _Answer:
    """The response's one chunk; closed, the request is finished, as Django's handler does."""

    def __init__(self, body: bytes):
        self.body = body

    def __iter__(self) -> Iterator[bytes]:
        yield self.body

    def close(self) -> None:
        signals.request_finished.send(sender=WSGIHandler)
