from __future__ import annotations

from django.urls import path

from recall.api import views

urlpatterns = [
    # First: the hot path (console/urls.py).
    path("memory/actors/<str:actor_id>/recall", views.RecallView.as_view(), name="api-recall"),
    path(
        "memory/actors/<str:actor_id>/memories",
        views.ActorMemoriesView.as_view(),
        name="api-actor-memories",
    ),
    path("audit/events/<id:event_id>/replay", views.EventReplayView.as_view(), name="api-replay"),
    path("memory/actors/<str:actor_id>/erase", views.ActorEraseView.as_view(), name="api-erase"),
    path("memory/memories/<id:memory_id>", views.MemoryDetailView.as_view(), name="api-memory"),
    path(
        "memory/memories/<id:memory_id>/injections",
        views.MemoryInjectionsView.as_view(),
        name="api-memory-injections",
    ),
    path(
        "memory/memories/<id:memory_id>/suppress",
        views.MemorySuppressView.as_view(),
        name="api-memory-suppress",
    ),
    path(
        "memory/memories/<id:memory_id>/restore",
        views.MemoryRestoreView.as_view(),
        name="api-memory-restore",
    ),
    path(
        "memory/memories/<id:memory_id>/reactivate",
        views.MemoryReactivateView.as_view(),
        name="api-memory-reactivate",
    ),
]
