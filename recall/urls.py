from __future__ import annotations

from django.urls import path

from recall import views

app_name = "recall"
urlpatterns = [
    path("sandbox/", views.sandbox, name="sandbox"),
    path("sandbox/actors", views.actor_options, name="actor-options"),
    path("sandbox/layout/", views.layout, name="layout"),
    path("memories/", views.memories, name="memories"),
    path("memories/import/", views.memory_import, name="memory-import"),
    path("memories/erase/", views.actor_erase, name="actor-erase"),
    path("audit/<int:event_id>/replay/", views.event_replay, name="event-replay"),
    path("memories/<int:memory_id>/", views.memory_detail, name="memory"),
    path("memories/<int:memory_id>/row/", views.memory_row, name="memory-row"),
    path("memories/<int:memory_id>/edit/", views.memory_edit, name="memory-edit"),
    path("memories/<int:memory_id>/status/", views.memory_status, name="memory-status"),
]
