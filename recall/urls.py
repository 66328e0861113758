from __future__ import annotations

from django.urls import path

from recall import views

app_name = "recall"
urlpatterns = [
    path("sandbox/", views.sandbox, name="sandbox"),
    path("memories/", views.memories, name="memories"),
]
