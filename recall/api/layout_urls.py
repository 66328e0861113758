from __future__ import annotations

from django.urls import path

from recall.api import layout_views

urlpatterns = [
    path("context/layout", layout_views.ContextLayoutView.as_view(), name="api-context-layout"),
    path(
        "workloads/<uuid:workload_id>/layout-config",
        layout_views.WorkloadLayoutConfigView.as_view(),
        name="api-workload-layout-config",
    ),
    path(
        "workloads/<uuid:workload_id>/layout-config/versions/",
        layout_views.WorkloadLayoutConfigVersionListView.as_view(),
        name="api-workload-layout-config-versions",
    ),
]
