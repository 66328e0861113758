from __future__ import annotations

from django.apps import AppConfig


class MaintenanceConfig(AppConfig):
    """Memory lifecycle maintenance: per-workspace settings, sweeps and their runs."""

    name = "maintenance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registrations with the floors below: the memory page's panels, erasure's archives,
        # the audit pages' presenters of maintenance's events; its tasks, which services
        # enqueue by name.
        from maintenance import erasure, events, panels, tasks  # noqa: F401
