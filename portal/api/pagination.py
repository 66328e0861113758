"""Page-number pagination whose parameters are checked, as the schema states them.

DRF reads a malformed ``pageSize`` as the default and a ``pageSize`` over the maximum as the
maximum, and answers a malformed ``page`` with 404: a typo would go unnoticed. Here either
is a 400 naming the parameter; a page past the last stays a 404.
"""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from portal.errors import ValidationFailed


def _whole_number(request: Request, name: str, *, maximum: int | None = None) -> int | None:
    """The parameter as a whole number >= 1 (and <= ``maximum``), None when absent.

    Without a maximum, a number too long for an id reads as 10**18: past any last page.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.isascii() and raw.isdigit() and len(raw) > 18 and maximum is None:
        return 10**18
    valid = raw.isascii() and raw.isdigit() and len(raw) <= 18 and int(raw) >= 1
    if not valid or (maximum is not None and int(raw) > maximum):
        upto = f" to {maximum}" if maximum is not None else " or more"
        raise ValidationFailed({name: f"A whole number from 1{upto}; got {raw!r}."})
    return int(raw)


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "pageSize"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        size = _whole_number(request, "pageSize", maximum=self.max_page_size)
        return size if size is not None else self.page_size

    def get_page_number(self, request: Request, paginator: Any) -> int:
        number = _whole_number(request, self.page_query_param)
        return number if number is not None else 1

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {"page": {"minimum": 1}, "pageSize": {"minimum": 1, "maximum": self.max_page_size}}
        for parameter in parameters:
            if parameter["name"] in bounds:
                # An empty value is the default, as a page's form sends it.
                number = {**parameter["schema"], **bounds[parameter["name"]]}
                parameter["schema"] = {"anyOf": [number, {"type": "string", "maxLength": 0}]}
        return parameters
