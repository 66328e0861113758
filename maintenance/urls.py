from __future__ import annotations

from django.urls import path

from maintenance import views

app_name = "maintenance"
urlpatterns = [
    path("maintenance/", views.index, name="index"),
    path("maintenance/settings/", views.settings_page, name="settings"),
    path("maintenance/runs/<int:run_id>/", views.run_page, name="run"),
    path("maintenance/runs/<int:run_id>/execute/", views.execute, name="execute"),
    path("maintenance/runs/<int:run_id>/cancel/", views.cancel, name="cancel"),
    path("maintenance/runs/<int:run_id>/restore/", views.restore, name="restore"),
    path("maintenance/runs/<int:run_id>/revert/", views.revert, name="revert"),
    path(
        "maintenance/memories/<int:memory_id>/reactivate/",
        views.reactivate,
        name="reactivate",
    ),
    path("maintenance/<str:sweep>/preview/", views.start, name="start"),
]
