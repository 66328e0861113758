"""The Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process.

With a broker: ``celery -A portal worker`` runs the tasks, ``celery -A portal beat`` sends
the scheduled ones (``CELERY_BEAT_SCHEDULE`` in the settings); ``make worker`` and
``make beat`` start them.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _workers_see_every_workspace(**kwargs: object) -> None:
    """Tasks are the system's own code acting on the ids they are given: a worker's
    connections see every workspace (portal/db/scope.py); web requests are scoped."""
    from portal.db.scope import scope_all_by_default

    scope_all_by_default()
