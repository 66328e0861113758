"""A WSGI application for tests/portal/test_serve.py: ``/slow`` answers after SLOW_SECONDS
(a long request, as an audit export is), anything else at once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

SLOW_SECONDS = 4.0


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") == "/slow":
        time.sleep(SLOW_SECONDS)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
