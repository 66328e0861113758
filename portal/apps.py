from __future__ import annotations

from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.urls import register_converter

        # The Celery app (so that shared tasks bind to it) and the OpenAPI auth extension.
        from portal import celery, schema  # noqa: F401
        from portal.db.cursors import generic_plans
        from portal.db.scope import on_connection_created
        from portal.ids import IdConverter

        connection_created.connect(generic_plans, dispatch_uid="portal.generic_plans")
        connection_created.connect(on_connection_created, dispatch_uid="portal.scope")
        # Before any URLconf is read: the apps' routes type their ids as ``<id:...>``.
        register_converter(IdConverter, "id")
