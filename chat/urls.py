from __future__ import annotations

from django.urls import path

from chat import views

app_name = "chat"
urlpatterns = [
    path("sessions/", views.sessions, name="sessions"),
    path("sessions/<str:session_id>/", views.session, name="session"),
    path("sessions/<str:session_id>/compact/", views.session_compact, name="session-compact"),
    path(
        "sessions/<str:session_id>/turns/<int:turn>/prompt/",
        views.turn_prompt,
        name="turn-prompt",
    ),
    path(
        "sessions/<str:session_id>/turns/<int:turn>/layout/",
        views.turn_layout,
        name="turn-layout",
    ),
]
