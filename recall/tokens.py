"""Token estimation (plain Python).

The default is the usual heuristic for English text on BPE tokenizers: about four characters
per token, never fewer tokens than a third of the words. It is an estimate, not any provider's
exact count; plug in another callable with ``RECALL_TOKEN_ESTIMATOR``.
"""

from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    by_chars = math.ceil(len(text) / 4)
    by_words = math.ceil(len(text.split()) / 3)
    return max(1, by_chars, by_words)
