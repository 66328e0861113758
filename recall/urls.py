from __future__ import annotations

from django.urls import path

from recall.views import erasure, layout, memories, replay, sandbox

app_name = "recall"
urlpatterns = [
    path("sandbox/", sandbox.sandbox, name="sandbox"),
    path("sandbox/actors", sandbox.actor_options, name="actor-options"),
    path("sandbox/layout/", layout.layout, name="layout"),
    path("memories/", memories.memories, name="memories"),
    path("memories/import/", memories.memory_import, name="memory-import"),
    path("memories/erase/", erasure.actor_erase, name="actor-erase"),
    path("audit/<int:event_id>/replay/", replay.event_replay, name="event-replay"),
    path("memories/<int:memory_id>/", memories.memory_detail, name="memory"),
    path("memories/<int:memory_id>/row/", memories.memory_row, name="memory-row"),
    path("memories/<int:memory_id>/edit/", memories.memory_edit, name="memory-edit"),
    path("memories/<int:memory_id>/status/", memories.memory_status, name="memory-status"),
    path("memories/<int:memory_id>/state/", memories.memory_state, name="memory-state"),
]
