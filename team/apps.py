from __future__ import annotations

from django.apps import AppConfig


class TeamConfig(AppConfig):
    """Who may call a workspace: its members and its API tokens, managed by its operators."""

    name = "team"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The audit pages show the token and member events through team's presenters.
        from team import events  # noqa: F401
