"""The policy algebra, in plain Python (no Django).

A policy is a flat JSON object of *axes*. The workspace policy is the operator floor: every
axis set. A workload policy may only narrow it, and a request override may only touch the axes
the floor marks relaxable, never past the floor. Everything here works on plain dicts so the
API, the UI and the recall engine all share one definition of "narrower". Where a later floor
and an older workload policy disagree beyond single axes, the floor wins (``narrow_settled``;
the rule is in ``policies.conflicts``), so an effective policy is always honourable.

Normalized form (what every function below expects and returns):
- set axes are sorted lists of unique labels,
- maps are ``{segmentKind: int}`` holding only the given keys,
- ``confidenceMin`` is a float, ``dropOrder`` keeps its order;
- ``similarityMin`` (an optional axis) is a float or None, and a complete document holds it
  even where the stored floor left it out (absent is None: no floor).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from policies import conflicts
from policies.axes import AXES, BUDGET_AXES, RECALL_AXES, Axis, PolicyDocument, is_complete
from policies.conflicts import Conflict

# Re-exported: callers read the vocabularies as ``algebra.SEGMENT_KINDS`` and so on.
from policies.vocabulary import SEGMENT_KINDS as SEGMENT_KINDS
from policies.vocabulary import SENSITIVITY_ORDER as SENSITIVITY_ORDER
from policies.vocabulary import VERBOSITY_ORDER as VERBOSITY_ORDER
from policies.vocabulary import VOCABULARIES as VOCABULARIES

# The canonical form lives on the ground floor (the audit chain hashes with it too).
from portal.canonical import canonical_json, sha256_hex

# --- error codes -------------------------------------------------------------------------------

INVALID_POLICY = "INVALID_POLICY"
WORKLOAD_RELAXES_OPERATOR_FLOOR = "WORKLOAD_RELAXES_OPERATOR_FLOOR"
USER_OVERRIDE_NOT_PERMITTED = "USER_OVERRIDE_NOT_PERMITTED"
BUDGET_NOT_HONOURABLE = "BUDGET_NOT_HONOURABLE"

# Stored beside the floor's axes, but not an axis: it says which axes a request may override.
RELAXABLE_KEY = "relaxableAxes"
# Field name used when the document as a whole is wrong (not an object).
DOCUMENT_FIELD = "document"


class PolicyError(Exception):
    """A policy is malformed or breaks a rule; ``code`` is stable, ``message`` is for people."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}


class _FieldError(Exception):
    """One axis value is malformed; the message goes to the user verbatim."""


# --- normalization -----------------------------------------------------------------------------


def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass in Python, but `true` is never a token count.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(values: Iterable[object]) -> str:
    return ", ".join(v if isinstance(v, str) else repr(v) for v in values)


def _vocabulary(axis: Axis) -> tuple[str, ...]:
    return VOCABULARIES[axis.vocabulary] if axis.vocabulary else ()


def _labels(value: object, axis: Axis, *, ordered: bool) -> list[str]:
    # Sets may arrive as Python sets from internal callers; an ordered list must be a sequence.
    containers = (list, tuple) if ordered else (list, tuple, set, frozenset)
    if not isinstance(value, containers):
        raise _FieldError("Expected a list of labels.")
    assert isinstance(value, (list, tuple, set, frozenset))  # for the type checker
    vocab = _vocabulary(axis)
    bad = [v for v in value if not isinstance(v, str) or v not in vocab]
    if bad:
        raise _FieldError(f"Unknown label(s): {_show(bad)}. Allowed: {', '.join(vocab)}.")
    return list(value)


def _norm_set(value: object, axis: Axis) -> list[str]:
    return sorted(set(_labels(value, axis, ordered=False)))


def _norm_ordered_list(value: object, axis: Axis) -> list[str]:
    labels = _labels(value, axis, ordered=True)
    repeated = sorted({v for v in labels if labels.count(v) > 1})
    if repeated:
        raise _FieldError(f"Segment kinds must not repeat: {', '.join(repeated)}.")
    return labels


def _norm_min_number(value: object, axis: Axis) -> float:
    if not _is_number(value) or not math.isfinite(value):
        raise _FieldError("Expected a number between 0 and 1.")
    if not 0 <= value <= 1:
        raise _FieldError(f"Must be between 0 and 1, got {value}.")
    return float(value)


def _norm_optional_min(value: object, axis: Axis) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value):
        raise _FieldError("Expected a number between 0 and 1, or null for no floor.")
    if not 0 <= value <= 1:
        raise _FieldError(f"Must be between 0 and 1 (or null for no floor), got {value}.")
    return float(value)


def _norm_ordered_max(value: object, axis: Axis) -> str:
    vocab = _vocabulary(axis)
    if not isinstance(value, str) or value not in vocab:
        raise _FieldError(f"Expected one of: {', '.join(vocab)}.")
    return value


# Bounds well past any real use, so later date and token arithmetic can never overflow.
MAX_AGE_SECONDS = 100 * 366 * 24 * 3600  # a century
MAX_TOKENS = 10**9


def _norm_max_age(value: object, axis: Axis) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or not 0 < value <= MAX_AGE_SECONDS:
        raise _FieldError(
            f"Expected a whole number of seconds from 1 to {MAX_AGE_SECONDS} (a century), "
            "or null for no limit."
        )
    return value


def _norm_max_int(value: object, axis: Axis) -> int:
    if not _is_int(value) or not 0 < value <= MAX_TOKENS:
        raise _FieldError(f"Expected a whole number of tokens from 1 to {MAX_TOKENS}.")
    return value


def _norm_map(value: object, axis: Axis) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise _FieldError("Expected an object mapping segment kinds to token counts.")
    unknown = [k for k in value if k not in SEGMENT_KINDS]
    if unknown:
        raise _FieldError(
            f"Unknown segment kind(s): {_show(unknown)}. Allowed: {', '.join(SEGMENT_KINDS)}."
        )
    bad = [k for k, v in value.items() if not _is_int(v) or not 0 <= v <= MAX_TOKENS]
    if bad:
        raise _FieldError(
            f"Token counts must be whole numbers from 0 to {MAX_TOKENS} (see {_show(bad)})."
        )
    return {k: value[k] for k in sorted(value)}


_NORMALIZERS: dict[str, Callable[[object, Axis], Any]] = {
    "set": _norm_set,
    "superset": _norm_set,
    "min_number": _norm_min_number,
    "optional_min": _norm_optional_min,
    "ordered_max": _norm_ordered_max,
    "max_age": _norm_max_age,
    "max_int": _norm_max_int,
    "ceiling_map": _norm_map,
    "reservation_map": _norm_map,
    "ordered_list": _norm_ordered_list,
}


def _invalid(fields: dict[str, str]) -> PolicyError:
    return PolicyError(
        INVALID_POLICY,
        f"The policy is not valid: {', '.join(fields)}.",
        {"fields": fields},
    )


def _not_an_object() -> PolicyError:
    return _invalid({DOCUMENT_FIELD: "A policy must be a JSON object of axes."})


def normalize_document(doc: object, *, partial: bool) -> dict[str, Any]:
    """Validate every axis of ``doc`` and return a normalized copy in registry order.

    All field errors are collected so a form can show them at once. With ``partial=False``
    every axis must be present (a floor or a merged effective policy), except an optional
    one, which is then None.
    """
    if not isinstance(doc, Mapping):
        raise _not_an_object()
    fields = {str(key): "Unknown axis." for key in doc if key not in AXES}
    result: dict[str, Any] = {}
    for name, axis in AXES.items():
        if name not in doc:
            if partial:
                continue
            if axis.optional:
                result[name] = None
            else:
                fields[name] = "This axis is required."
            continue
        try:
            result[name] = _NORMALIZERS[axis.kind](doc[name], axis)
        except _FieldError as exc:
            fields[name] = str(exc)
    if fields:
        raise _invalid(fields)
    return result


def _normalize_relaxable(value: object) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise _FieldError("Expected a list of axis names.")
    unknown = [v for v in value if not isinstance(v, str) or v not in AXES]
    if unknown:
        raise _FieldError(f"Unknown axis name(s): {_show(unknown)}.")
    return sorted(set(value))


def normalize_floor(doc: object) -> tuple[PolicyDocument, list[str]]:
    """Validate a workspace floor (all axes, plus optional ``relaxableAxes``).

    Returns ``(floor without relaxableAxes, sorted relaxable axis names)``. The floor must also
    be an honourable budget, since every effective policy starts from it.
    """
    if not isinstance(doc, Mapping):
        raise _not_an_object()
    fields: dict[str, str] = {}
    normalized: dict[str, Any] = {}
    relaxable: list[str] = []
    try:
        normalized = normalize_document(
            {k: v for k, v in doc.items() if k != RELAXABLE_KEY}, partial=False
        )
    except PolicyError as exc:
        fields.update(exc.details["fields"])
    try:
        relaxable = _normalize_relaxable(doc.get(RELAXABLE_KEY, []))
    except _FieldError as exc:
        fields[RELAXABLE_KEY] = str(exc)
    if fields:
        raise _invalid(fields)
    assert is_complete(normalized)  # partial=False required every axis
    validate_budget(normalized)
    return normalized, relaxable


def floor_document(document: Mapping[str, Any], relaxable: Iterable[str]) -> dict[str, Any]:
    """A floor and its ``relaxableAxes`` as one document (versioned, diffed and saved together).

    An optional axis the stored floor left out (saved before the axis existed) is there, at
    None: absent and null are the same floor, so saving it again changes nothing."""
    absent = {name: None for name, axis in AXES.items() if axis.optional and name not in document}
    return {**document, **absent, RELAXABLE_KEY: list(relaxable)}


# --- budget validation -------------------------------------------------------------------------


def _reservation_problems(policy: Mapping[str, Any], forbidden: set[str]) -> list[str]:
    reservations: Mapping[str, int] = policy.get("perSegmentReservation", {})
    ceilings: Mapping[str, int] = policy.get("perSegmentCeiling", {})
    problems = [
        f"The reservation for {kind} ({value}) is above its ceiling ({ceilings[kind]})."
        for kind, value in sorted(reservations.items())
        if kind in ceilings and value > ceilings[kind]
    ]
    # Forbidden kinds are given 0 tokens, so what they reserve is never actually set aside.
    counted = sum(v for k, v in reservations.items() if k not in forbidden)
    total = policy.get("totalTokenBudget")
    if total is not None and counted > total:
        problems.append(
            f"Reservations add up to {counted} tokens, more than the totalTokenBudget of {total}."
        )
    return problems


def validate_budget(policy: Mapping[str, Any]) -> None:
    """Reject a full policy whose budget the planner could not honour."""
    fields: dict[str, str] = {}
    pinned = set(policy.get("pinned", []))
    forbidden = set(policy.get("forbiddenSegmentKinds", []))
    clash = sorted(pinned & forbidden)
    if clash:
        message = f"Segment kinds cannot be both pinned and forbidden: {', '.join(clash)}."
        fields["pinned"] = message
        fields["forbiddenSegmentKinds"] = message
    problems = _reservation_problems(policy, forbidden)
    if problems:
        fields["perSegmentReservation"] = " ".join(problems)
    if fields:
        raise PolicyError(
            BUDGET_NOT_HONOURABLE,
            f"The token budget cannot be honoured: {', '.join(fields)}.",
            {"fields": fields},
        )


# --- "narrower than" ---------------------------------------------------------------------------


def _rank(axis: Axis, label: str) -> int:
    return _vocabulary(axis).index(label)


def _age_bound(value: int | None) -> float:
    # null means "no bound", which is the widest possible value.
    return math.inf if value is None else value


def _min_bound(value: float | None) -> float:
    # null means "no floor", the widest: below any number.
    return -math.inf if value is None else value


def floor_value(document: Mapping[str, Any], name: str) -> Any:
    """An axis of a stored document: an optional axis left out is None (no bound); any other
    missing axis is a broken document (``KeyError``)."""
    if name not in document and AXES[name].optional:
        return None
    return document[name]


def _ceilings_relax(floor_caps: Mapping[str, int], caps: Mapping[str, int]) -> bool:
    # Dropping a cap the floor has is relaxing; adding a cap the floor lacks is narrowing.
    return any(kind not in caps or caps[kind] > cap for kind, cap in floor_caps.items())


_RELAXES: dict[str, Callable[[Axis, Any, Any], bool]] = {
    "set": lambda axis, floor, value: not set(value) <= set(floor),
    "superset": lambda axis, floor, value: not set(value) >= set(floor),
    "min_number": lambda axis, floor, value: value < floor,
    "optional_min": lambda axis, floor, value: _min_bound(value) < _min_bound(floor),
    "ordered_max": lambda axis, floor, value: _rank(axis, value) > _rank(axis, floor),
    "max_age": lambda axis, floor, value: _age_bound(value) > _age_bound(floor),
    "max_int": lambda axis, floor, value: value > floor,
    "ceiling_map": lambda axis, floor, value: _ceilings_relax(floor, value),
    # A tuning axis: any order is as safe as any other.
    "ordered_list": lambda axis, floor, value: False,
}


def _reservations_relax(floor: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    """Floor-pinned kinds may not reserve less; other kinds must fit their effective ceiling.

    "Pinned" means pinned by the floor: a kind pinned only by the workload carries no operator
    guarantee, and judging it against the floor's reservation would make narrowing
    non-transitive.
    """
    ceilings = _narrow_ceilings(floor["perSegmentCeiling"], workload.get("perSegmentCeiling"))
    floor_reservations = floor["perSegmentReservation"]
    reservations = workload["perSegmentReservation"]
    pinned = set(floor["pinned"])
    for kind in SEGMENT_KINDS:
        value = reservations.get(kind, 0)
        if kind in pinned:
            if value < floor_reservations.get(kind, 0):
                return True
        elif kind in ceilings and value > ceilings[kind]:
            return True
    return False


def _axis_relaxes(axis: Axis, floor: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    if axis.kind == "reservation_map":
        return _reservations_relax(floor, workload)
    return _RELAXES[axis.kind](axis, floor_value(floor, axis.name), workload[axis.name])


def check_workload(floor: Mapping[str, Any], workload: Mapping[str, Any]) -> list[str]:
    """Axes (registry order) where the partial ``workload`` is wider than the full ``floor``."""
    return [
        name
        for name, axis in AXES.items()
        if name in workload and _axis_relaxes(axis, floor, workload)
    ]


def validate_workload(floor: Mapping[str, Any], doc: object) -> dict[str, Any]:
    """Normalize a raw workload document and reject it if it relaxes the floor.

    Also rejects a workload whose narrowed budget cannot be honoured. Returns the normalized
    partial document, ready to be stored.
    """
    workload = normalize_document(doc, partial=True)
    relaxed = check_workload(floor, workload)
    if relaxed:
        raise PolicyError(
            WORKLOAD_RELAXES_OPERATOR_FLOOR,
            f"The workload policy relaxes the operator floor on: {', '.join(relaxed)}.",
            {"axes": relaxed, "floor": {name: copy.deepcopy(floor[name]) for name in relaxed}},
        )
    # Judge the document as written: the settling that keeps old, already-stored policies
    # honourable after a floor change must not let a new save overcommit.
    validate_budget(narrow(floor, workload, as_written=True))
    return workload


# --- narrowing ---------------------------------------------------------------------------------


def _narrow_ceilings(
    floor_caps: Mapping[str, int], caps: Mapping[str, int] | None
) -> dict[str, int]:
    # Per-kind minimum; a floor cap the workload leaves out is kept, never lifted.
    merged = dict(floor_caps)
    for kind, cap in (caps or {}).items():
        merged[kind] = min(cap, merged.get(kind, cap))
    return {kind: merged[kind] for kind in sorted(merged)}


def _narrow_age(floor: int | None, value: int | None) -> int | None:
    bounds = [v for v in (floor, value) if v is not None]
    return min(bounds) if bounds else None


def _narrow_optional_min(floor: float | None, value: float | None) -> float | None:
    bounds = [float(v) for v in (floor, value) if v is not None]
    return max(bounds) if bounds else None


def _lower(axis: Axis, floor: str, value: str) -> str:
    return min(floor, value, key=lambda label: _rank(axis, label))


_NARROW: dict[str, Callable[[Axis, Any, Any], Any]] = {
    "set": lambda axis, floor, value: sorted(set(floor) & set(value)),
    "superset": lambda axis, floor, value: sorted(set(floor) | set(value)),
    "min_number": lambda axis, floor, value: float(max(floor, value)),
    "optional_min": lambda axis, floor, value: _narrow_optional_min(floor, value),
    "ordered_max": _lower,
    "max_age": lambda axis, floor, value: _narrow_age(floor, value),
    "max_int": lambda axis, floor, value: min(floor, value),
    "ceiling_map": lambda axis, floor, value: _narrow_ceilings(floor, value),
    "ordered_list": lambda axis, floor, value: list(value),
}


def _narrow_reservations(
    floor: Mapping[str, Any], workload: Mapping[str, Any], ceilings: Mapping[str, int]
) -> dict[str, int]:
    floor_reservations: Mapping[str, int] = floor["perSegmentReservation"]
    source: Mapping[str, int] = workload.get("perSegmentReservation", floor_reservations)
    pinned = set(floor["pinned"])
    # A floor-pinned reservation survives even if the workload's map leaves its kind out.
    kinds = set(source) | {k for k in pinned if floor_reservations.get(k, 0) > 0}
    result: dict[str, int] = {}
    for kind in sorted(kinds):
        value = source.get(kind, 0)
        if kind in pinned:
            result[kind] = max(value, floor_reservations.get(kind, 0))
        else:
            result[kind] = min(value, ceilings.get(kind, value))
    return result


def _narrow_axes(floor: Mapping[str, Any], workload: Mapping[str, Any]) -> PolicyDocument:
    """Axis by axis: every workload axis applied, clamped so that it never passes the floor."""
    result: dict[str, Any] = {}
    for name, axis in AXES.items():
        if axis.kind == "reservation_map":
            continue  # needs the narrowed ceilings, filled in below
        if name in workload:
            result[name] = _NARROW[axis.kind](axis, floor_value(floor, name), workload[name])
        else:
            result[name] = copy.deepcopy(floor_value(floor, name))
    result["perSegmentReservation"] = _narrow_reservations(
        floor, workload, result["perSegmentCeiling"]
    )
    document = {name: result[name] for name in AXES}
    assert is_complete(document)
    return document


def narrow_settled(
    floor: Mapping[str, Any], workload: Mapping[str, Any]
) -> tuple[PolicyDocument, list[Conflict]]:
    """The effective policy of a workload (no override) and its conflicts with the floor.

    Two stages. Axis by axis, each workload axis is applied and clamped to the floor (a wider
    value gives way to the floor's: ``check_workload`` reports it). Then, where the axes
    together disagree with the floor (a later floor forbids a kind the workload pins, raises a
    pinned reservation past the workload's ceiling or total, ...), the floor wins: see
    ``policies.conflicts.settle`` for the exact rule and the conflict codes. The result is
    always within the floor and honourable, whatever the floor later becomes.
    """
    return conflicts.settle(floor, _narrow_axes(floor, workload))


def narrow(
    floor: Mapping[str, Any], workload: Mapping[str, Any], *, as_written: bool = False
) -> PolicyDocument:
    """The floor narrowed by ``workload``: ``narrow_settled`` without its conflicts.

    ``as_written=True`` stops after the axis-by-axis stage, so a save can judge the document
    as written: what keeps old, already-stored policies honourable after a floor change must
    not let a new save overcommit its budget or pin a forbidden kind.

    Clamping (rather than rejecting) matters when the floor is narrowed after a workload
    policy was saved: the old workload must not reopen what the operator closed.
    """
    if as_written:
        return _narrow_axes(floor, workload)
    return narrow_settled(floor, workload)[0]


def floor_conflicts(floor: Mapping[str, Any], workload: Mapping[str, Any]) -> list[Conflict]:
    """Where the floor overrules the workload policy beyond clamping single axes."""
    return narrow_settled(floor, workload)[1]


def narrow_to_floor(floor: Mapping[str, Any], workload: Mapping[str, Any]) -> dict[str, Any]:
    """The workload document that "narrow to floor" saves: within the floor, honourable.

    Every axis the workload sets, plus every axis a conflict changed, at its effective value,
    so that the document narrows the floor to exactly the effective policy of today and
    passes ``validate_workload``.
    """
    effective, found = narrow_settled(floor, workload)
    axes = set(workload) | {conflict.axis for conflict in found}
    values: Mapping[str, Any] = effective  # read by axis name
    return {name: values[name] for name in AXES if name in axes}


# --- overrides and the effective policy --------------------------------------------------------


def _not_permitted(axes: list[str], message: str) -> PolicyError:
    return PolicyError(USER_OVERRIDE_NOT_PERMITTED, message, {"axes": axes})


def apply_override(
    floor: Mapping[str, Any],
    workload: Mapping[str, Any],
    override: object,
    relaxable: Iterable[str],
) -> PolicyDocument:
    """Effective policy with a raw request override replacing the workload's relaxable axes.

    The stored workload policy is first narrowed to the floor (its conflicts settled, so an
    older policy never fails a request that does not touch them); the override then replaces
    the axes it names and is judged as written: a budget it makes un-honourable is refused
    with ``BUDGET_NOT_HONOURABLE``, not settled. One exception, as after a floor change: an
    override that leaves ``perSegmentReservation`` alone may lower the total below the stored
    policy's reservation raises, which are then given back.
    """
    normalized = normalize_document(override, partial=True)
    allowed = set(relaxable)
    locked = [name for name in normalized if name not in allowed]
    if locked:
        raise _not_permitted(
            locked, f"These axes may not be overridden by a request: {', '.join(locked)}."
        )
    merged = {**narrow_to_floor(floor, workload), **normalized}
    # Judge in the merged context: a reservation is checked against the effective ceiling.
    past = [name for name in check_workload(floor, merged) if name in normalized]
    if past:
        raise _not_permitted(
            past, f"The override goes past the operator floor on: {', '.join(past)}."
        )
    result, found = narrow_settled(floor, merged)
    # ``merged`` starts from a document without conflicts: any conflict now is the override's.
    # A conflict means the budget as written cannot be honoured, so this raises, naming fields.
    given_back = conflicts.RESERVATION_RAISE_GIVEN_BACK
    tolerated = set() if "perSegmentReservation" in normalized else {given_back}
    if any(conflict.code not in tolerated for conflict in found):
        validate_budget(narrow(floor, merged, as_written=True))
    return result


def effective_policy(
    floor: Mapping[str, Any],
    workload: Mapping[str, Any] | None,
    override: object | None,
    relaxable: Iterable[str],
) -> PolicyDocument:
    """Floor, narrowed by the (normalized) workload, then the raw override applied.

    Without an override this never raises: the floor wins every conflict (``narrow_settled``).
    """
    if override:
        return apply_override(floor, workload or {}, override, relaxable)
    return narrow(floor, workload or {})


# --- canonical form and hashes -----------------------------------------------------------------

# Kinds whose value is an unordered set of labels (sorted in normalized and canonical form).
_SET_KINDS = frozenset({"set", "superset"})
_MAP_KINDS = frozenset({"ceiling_map", "reservation_map"})


def _canonical_value(name: str, value: Any) -> Any:
    axis = AXES.get(name)
    if axis is None:
        return value
    if axis.kind in _SET_KINDS:
        return sorted(set(value))
    if axis.kind in ("min_number", "optional_min") and _is_number(value):
        # jsonb may return 1.0 as 1; both must hash alike.
        return float(value)
    if axis.kind in _MAP_KINDS:
        return dict(value)
    return value


def _left_out(name: str, value: Any) -> bool:
    """An optional axis at null is no bound, the same as absent: the canonical form leaves it
    out, so a policy hashes as it did before the axis existed."""
    axis = AXES.get(name)
    return axis is not None and axis.optional and value is None


def canonical_policy(policy: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with set axes sorted, numbers in one form and optional axes at null left out,
    so equal policies hash alike."""
    return {
        name: _canonical_value(name, value)
        for name, value in policy.items()
        if not _left_out(name, value)
    }


def policy_hashes(policy: Mapping[str, Any]) -> tuple[str, str]:
    """``(effectivePolicyHash, effectiveBudgetHash)`` over the recall and budget axes."""
    canonical = canonical_policy(policy)
    recall = {name: canonical[name] for name in RECALL_AXES if name in canonical}
    budget = {name: canonical[name] for name in BUDGET_AXES if name in canonical}
    return sha256_hex(recall), sha256_hex(budget)


# --- history and defaults ----------------------------------------------------------------------


def _same(name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    if (name in before) != (name in after):
        return False
    if name not in after:
        return True
    return canonical_json(_canonical_value(name, before[name])) == canonical_json(
        _canonical_value(name, after[name])
    )


def diff_documents(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """``{key: {"before", "after"}}`` for every changed key; axes first, in registry order.

    Keys other than axes (``relaxableAxes``) are compared too, since they are versioned with
    the floor. A key missing on one side shows as None there.
    """
    previous: Mapping[str, Any] = before or {}
    extra = sorted({*previous, *after} - set(AXES))
    keys = [name for name in AXES if name in previous or name in after] + extra
    return {
        key: {"before": previous.get(key), "after": after.get(key)}
        for key in keys
        if not _same(key, previous, after)
    }


def default_floor() -> PolicyDocument:
    """A sensible operator floor: recall everything consented, the seed's token budget."""
    consent = [c for c in VOCABULARIES["consentPolicy"] if c != "withdrawn"]
    floor = normalize_document(
        {
            "memoryTypeAllowed": list(VOCABULARIES["memoryType"]),
            "sourceKindAllowed": list(VOCABULARIES["sourceKind"]),
            "confirmationStatusAllowed": list(VOCABULARIES["confirmationStatus"]),
            "consentPolicyAllowed": consent,
            "confidenceMin": 0.0,
            "sensitivityCeiling": "confidential",
            "maxAgeSeconds": None,
            "similarityMin": None,
            "totalTokenBudget": 3200,
            "perSegmentCeiling": {"memory": 1200, "retrieval": 1200},
            "perSegmentReservation": {
                "system_policy": 500,
                "memory": 800,
                "retrieval": 900,
                "tool_result": 300,
            },
            "forbiddenSegmentKinds": [],
            "pinned": ["system_policy"],
            "dropOrder": ["tool_result", "retrieval", "memory"],
            "diagnosticsVerbosity": "summary",
        },
        partial=False,
    )
    assert is_complete(floor)
    return floor
