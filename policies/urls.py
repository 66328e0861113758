from __future__ import annotations

from django.urls import path

from policies.views import floor, history, settings, workload

app_name = "policies"
urlpatterns = [
    path("policies/", floor.floor, name="floor"),
    path("policies/history/", history.floor_history, name="floor-history"),
    path("workloads/<uuid:workload_id>/policy/", workload.workload_policy, name="workload-policy"),
    path(
        "workloads/<uuid:workload_id>/policy/history/",
        history.workload_history,
        name="workload-history",
    ),
    path(
        "workloads/<uuid:workload_id>/policy/narrow/",
        workload.workload_narrow,
        name="workload-narrow",
    ),
    # The workspace's query-storage setting, switched from the audit trail's page.
    path("audit/query-storage/", settings.query_storage, name="query-storage"),
]
