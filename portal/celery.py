"""The Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process.

With a broker: ``celery -A portal worker`` runs the tasks, ``celery -A portal beat`` sends
the scheduled ones (``CELERY_BEAT_SCHEDULE`` in the settings); ``make worker`` and
``make beat`` start them.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
