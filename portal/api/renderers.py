"""A faster JSON renderer for the hot path's plain-data responses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer


class FastJSONRenderer(JSONRenderer):
    """``JSONRenderer``'s output for plain data (dicts with string keys, lists, strings,
    numbers, booleans, None), written by orjson: the recall envelope renders in microseconds
    instead of a tenth of a millisecond, and parses to the same JSON (the bytes differ only in
    that U+2028 and U+2029 are not escaped). Anything else (a date, a UUID, a lazy translation
    in an error message) falls back to ``JSONRenderer`` itself."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        try:
            return orjson.dumps(data)
        except TypeError:
            return super().render(data, accepted_media_type, renderer_context)
