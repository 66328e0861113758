from __future__ import annotations

from django.urls import path

from policies.api import views

urlpatterns = [
    path("workspaces/", views.WorkspaceListView.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>/", views.WorkspaceDetailView.as_view(), name="api-workspace"),
    path(
        "workspaces/<slug:slug>/policy",
        views.WorkspacePolicyView.as_view(),
        name="api-workspace-policy",
    ),
    path(
        "workspaces/<slug:slug>/policy/versions/",
        views.WorkspacePolicyVersionListView.as_view(),
        name="api-workspace-policy-versions",
    ),
    path(
        "workspaces/<slug:slug>/policy/versions/<int:version>",
        views.WorkspacePolicyVersionDetailView.as_view(),
        name="api-workspace-policy-version",
    ),
    path(
        "workspaces/<slug:slug>/workloads/",
        views.WorkloadListView.as_view(),
        name="api-workloads",
    ),
    path("workloads/<uuid:workload_id>/", views.WorkloadDetailView.as_view(), name="api-workload"),
    path(
        "workloads/<uuid:workload_id>/policy",
        views.WorkloadPolicyView.as_view(),
        name="api-workload-policy",
    ),
    path(
        "workloads/<uuid:workload_id>/policy/versions/",
        views.WorkloadPolicyVersionListView.as_view(),
        name="api-workload-policy-versions",
    ),
    path(
        "workloads/<uuid:workload_id>/effective-policy",
        views.EffectivePolicyView.as_view(),
        name="api-effective-policy",
    ),
    path("policy/axes", views.PolicyAxesView.as_view(), name="api-policy-axes"),
]
