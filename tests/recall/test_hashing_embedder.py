"""The hashing embedder, the suite's own (instant, no model): unit vectors for any text."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from bench.embedder_quality import cosine
from recall.embedding import HashingEmbedder

EMBEDDER = HashingEmbedder(384)


@given(st.text(max_size=200))
def test_any_text_gets_a_unit_vector_of_its_dimensions(text: str) -> None:
    vector = EMBEDDER.embed_one(text)

    assert len(vector) == 384
    assert math.isclose(math.hypot(*vector), 1.0, rel_tol=1e-9)


def test_a_text_without_words_gets_the_first_axis_rather_than_no_direction() -> None:
    # Cosine has no meaning for a zero vector: an empty or symbol-only text points somewhere.
    for text in ("", "   ", "?!", "—"):
        assert EMBEDDER.embed_one(text) == [1.0] + [0.0] * 383


def test_the_same_text_gets_the_same_vector_and_shared_words_bring_texts_closer() -> None:
    ada, same, near, far = EMBEDDER.embed(
        ["Ada prefers short release notes", "Ada prefers short release notes",
         "release notes for Ada, short", "the invoice was paid in March"]
    )  # fmt: skip

    assert ada == same
    assert cosine(ada, near) > cosine(ada, far)
