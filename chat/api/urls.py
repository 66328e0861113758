from __future__ import annotations

from django.urls import path

from chat.api import views

urlpatterns = [
    path("sessions", views.SessionCreateView.as_view(), name="api-sessions-create"),
    path("sessions/", views.SessionListView.as_view(), name="api-sessions"),
    path("sessions/<str:session_id>", views.SessionDetailView.as_view(), name="api-session"),
    path(
        "sessions/<str:session_id>/turns",
        views.SessionTurnsView.as_view(),
        name="api-session-turns",
    ),
    path(
        "sessions/<str:session_id>/turns/<int:turn>",
        views.SessionTurnView.as_view(),
        name="api-session-turn",
    ),
    path(
        "sessions/<str:session_id>/turns/<int:turn>/prompt",
        views.SessionTurnPromptView.as_view(),
        name="api-session-turn-prompt",
    ),
    path("sessions/<str:session_id>/end", views.SessionEndView.as_view(), name="api-session-end"),
    path(
        "sessions/<str:session_id>/compact",
        views.SessionCompactView.as_view(),
        name="api-session-compact",
    ),
    path(
        "compaction/runs/<id:compaction_run_id>",
        views.CompactionRunView.as_view(),
        name="api-compaction-run",
    ),
]
