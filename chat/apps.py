from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Chat sessions and their turns: the context assembled for each turn an agent sends."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registrations with the floors below: erasure of an actor removes its sessions; the
        # audit pages' words for context.compacted; a summary memory's page names its run.
        # And COMPACTION_SERVICES checked at start.
        from chat import erasure, events, panels  # noqa: F401
        from chat.compaction.summarizers import services_check

        services_check()
