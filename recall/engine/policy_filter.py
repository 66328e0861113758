"""The recall filter, written once and compiled for every reader of it.

A memory is recalled only if it passes, in this order (SPEC §3 and §5):

1. **fail-closed**: active, current, not expired, consent not withdrawn, a segment kind of the
   vocabulary, whatever any policy says;
2. **embedded**: embedded by the configured embedder (a vector comparable with the query);
3. **the policy's axes**, each reported under its own decision code when it fails (a row
   failing several is reported under the first; NULLs never pass);
4. **the similarity floor** (``similarityMin``), last: it depends on the query, so it is
   checked where the rows are ranked (:data:`SIMILARITY_CHECK`), never in the funnel, whose
   decisions the funnel cache keeps per policy whatever the query.

The rules are SQL templates: ``{m}`` stands for the memory table's alias and ``{name}`` for a
parameter of ``policy_params``. :func:`policy_filter_sql` renders one *part* with named
placeholders, for statements written once (the hot path's prepared statements, or many
policies in one query with a ``suffix`` each); :func:`compile_policy_filter` adds the values;
:func:`policy_filter_expression` renders it positionally for the ORM. No caller rewrites the
SQL: whoever needs the filter asks for the part it needs here.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from string import Formatter
from typing import Any, Literal

from django.db import connection
from django.db.models import BooleanField, CharField, Field, Model
from django.db.models.expressions import RawSQL

from policies.axes import PolicyDocument
from policies.vocabulary import CONFIDENCE_GATED, SEGMENT_KINDS, SENSITIVITY_ORDER
from recall.runtime import recallable_models

# Every column the filter reads: the covering index (``memory_recall_cover_idx``) includes
# them all, so the funnel and the exact search's filter never touch the wide heap rows; the
# funnel cache's triggers watch them (``funnel_cache.TRIGGER_COLUMNS``).
FILTER_COLUMNS = (
    "lifecycle_status", "is_current", "expires_at", "consent_policy", "memory_type",
    "source_kind", "confirmation_status", "confidence", "sensitivity", "created_at",
    "segment_kind", "embedding_model",
)  # fmt: skip

# A segment kind outside the vocabulary (a row written around the API) cannot be budgeted:
# like any unknown value it fails closed rather than failing the whole recall.
FAIL_CLOSED = (
    "{m}lifecycle_status = 'active' AND {m}is_current"
    " AND ({m}expires_at IS NULL OR {m}expires_at > {now})"
    " AND {m}consent_policy <> 'withdrawn'"
    " AND {m}segment_kind IN (" + ", ".join(f"'{kind}'" for kind in SEGMENT_KINDS) + ")"
)

# Which fail-closed rule a row breaks, asked only once FAIL_CLOSED itself said "no".
FAIL_CLOSED_WHY = (
    "CASE WHEN {m}lifecycle_status <> 'active' THEN 'status_not_active'"
    " WHEN NOT {m}is_current THEN 'not_current'"
    " WHEN {m}consent_policy = 'withdrawn' THEN 'consent_withdrawn'"
    " WHEN {m}expires_at <= {now} THEN 'expired'"
    " ELSE 'lifecycle_excluded' END"
)

# A memory not embedded yet (its embedding job has not run) or embedded by another embedder
# (RECALL_EMBEDDER changed; the re-embed sweep catches up) has no vector comparable with the
# query: counted as ``embedding_pending``, never listed, like lifecycle-excluded rows. The
# embedder's own name, or an earlier version's whose vectors it declares comparable
# (``recall.runtime.recallable_models``), makes a memory recallable.
EMBEDDED = "{m}embedding_model = ANY({models})"

# ``confidenceMin`` holds inferred and observed memories only (``CONFIDENCE_GATED``, seed
# 001); every other confirmation status passes it whatever its confidence. A NULL confirmation
# status or confidence still fails it: the IS NOT NULL tests keep ``NOT IN`` and ``OR`` from
# turning a NULL into a pass.
CONFIDENCE_CHECK = (
    "{m}confirmation_status IS NOT NULL AND {m}confidence IS NOT NULL"
    " AND ({m}confirmation_status NOT IN ("
    + ", ".join(f"'{status}'" for status in CONFIDENCE_GATED)
    + ") OR {m}confidence >= {confidence_min})"
)

# The policy's axes in the order their decision codes are reported. NULLs never pass
# (``= ANY`` and ``>=`` yield NULL, which is not true).
POLICY_CHECKS: tuple[tuple[str, str], ...] = (
    ("memory_type_not_allowed", "{m}memory_type = ANY({memory_types})"),
    ("source_kind_not_allowed", "{m}source_kind = ANY({source_kinds})"),
    ("confirmation_status_not_allowed", "{m}confirmation_status = ANY({confirmations})"),
    ("confidence_below_min", CONFIDENCE_CHECK),
    ("sensitivity_above_ceiling", "{m}sensitivity = ANY({sensitivities})"),
    ("consent_not_allowed", "{m}consent_policy = ANY({consents})"),
    (
        "older_than_max_age",
        "({min_created}::timestamptz IS NULL OR {m}created_at >= {min_created})",
    ),
)
AXES = " AND ".join(f"({check})" for _, check in POLICY_CHECKS)

# ``similarityMin``, on a ranked row's cosine distance to the query (``{m}distance``: the
# relation that ranks carries it). The similarity it compares is the one recall reports,
# ``SIMILARITY``, so a row shown at the floor's value passed it. Nearest rows come first, so
# the rows that pass are a prefix of the ranking: "the nearest rows that pass" is "the nearest
# rows, those that pass". A null floor lets every row through.
SIMILARITY = "COALESCE(1 - {m}distance, 0)"
SIMILARITY_CODE = "similarity_below_min"
SIMILARITY_CHECK = f"({{similarity_min}}::float8 IS NULL OR {SIMILARITY} >= {{similarity_min}})"

# Every policy decision code, in the order recall reports them.
POLICY_CODES = (*(code for code, _ in POLICY_CHECKS), SIMILARITY_CODE)


def _decision(fail_closed_code: str) -> str:
    whens = " ".join(
        f"WHEN NOT COALESCE({check}, false) THEN '{code}'" for code, check in POLICY_CHECKS
    )
    return (
        f"CASE WHEN NOT ({FAIL_CLOSED}) THEN {fail_closed_code}"
        f" WHEN NOT COALESCE({EMBEDDED}, false) THEN 'embedding_pending' {whens}"
        " ELSE 'passes_policy' END"
    )


Part = Literal[
    "recallable", "admitted", "axes", "decision", "decision_explained", "similarity", "above_floor"
]

PARTS: dict[str, str] = {
    # the ranking's WHERE: every rule
    "recallable": f"{FAIL_CLOSED} AND {EMBEDDED} AND {AXES}",
    # the rules no policy changes (a floor's impact compares policies over these rows)
    "admitted": f"{FAIL_CLOSED} AND {EMBEDDED}",
    # the policy's axes alone, false rather than NULL
    "axes": f"COALESCE(({AXES}), false)",
    # the funnel's decision code: the first rule a row breaks, else ``passes_policy``
    "decision": _decision("'lifecycle_excluded'"),
    # the memory browser's: the same, naming the fail-closed rule a row breaks
    "decision_explained": _decision(FAIL_CLOSED_WHY),
    # a ranked row's similarity to the query, as recall reports it
    "similarity": SIMILARITY,
    # whether a ranked row passes the similarity floor (true without one)
    "above_floor": SIMILARITY_CHECK,
}


# The parts over a ranked row's distance to the query rather than the memory table's columns.
RANKING_PARTS: tuple[Part, ...] = ("similarity", "above_floor")


def _compile(template: str, *, alias: str, suffix: str | None) -> tuple[str, list[str]]:
    """The template as SQL, and the parameter names in the order they appear: named
    placeholders (``%(now{suffix})s``), or positional ones (``%s``) when ``suffix`` is None."""
    out: list[str] = []
    names: list[str] = []
    for literal, field, _, _ in Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        if field == "m":
            out.append(f"{alias}.")
            continue
        names.append(field)
        out.append("%s" if suffix is None else f"%({field}{suffix})s")
    return "".join(out), names


def policy_filter_sql(part: Part, *, alias: str = "m", suffix: str = "") -> str:
    """One part of the filter with named placeholders, to bind with
    ``policy_params(policy, now, suffix=suffix)``: a suffix lets many policies share one
    statement."""
    return _compile(PARTS[part], alias=alias, suffix=suffix)[0]


def policy_params(policy: PolicyDocument, now: datetime, *, suffix: str = "") -> dict[str, Any]:
    """The values the filter binds for ``policy`` at ``now`` (and the funnel cache keys on)."""
    ceiling = SENSITIVITY_ORDER.index(policy["sensitivityCeiling"])
    max_age = policy["maxAgeSeconds"]
    values = {
        "now": now,
        "memory_types": list(policy["memoryTypeAllowed"]),
        "source_kinds": list(policy["sourceKindAllowed"]),
        "confirmations": list(policy["confirmationStatusAllowed"]),
        "confidence_min": float(policy["confidenceMin"]),
        "sensitivities": list(SENSITIVITY_ORDER[: ceiling + 1]),
        "consents": list(policy["consentPolicyAllowed"]),
        "min_created": now - timedelta(seconds=max_age) if max_age is not None else None,
        "max_age_seconds": max_age,
        # checked when ranking (SIMILARITY_CHECK), never by the funnel
        "similarity_min": policy["similarityMin"],
        # the names of the vectors recall compares with the query's (EMBEDDED)
        "models": recallable_models(),
    }
    return {f"{name}{suffix}": value for name, value in values.items()}


def compile_policy_filter(
    policy: PolicyDocument, now: datetime, *, part: Part, alias: str = "m", suffix: str = ""
) -> tuple[str, dict[str, Any]]:
    """One part of the filter for ``policy`` at ``now``: its SQL and its named parameters."""
    return policy_filter_sql(part, alias=alias, suffix=suffix), policy_params(
        policy, now, suffix=suffix
    )


def policy_filter_expression(
    policy: PolicyDocument, now: datetime, *, part: Part, model: type[Model]
) -> RawSQL:
    """One part of the filter as an ORM expression over ``model``'s table (the ORM composes
    positional parameters only, and names the base table by its own name)."""
    alias = connection.ops.quote_name(model._meta.db_table)
    sql, names = _compile(PARTS[part], alias=alias, suffix=None)
    values = policy_params(policy, now)
    output: Field[Any, Any] = CharField() if part.startswith("decision") else BooleanField()
    return RawSQL(sql, [values[name] for name in names], output_field=output)
