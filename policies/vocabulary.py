"""The closed vocabularies of the policy axes (SPEC §3), in plain Python (no Django).

Their own module so that the pure modules beside the algebra (``policies.conflicts``) can
share them without importing the algebra that imports them.
"""

from __future__ import annotations

SENSITIVITY_ORDER: tuple[str, ...] = ("public", "internal", "confidential", "restricted")
VERBOSITY_ORDER: tuple[str, ...] = ("none", "summary", "full")
SEGMENT_KINDS: tuple[str, ...] = ("system_policy", "memory", "retrieval", "tool_result")
# The confirmation statuses ``confidenceMin`` applies to: seed 001 calls it the "minimum
# confidence for inferred or observed memory". A memory a user or an operator confirmed, or
# one imported or of unknown confirmation, is not held to it (``confirmationStatusAllowed``
# decides whether those are recalled at all).
CONFIDENCE_GATED: tuple[str, ...] = ("observed", "inferred")

VOCABULARIES: dict[str, tuple[str, ...]] = {
    "memoryType": (
        "fact",
        "preference",
        "decision",
        "instruction",
        "episode",
        "summary",
        "insight",
        "entity",
    ),
    "sourceKind": ("user", "assistant", "tool", "retrieval", "operator", "system", "import"),
    "confirmationStatus": (
        "user_confirmed",
        "operator_confirmed",
        "observed",
        "inferred",
        "imported",
        "unknown",
    ),
    "sensitivity": SENSITIVITY_ORDER,
    "consentPolicy": (
        "explicit",
        "contractual",
        "legitimate_interest",
        "implied",
        "unknown",
        "withdrawn",
    ),
    "segmentKind": SEGMENT_KINDS,
    "diagnosticsVerbosity": VERBOSITY_ORDER,
}
