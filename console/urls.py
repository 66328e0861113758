"""The root URLs: the API under /v1/, the pages under /w/<slug>/, health, login."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from console import views
from portal import views as portal_views
from portal.api.errors import UNKNOWN_API_PATH, unknown_api_path
from portal.throttling import ThrottledLoginView

# Recall first: the agents' call on every turn, so the resolver tries its pattern first rather
# than after twenty others. No two API patterns match the same path, so the order changes
# nothing else (tests/console/test_urls.py).
api_patterns: list[URLPattern | URLResolver] = [
    path("", include("recall.api.urls")),
    path("", include("policies.api.urls")),
    path("", include("audit.api.urls")),
    path("", include("recall.api.layout_urls")),
    path("", include("maintenance.api.urls")),
    path("", include("chat.api.urls")),
    path("", include("team.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script at a URL of its own: no inline script (CSP).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    # Last: any other /v1/ path is a JSON 404 (Django's DEBUG 404 page ignores handler404).
    re_path(r"^", unknown_api_path, name=UNKNOWN_API_PATH),
]

urlpatterns = [
    path("v1/", include(api_patterns)),
    path("healthz", portal_views.healthz, name="healthz"),
    path("readyz", portal_views.readyz, name="readyz"),
    path(
        "login/",
        ThrottledLoginView.as_view(
            template_name="portal/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", views.home, name="home"),
    path("w/<slug:slug>/", views.dashboard, name="dashboard"),
    path("w/<slug:slug>/", include("policies.urls")),
    path("w/<slug:slug>/", include("recall.urls")),
    path("w/<slug:slug>/", include("audit.urls")),
    path("w/<slug:slug>/", include("maintenance.urls")),
    path("w/<slug:slug>/", include("chat.urls")),
    path("w/<slug:slug>/", include("team.urls")),
]

handler400 = "portal.views.bad_request"
handler403 = "portal.views.permission_denied"
handler404 = "portal.views.not_found"
handler500 = "portal.views.server_error"
