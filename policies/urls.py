from __future__ import annotations

from django.urls import path

from policies import views

app_name = "policies"
urlpatterns = [
    path("policies/", views.floor, name="floor"),
    path("policies/history/", views.floor_history, name="floor-history"),
    path("workloads/<uuid:workload_id>/policy/", views.workload_policy, name="workload-policy"),
    path(
        "workloads/<uuid:workload_id>/policy/history/",
        views.workload_history,
        name="workload-history",
    ),
    path(
        "workloads/<uuid:workload_id>/policy/narrow/",
        views.workload_narrow,
        name="workload-narrow",
    ),
    # The workspace's query-storage setting, switched from the audit trail's page.
    path("audit/query-storage/", views.query_storage, name="query-storage"),
]
