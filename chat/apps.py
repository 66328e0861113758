from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Chat sessions and their turns: the context assembled for each turn an agent sends."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registrations with the floors below: erasure of an actor removes its sessions.
        from chat import erasure  # noqa: F401
