from __future__ import annotations

from django.urls import path

from team import views

app_name = "team"
urlpatterns = [
    path("settings/access/", views.access, name="access"),
    path("settings/access/tokens/<int:token_id>/rotate/", views.token_rotate, name="token-rotate"),
    path("settings/access/tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
    path("settings/access/members/", views.member_add, name="member-add"),
    path("settings/access/members/<int:member_id>/role/", views.member_role, name="member-role"),
    path(
        "settings/access/members/<int:member_id>/remove/",
        views.member_remove,
        name="member-remove",
    ),
]
