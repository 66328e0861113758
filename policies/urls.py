from __future__ import annotations

from django.urls import path

from policies import views

app_name = "policies"
urlpatterns = [
    path("policies/", views.floor, name="floor"),
]
