"""Control characters never reach SQL from a path or query string.

PostgreSQL text cannot hold NUL, and no parameter of ours means anything with a control
character in it; without this guard a ``?workspace=a%00b`` reached psycopg and came back
as a 500. A request whose path or query parameters (names or values) hold one is a 400
naming the parameter: JSON under ``/v1/``, the plain error page elsewhere.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from portal.api.errors import error_body, is_api_path

# A textarea's value (a GET form may carry one) has line breaks and tabs: those are text.
_TEXT_CONTROLS = frozenset("\t\n\r")


def has_control(text: str, *, allowed: frozenset[str] = frozenset()) -> bool:
    return any(unicodedata.category(c) == "Cc" and c not in allowed for c in text)


def bad_parameter(request: HttpRequest) -> str | None:
    """The first parameter (``path`` for the path) holding a control character, if any:
    anything in the path or a name; in a value, anything but a tab or a line break."""
    if has_control(request.path):
        return "path"
    for name, values in request.GET.lists():
        if has_control(name):
            return repr(name)
        if any(has_control(value, allowed=_TEXT_CONTROLS) for value in values):
            return name
    return None


class ControlCharacterGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = bad_parameter(request)
        if name is None:
            return self.get_response(request)
        message = f"The {name} parameter holds a control character (such as NUL)."
        if name == "path":
            message = "The path holds a control character (such as NUL)."
        if is_api_path(request):
            return JsonResponse(
                error_body("INVALID_REQUEST", message, {"fields": {name: message}}), status=400
            )
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
