from __future__ import annotations

from django.urls import path

from audit.api import views

urlpatterns = [
    path("audit/events/", views.AuditEventListView.as_view(), name="api-audit-events"),
    path(
        "audit/events/<id:event_id>", views.AuditEventDetailView.as_view(), name="api-audit-event"
    ),
    path("audit/verify", views.AuditVerifyView.as_view(), name="api-audit-verify"),
]
