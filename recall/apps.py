from __future__ import annotations

from django.apps import AppConfig


class RecallConfig(AppConfig):
    name = "recall"
    default_auto_field = "django.db.models.BigAutoField"
