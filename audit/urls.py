from __future__ import annotations

from django.urls import path

from audit import views

app_name = "audit"
urlpatterns = [
    path("audit/", views.events, name="events"),
    path("audit/verify/", views.verify, name="verify"),
    path("audit/export.csv", views.export_csv, name="export-csv"),
    path("audit/export.jsonl", views.export_jsonl, name="export-jsonl"),
    path("audit/<int:event_id>/", views.event, name="event"),
]
