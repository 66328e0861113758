"""Security headers Django does not set itself: a Content-Security-Policy the pages satisfy
(scripts and styles from this site only, nothing inline, no framing) and a Permissions-Policy
switching off what the portal never uses.

The pages keep to it: behaviour lives in ``static/portal/portal.js``, htmx's inline indicator
styles are off (``includeIndicatorStyles``), the API docs page is drf-spectacular's split
view (its script is a separate URL; Swagger UI's inline styles are allowed on that page
alone). A browser test walks the pages and fails on any violation the browser reports.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# Swagger UI (the API docs page) sets inline styles as it draws; scripts stay 'self' there too.
API_DOCS_POLICY = CONTENT_SECURITY_POLICY.replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
)
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        policy = (
            API_DOCS_POLICY if request.path.startswith("/v1/docs/") else CONTENT_SECURITY_POLICY
        )
        response.headers.setdefault("Content-Security-Policy", policy)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
