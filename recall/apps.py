from __future__ import annotations

from django.apps import AppConfig


class RecallConfig(AppConfig):
    name = "recall"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registrations with the floors below: the floor page's impact preview counts
        # memories with recall's engine (policies imports nothing from recall).
        from policies.impact import impact_counter_register
        from recall.engine.impact import memory_policy_impact

        impact_counter_register(memory_policy_impact)
        # The audit pages show recall's events through recall's presenters; its tasks are
        # registered with the Celery app, which services enqueue by name; its start-up check
        # of the embedder's model files with Django's checks.
        from recall import checks, events, tasks  # noqa: F401
