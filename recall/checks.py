"""Start-up checks (``manage.py check``, ``runserver``, ``migrate``): the configured embedder.

A damaged or substituted model file must stop the portal before it serves, not fail its
first recall: ``make serve`` migrates first and ``make run`` serves through ``runserver``,
both of which run these checks.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from recall.embedding import EmbedderUnavailable
from recall.runtime import embedder


@checks.register("recall")
def embedder_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The configured embedder can be built and its files are the pinned ones."""
    try:
        model = embedder()
        files_check = getattr(model, "files_check", None)
        if files_check is not None:
            files_check()
    except ImproperlyConfigured as exc:
        message = str(exc)
    except EmbedderUnavailable as exc:
        message = f"RECALL_EMBEDDER={settings.RECALL_EMBEDDER}: {exc}"
    else:
        return []
    return [
        checks.Error(
            message,
            hint="Reinstall the project's packages (make install), or set RECALL_EMBEDDER to"
            " an embedder this install has (docs/deploy.md).",
            id="recall.E001",
        )
    ]
