from __future__ import annotations

from django.urls import path

from maintenance.api import views

urlpatterns = [
    path(
        "workspaces/<slug:slug>/lifecycle",
        views.LifecycleSettingsView.as_view(),
        name="api-lifecycle-settings",
    ),
    path(
        "workspaces/<slug:slug>/lifecycle/versions/",
        views.LifecycleSettingsVersionListView.as_view(),
        name="api-lifecycle-settings-versions",
    ),
    path(
        "workspaces/<slug:slug>/maintenance/runs/",
        views.RunListView.as_view(),
        name="api-maintenance-runs",
    ),
    path(
        "workspaces/<slug:slug>/maintenance/<str:sweep>",
        views.SweepStartView.as_view(),
        name="api-maintenance-start",
    ),
    path("maintenance/runs/<id:run_id>", views.RunDetailView.as_view(), name="api-maintenance-run"),
    path(
        "maintenance/runs/<id:run_id>/items",
        views.RunItemsView.as_view(),
        name="api-maintenance-run-items",
    ),
    path(
        "maintenance/runs/<id:run_id>/cancel",
        views.RunCancelView.as_view(),
        name="api-maintenance-run-cancel",
    ),
    path(
        "maintenance/runs/<id:run_id>/archive",
        views.RunArchiveView.as_view(),
        name="api-maintenance-run-archive",
    ),
    path(
        "maintenance/runs/<id:run_id>/archive/manifest",
        views.RunManifestView.as_view(),
        name="api-maintenance-run-manifest",
    ),
    path(
        "maintenance/runs/<id:run_id>/restore",
        views.RunRestoreView.as_view(),
        name="api-maintenance-run-restore",
    ),
    path(
        "maintenance/runs/<id:run_id>/revert",
        views.RunRevertView.as_view(),
        name="api-maintenance-run-revert",
    ),
    path(
        "memory/memories/<id:memory_id>/lifecycle",
        views.MemoryLifecycleView.as_view(),
        name="api-memory-lifecycle",
    ),
]
