from __future__ import annotations

from django.urls import path

from team.api import views

urlpatterns = [
    path("workspaces/<slug:slug>/tokens/", views.TokenListView.as_view(), name="api-tokens"),
    path(
        "workspaces/<slug:slug>/tokens/<id:token_id>",
        views.TokenDetailView.as_view(),
        name="api-token",
    ),
    path(
        "workspaces/<slug:slug>/tokens/<id:token_id>/rotate",
        views.TokenRotateView.as_view(),
        name="api-token-rotate",
    ),
    path(
        "workspaces/<slug:slug>/tokens/<id:token_id>/revoke",
        views.TokenRevokeView.as_view(),
        name="api-token-revoke",
    ),
    path("workspaces/<slug:slug>/members/", views.MemberListView.as_view(), name="api-members"),
    path(
        "workspaces/<slug:slug>/members/<str:username>",
        views.MemberDetailView.as_view(),
        name="api-member",
    ),
]
