"""The configured embedder and token estimator, built once per process."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from recall.embedding import Embedder, EmbedderUnavailable

# Short names RECALL_EMBEDDER accepts besides a dotted path to an Embedder class.
EMBEDDERS = {
    "hashing": "recall.embedding.HashingEmbedder",
    "semantic": "recall.embedding.SemanticEmbedder",
}


@cache
def embedder() -> Embedder:
    path = EMBEDDERS.get(settings.RECALL_EMBEDDER, settings.RECALL_EMBEDDER)
    try:
        return import_string(path)(settings.RECALL_EMBEDDING_DIM)
    except EmbedderUnavailable as exc:
        raise ImproperlyConfigured(f"RECALL_EMBEDDER={settings.RECALL_EMBEDDER}: {exc}") from exc


@cache
def token_estimator() -> Callable[[str], int]:
    return import_string(settings.RECALL_TOKEN_ESTIMATOR)
