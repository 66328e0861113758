"""A real HTTP server speaking the chat-completions protocol, in a thread of the test, for the
``openai`` summarizer (no mock of our own code: the summarizer's HTTP client talks to it).

Each request is answered by the next behaviour of ``script`` (the last one repeats): a text
(a good answer), ``("sleep", seconds)`` then a good answer, ``("status", code)`` with a body
that must never reach a message, or ``("json", value)`` as the body. Every request is kept.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chat.compaction.service_config import ServiceConfig

ERROR_BODY = "upstream said: the turns were: CANARY-body-9Qx"
KEY_ENV = "CRP_TEST_COMPLETIONS_KEY"
KEY = "sk-test-4Hq"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class CompletionsServer:
    script: list[Any]
    received: list[Received] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def service(self, name: str = "llm", **options: Any) -> ServiceConfig:
        return ServiceConfig(
            name=name, kind="openai", base_url=self.base_url, model="summary-model",
            api_key_env=KEY_ENV, **{"timeout_seconds": 5.0, **options},
        )  # fmt: skip

    def entry(self, **options: Any) -> dict[str, Any]:
        """The service as a ``COMPACTION_SERVICES`` entry (for worker processes)."""
        return {
            "kind": "openai", "base_url": self.base_url, "model": "summary-model",
            "api_key_env": KEY_ENV, "timeout_seconds": 5.0, **options,
        }  # fmt: skip

    def next_behaviour(self) -> Any:
        index = min(len(self.received) - 1, len(self.script) - 1)
        return self.script[index]


def _handler(server: CompletionsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            server.received.append(Received(self.path, dict(self.headers), body))
            behaviour = server.next_behaviour()
            if isinstance(behaviour, tuple) and behaviour[0] == "sleep":
                time.sleep(behaviour[1])
                behaviour = behaviour[2] if len(behaviour) > 2 else "A summary after a wait."
            if isinstance(behaviour, tuple) and behaviour[0] == "status":
                self._send(behaviour[1], ERROR_BODY.encode(), "text/plain")
            elif isinstance(behaviour, tuple) and behaviour[0] == "json":
                self._send(200, json.dumps(behaviour[1]).encode(), "application/json")
            else:
                answer = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": str(behaviour)},
                            "finish_reason": "stop",
                        }
                    ],
                }
                self._send(200, json.dumps(answer).encode(), "application/json")

        def _send(self, status: int, payload: bytes, kind: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout)

    return Handler


@contextmanager
def completions_server(*script: Any) -> Iterator[CompletionsServer]:
    state = CompletionsServer(list(script) or ["A summary."])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, name="completions", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
