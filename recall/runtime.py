"""The configured embedder and token estimator, built once per process."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from recall.embedding import Embedder


@cache
def embedder() -> Embedder:
    return import_string(settings.RECALL_EMBEDDER)(settings.RECALL_EMBEDDING_DIM)


@cache
def token_estimator() -> Callable[[str], int]:
    return import_string(settings.RECALL_TOKEN_ESTIMATOR)
