"""The configured embedder, query-vector cache and token estimator, built once per process."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from recall.embedding import Embedder, EmbedderUnavailable
from recall.embedding_onnx import MiniLMOnnxEmbedder
from recall.query_vectors import QueryVectorCache

# Short names RECALL_EMBEDDER accepts besides a dotted path to an Embedder class.
EMBEDDERS = {
    "minilm-onnx": "recall.embedding_onnx.MiniLMOnnxEmbedder",
    "hashing": "recall.embedding.HashingEmbedder",
    "semantic": "recall.embedding.SemanticEmbedder",
}


@cache
def embedder() -> Embedder:
    path = EMBEDDERS.get(settings.RECALL_EMBEDDER, settings.RECALL_EMBEDDER)
    try:
        cls = import_string(path)
        if isinstance(cls, type) and issubclass(cls, MiniLMOnnxEmbedder):
            model_path = settings.RECALL_EMBEDDER_MODEL_PATH
            built: Embedder = cls(
                settings.RECALL_EMBEDDING_DIM,
                threads=settings.RECALL_EMBEDDER_THREADS,
                model_path=Path(model_path) if model_path else None,
            )
            return built
        built = cls(settings.RECALL_EMBEDDING_DIM)
        return built
    except EmbedderUnavailable as exc:
        raise ImproperlyConfigured(f"RECALL_EMBEDDER={settings.RECALL_EMBEDDER}: {exc}") from exc


def embedder_model() -> str:
    """The configured embedder's model name, as it is stored on the memories it embeds
    (``embedding_model``) and on the runs that compared vectors with it: a memory is
    recallable once it carries this one (``recall.engine.policy_filter``)."""
    return embedder().model_name


def recallable_models() -> list[str]:
    """The names of the vectors recall compares with a query's: the configured embedder's, and
    those of earlier versions of it whose vectors it declares comparable
    (``compatible_models``), which stay recallable until the ``reembed`` sweep has embedded
    them again."""
    model = embedder()
    return [model.model_name, *getattr(model, "compatible_models", ())]


@cache
def query_vector_cache() -> QueryVectorCache:
    return QueryVectorCache(settings.RECALL_QUERY_CACHE_SIZE)


def query_embedding(text: str) -> tuple[float, ...]:
    """A recall query's vector by the configured embedder, from the process's cache."""
    model = embedder()
    return query_vector_cache().vector(model.model_name, text, lambda t: model.embed([t])[0])


@cache
def token_estimator() -> Callable[[str], int]:
    return import_string(settings.RECALL_TOKEN_ESTIMATOR)
