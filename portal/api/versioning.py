"""Versions over HTTP: ``ETag`` on reads, ``If-Match`` or ``baseVersion`` on saves.

A versioned document's read carries ``ETag: "<version>"`` (``"0"``: nothing saved yet). It is
a strong validator: a version is immutable, so one version always has the same body. A save
names the version it was based on with ``If-Match: "<version>"`` or a top-level
``baseVersion`` field in its JSON body; the service refuses a stale one with 409
``VERSION_CONFLICT`` (``portal.versioning``). A save naming no base is not checked.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.errors import ErrorSerializer
from portal.errors import UnprocessableError, ValidationFailed
from portal.versioning import parse_base_version

BASE_VERSION_FIELD = "baseVersion"
# A weak form (W/"3") is accepted too: some proxies weaken the validators they pass on.
_ENTITY_TAG = re.compile(r'^(?:W/)?"([^"]*)"$')
_BASE_VERSION_HELP = "the version your change was based on, a whole number (0: nothing saved yet)"

IF_MATCH_PARAM = OpenApiParameter(
    "If-Match",
    str,
    location=OpenApiParameter.HEADER,
    # One entity tag of a whole number of at most 9 digits (parse_base_version), or "*".
    pattern=r'^\s*(\*|(W/)?"\s*[0-9]{1,9}\s*")\s*$',
    description='The ETag of the version this save is based on, e.g. `"3"` (`"0"`: none saved '
    "yet). A stale one is refused with 409 VERSION_CONFLICT and nothing is saved. The body's "
    "`baseVersion` does the same; without either the save is not checked, so send one.",
)
ETAG_HEADER = OpenApiParameter(
    "ETag",
    str,
    location=OpenApiParameter.HEADER,
    response=[200],
    description='The version shown, e.g. `"3"` (`"0"`: none saved yet); send it back as If-Match.',
)
# The body's baseVersion, for request schemas written by hand (base_version_of checks it).
BASE_VERSION_SCHEMA = {
    "type": "integer",
    "minimum": 0,
    "maximum": 10**9 - 1,
    "nullable": True,
    "description": "The version this change is based on (as If-Match).",
}
VERSION_CONFLICT_RESPONSE = OpenApiResponse(
    ErrorSerializer,
    description="VERSION_CONFLICT: someone saved since the base version; nothing was saved. "
    "`details` has `currentVersion` and `baseVersion`.",
)
BASE_VERSION_MISMATCH = "BASE_VERSION_MISMATCH"
MISMATCH_DOC = (
    f"{BASE_VERSION_MISMATCH}: If-Match and the body's baseVersion name different versions; "
    "nothing was saved."
)


def with_mismatch(description: str = "") -> OpenApiResponse:
    """A versioned save's 422: its own reasons (``description``), and the mismatch."""
    return OpenApiResponse(
        ErrorSerializer,
        description=f"{description} Or {MISMATCH_DOC}" if description else MISMATCH_DOC,
    )


BASE_VERSION_DOC = (
    " Send the version the change is based on (`If-Match` with the read's ETag, or "
    "`baseVersion` in the body): a save based on a stale version is refused with 409 "
    "VERSION_CONFLICT instead of undoing someone else's save. A save identical to the "
    "current version records nothing and answers 200 with the current version."
)


def etag(version: int) -> str:
    return f'"{version}"'


def with_etag(response: Response, version: int | None) -> Response:
    response["ETag"] = etag(version or 0)
    return response


def base_version_of(request: Request, data: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """The base version a save names (``If-Match`` or ``baseVersion``), and the body without it.

    Malformed values are a 400 naming them; a header and a field that each name a version,
    different ones, are a 422 ``BASE_VERSION_MISMATCH`` (each is valid alone).
    """
    body = dict(data)
    from_body = None
    if BASE_VERSION_FIELD in body:
        raw = body.pop(BASE_VERSION_FIELD)
        if raw is not None:
            if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw < 10**9:
                raise ValidationFailed({BASE_VERSION_FIELD: f"Send {_BASE_VERSION_HELP}."})
            from_body = raw
    header = request.headers.get("If-Match")
    from_header = _if_match(header) if header is not None else None
    if from_body is not None and from_header is not None and from_body != from_header:
        raise UnprocessableError(
            BASE_VERSION_MISMATCH,
            f"baseVersion says {from_body} but If-Match says {from_header}; send one of them."
            " Nothing was saved.",
            {"fields": {BASE_VERSION_FIELD: f"Says {from_body} but If-Match says {from_header}."}},
        )
    return (from_body if from_body is not None else from_header), body


def _if_match(header: str) -> int | None:
    text = header.strip()
    if text == "*":
        return None  # "any current version": no check
    match = _ENTITY_TAG.match(text)
    try:
        if match is None:
            raise ValueError(text)
        return parse_base_version(match.group(1))
    except ValueError:
        raise ValidationFailed(
            {"If-Match": f'Send one entity tag, "<version>": {_BASE_VERSION_HELP}.'},
            "The If-Match header is not valid.",
        ) from None
