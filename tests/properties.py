"""How many examples a property test tries.

Each property test names its count for a thorough run; ``make test`` tries a third of it
(at least 50), and so does a test that names none (Hypothesis's 100). ``make test-thorough``
(``PROPERTY_EXAMPLES=full``) tries every one. The examples are the costliest part of the
suite's domain tests, twice as costly under coverage.
"""

from __future__ import annotations

import os

from hypothesis import settings

THOROUGH = os.environ.get("PROPERTY_EXAMPLES", "") == "full"
FLOOR = 50


def examples(full: int) -> int:
    """The examples to try of a test whose thorough run tries ``full``."""
    return full if THOROUGH else max(min(FLOOR, full), full // 3)


settings.register_profile("suite", max_examples=examples(settings.default.max_examples))
settings.load_profile("suite")
