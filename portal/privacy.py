"""What the portal must not keep or let others keep: query strings in logs, authenticated
pages in caches.

- ``QueryStringFilter`` drops the query string from request lines in the logs (the
  development server's access log and ``django.request``'s warnings): a ``?q=`` holds text
  searched in memory content, a ``?actor=`` names a person.
- ``NoStoreMiddleware`` marks every response to a caller with credentials (a session cookie
  or a token) ``Cache-Control: no-store``, so no browser or proxy cache keeps memory content.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import patch_cache_control

_QUERY = re.compile(r"(\S)\?[^\s\"']*")


def strip_query(text: str) -> str:
    """``GET /w/a/memories/?q=secret HTTP/1.1`` → ``GET /w/a/memories/?… HTTP/1.1``."""
    return _QUERY.sub(r"\1?…", text)


class QueryStringFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, dict):  # "%(name)s" formatting (Celery's task lines)
            record.args = {
                k: strip_query(v) if isinstance(v, str) else v for k, v in record.args.items()
            }
        elif record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(strip_query(a) if isinstance(a, str) else a for a in args)
        if isinstance(record.msg, str):
            record.msg = strip_query(record.msg)
        return True


class NoStoreMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        # Credentials sent, not the user looked up: that lookup reads the database, which may
        # be the very thing that failed.
        if settings.SESSION_COOKIE_NAME in request.COOKIES or request.headers.get("Authorization"):
            patch_cache_control(response, no_store=True, private=True)
        return response
