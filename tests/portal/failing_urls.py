"""The portal's URLs plus two /v1/ views that fail, for the error-shape tests only."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response

from console import urls as portal_urls
from portal.api.views import ApiView, json_object


class BrokenApiView(ApiView):
    """Reads its body (as a real endpoint would), then hits a bug."""

    def post(self, request: Request) -> Response:
        body = json_object(request)
        return Response({"ratio": len(body["content"]) / 0})


def broken_plain_view(request: HttpRequest) -> HttpResponse:
    values: dict[str, Any] = {}
    return HttpResponse(values["missing"])


urlpatterns = [
    path("v1/test/broken-api", BrokenApiView.as_view()),
    path("v1/test/broken-plain", broken_plain_view),
    *portal_urls.urlpatterns,
]

handler400 = portal_urls.handler400
handler404 = portal_urls.handler404
handler500 = portal_urls.handler500
