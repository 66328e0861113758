"""Policy forms: HTML form fields ⇄ policy documents, and domain errors → field errors.

The axis registry (``algebra.AXES``) decides which inputs each axis gets, so a new axis shows
up in the forms without template changes. Parsing here only turns strings into JSON-like
values (numbers, lists, maps); every rule — vocabularies, ranges, narrowing, budgets — stays
in the algebra and the services, and their errors come back through ``add_error``.

Input names: ``ax-<axis>`` (``ax-<axis>-<kind>`` for maps, ``ax-dropOrder-<position>`` for
the ordered list, ``ax-maxAgeSeconds`` an amount with ``ax-maxAgeSeconds-unit`` its unit —
``day``, ``hour``, ``minute`` or ``second``, seconds when left out — converted to the
seconds the policy stores), ``mode-<axis>`` = ``inherit`` | ``set`` on workload forms, ``relaxable``
(one checkbox per axis) on the floor form, ``comment``, and the hidden ``base_version``: the
version the form was opened at, so that a save over someone else's newer one is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from policies.algebra import (
    AXES,
    DOCUMENT_FIELD,
    MAX_AGE_SECONDS,
    RELAXABLE_KEY,
    SEGMENT_KINDS,
    VOCABULARIES,
    WORKLOAD_RELAXES_OPERATOR_FLOOR,
    Axis,
    PolicyError,
)
from policies.algebra import floor_document as floor_document  # re-exported for the views
from policies.labels import DURATION_UNITS, axis_hint, axis_label, axis_value, value_label
from policies.services import change_comment
from portal.errors import DomainError, ValidationFailed
from portal.versioning import NO_VERSION, parse_base_version

# Which widget each axis kind gets.
WIDGETS = {
    "set": "checks",
    "superset": "checks",
    "min_number": "number",
    "max_int": "number",
    "max_age": "duration",
    "ordered_max": "select",
    "ceiling_map": "map",
    "reservation_map": "map",
    "ordered_list": "order",
}

POSITION_NAMES = ("1st", "2nd", "3rd", "4th", "5th", "6th")
UNIT_SIZES: dict[str, int] = dict(DURATION_UNITS)
UNIT_SUFFIX = "-unit"
BASE_VERSION_FIELD = "base_version"


# --- showing values ----------------------------------------------------------------------------
# Values read the same on every page: ``policies.labels.axis_value`` formats them all.


@dataclass(frozen=True)
class DiffRow:
    axis: str
    before: str
    after: str


def diff_rows(
    diff: Mapping[str, Mapping[str, Any]],
    *,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    missing: str = "—",
) -> list[DiffRow]:
    """``algebra.diff_documents`` output as rows of readable strings.

    Given the two documents, an axis absent from one side reads as ``missing`` (for a
    workload policy: "inherits floor") rather than as a null value such as "no limit".
    """

    def side(name: str, value: Any, document: Mapping[str, Any] | None) -> str:
        if document is not None and name not in document:
            return missing
        return axis_value(name, value)

    return [
        DiffRow(
            name,
            side(name, change.get("before"), before),
            side(name, change.get("after"), after),
        )
        for name, change in diff.items()
    ]


# --- domain errors -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldError:
    field: str  # an axis, "comment" or "relaxableAxes"; "" for the policy as a whole
    message: str
    relaxes: bool = False  # WORKLOAD_RELAXES_OPERATOR_FLOOR on this axis


def domain_errors(
    exc: PolicyError | DomainError, *, floor: Mapping[str, Any] | None = None
) -> list[FieldError]:
    """A service's or the algebra's error as messages, each on the form field it names.

    ``floor`` supplies the floor value for a relaxed axis the error's details leave out.
    """
    details = exc.details or {}
    if exc.code == WORKLOAD_RELAXES_OPERATOR_FLOOR:
        named = details.get("floor", {})
        fallback = floor or {}
        return [
            FieldError(
                name,
                f"{WORKLOAD_RELAXES_OPERATOR_FLOOR}: wider than the operator floor "
                f"(floor: {axis_value(name, named.get(name, fallback.get(name)))}).",
                relaxes=True,
            )
            for name in details.get("axes", [])
        ] or [FieldError("", exc.message)]
    errors = []
    for name, message in (details.get("fields") or {}).items():
        if name in AXES or name in {"comment", RELAXABLE_KEY}:
            errors.append(FieldError(name, str(message)))
        elif name == DOCUMENT_FIELD:
            errors.append(FieldError("", str(message)))
        else:
            errors.append(FieldError("", f"{name}: {message}"))
    return errors or [FieldError("", exc.message)]


def field_name(name: str) -> str:
    """A field as an error shown away from it names it: its label, then the API name."""
    label = axis_label(name)
    return label if label == name else f"{label} ({name})"


def domain_error_lines(exc: PolicyError | DomainError) -> list[str]:
    """``domain_errors`` as lines of a list shown away from the form (each names its field)."""
    return [
        f"{field_name(e.field)}: {e.message}" if e.field else e.message for e in domain_errors(exc)
    ]


# --- the bound form ----------------------------------------------------------------------------


@dataclass
class Choice:
    value: str
    label: str
    selected: bool


@dataclass
class MapEntry:
    kind: str
    value: str
    input_name: str


@dataclass
class Position:
    label: str
    input_name: str
    choices: list[Choice]


@dataclass
class BoundAxis:
    """Everything the template needs to render one axis: no lookups left to do there."""

    axis: Axis
    widget: str
    included: bool  # floor: always; workload: "set for this workload" rather than inherit
    value: str = ""  # number inputs
    choices: list[Choice] = field(default_factory=list)  # checks and select
    entries: list[MapEntry] = field(default_factory=list)  # maps
    positions: list[Position] = field(default_factory=list)  # dropOrder
    units: list[Choice] = field(default_factory=list)  # duration: the amount's unit
    error: str = ""
    relaxes: bool = False  # the error is WORKLOAD_RELAXES_OPERATOR_FLOOR
    relaxable: bool = False  # floor only
    floor_display: str = ""  # workload only
    display: str = ""  # read-only rendering of the current value

    @property
    def name(self) -> str:
        return self.axis.name

    @property
    def input_name(self) -> str:
        return f"ax-{self.axis.name}"

    @property
    def unit_input_name(self) -> str:
        return f"{self.input_name}{UNIT_SUFFIX}"

    @property
    def label(self) -> str:
        return axis_label(self.axis.name)

    @property
    def hint(self) -> str:
        return axis_hint(self.axis.name)

    @property
    def number_attrs(self) -> dict[str, str]:
        if self.axis.kind == "min_number":
            return {"min": "0", "max": "1", "step": "0.01"}
        if self.axis.kind == "max_age":
            return {"min": "0", "step": "any"}
        return {"min": "1", "step": "1"}


def _labels(axis: Axis) -> tuple[str, ...]:
    return VOCABULARIES[axis.vocabulary] if axis.vocabulary else ()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class _ParseError(Exception):
    pass


def _parse_number(raw: str, axis: Axis) -> Any:
    raw = raw.strip()
    if axis.kind == "max_age" and raw == "":
        return None
    if raw == "":
        raise _ParseError("Enter a value.")
    if axis.kind == "min_number":
        try:
            return float(raw)
        except ValueError:
            raise _ParseError("Enter a number between 0 and 1.") from None
    try:
        return int(raw)
    except ValueError:
        raise _ParseError("Enter a whole number.") from None


def _duration_parts(seconds: Any) -> tuple[str, str]:
    """Stored seconds as the form shows them: the largest unit that holds them exactly."""
    if seconds is None:
        return "", "day"
    for unit, size in DURATION_UNITS:
        if seconds % size == 0:
            return str(seconds // size), unit
    return str(seconds), "second"  # unreachable: every whole number is whole seconds


def _parse_duration(data: Mapping[str, Any], axis: Axis) -> int | None:
    """An amount and its unit as seconds; empty is no limit. The algebra checks the range,
    but an amount past it is refused here, before turning, say, 1e9999 days into seconds."""
    name = f"ax-{axis.name}"
    raw = str(data.get(name, "")).strip()
    unit = str(data.get(f"{name}{UNIT_SUFFIX}", "second"))
    size = UNIT_SIZES.get(unit)
    if size is None:
        raise _ParseError("Choose days, hours, minutes or seconds.")
    if raw == "":
        return None
    try:
        amount = Decimal(raw)
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite():
        raise _ParseError(f"Enter a number of {unit}s, or leave it empty for no limit.")
    if amount <= 0:
        raise _ParseError("Enter a duration above zero, or leave it empty for no limit.")
    if amount * size > MAX_AGE_SECONDS:
        raise _ParseError(f"At most a century ({axis_value(axis.name, MAX_AGE_SECONDS)}).")
    seconds = amount * size
    if seconds != seconds.to_integral_value():
        raise _ParseError(f"{raw} {unit}s is not a whole number of seconds: use a smaller unit.")
    return int(seconds)


def _parse_map(data: Mapping[str, Any], axis: Axis) -> dict[str, int]:
    result: dict[str, int] = {}
    bad = []
    for kind in SEGMENT_KINDS:
        raw = str(data.get(f"ax-{axis.name}-{kind}", "")).strip()
        if raw == "":
            continue  # a kind left out: no cap / no reservation
        try:
            result[kind] = int(raw)
        except ValueError:
            bad.append(kind)
    if bad:
        raise _ParseError(f"Enter whole numbers of tokens (see {', '.join(bad)}).")
    return result


def _base_version(text: str) -> int | None:
    """The submitted base version; None when the page sent none (or a damaged one)."""
    try:
        return parse_base_version(text) if text else None
    except ValueError:
        return None


class PolicyForm:
    """A floor (``partial=False``) or workload (``partial=True``) policy form.

    ``initial`` is the stored document the form starts from, ``version`` its version (0: none
    saved yet); ``data`` a submitted QueryDict. After ``is_valid()``, ``document`` is the raw
    document and ``base_version`` the version it was based on (None: the page sent none), to
    hand to a service or the algebra.
    """

    def __init__(
        self,
        *,
        initial: Mapping[str, Any],
        partial: bool,
        data: Any = None,
        relaxable: list[str] | None = None,
        floor: Mapping[str, Any] | None = None,
        version: int = NO_VERSION,
    ) -> None:
        self.initial = dict(initial)
        self.partial = partial
        self.data = data
        self.floor = dict(floor or {})
        self.initial_relaxable = list(relaxable or [])
        self.errors: dict[str, str] = {}
        self.relaxing: list[str] = []
        self.non_field_errors: list[str] = []
        self.document: dict[str, Any] = {}
        self.comment = str(data.get("comment", "")) if data is not None else ""
        self.base_version: int | None = version
        self.base_version_text = str(version)  # the hidden field's value
        if data is not None:
            self.base_version_text = str(data.get(BASE_VERSION_FIELD, "")).strip()
            self.base_version = _base_version(self.base_version_text)

    def rebase(self, version: int) -> None:
        """Base the next submission on ``version``, once the page has shown what changed."""
        self.base_version = version
        self.base_version_text = str(version)

    @property
    def is_bound(self) -> bool:
        return self.data is not None

    # parsing

    def _included(self, name: str) -> bool:
        if not self.partial:
            return True
        if self.data is None:
            return name in self.initial
        return self.data.get(f"mode-{name}") == "set"

    def _parse(self, axis: Axis) -> Any:
        data = self.data
        widget = WIDGETS[axis.kind]
        if widget == "checks":
            return data.getlist(f"ax-{axis.name}")
        if widget == "select":
            return data.get(f"ax-{axis.name}", "")
        if widget == "number":
            return _parse_number(str(data.get(f"ax-{axis.name}", "")), axis)
        if widget == "duration":
            return _parse_duration(data, axis)
        if widget == "map":
            return _parse_map(data, axis)
        positions = [str(data.get(f"ax-{axis.name}-{i}", "")) for i in range(len(SEGMENT_KINDS))]
        return [p for p in positions if p]

    def is_valid(self) -> bool:
        if self.data is None:
            return False
        document: dict[str, Any] = {}
        for name, axis in AXES.items():
            if not self._included(name):
                continue
            try:
                document[name] = self._parse(axis)
            except _ParseError as exc:
                self.errors[name] = str(exc)
        if not self.partial:
            document[RELAXABLE_KEY] = [a for a in self.data.getlist("relaxable") if a in AXES]
        try:
            change_comment(self.comment)  # the service's rule, reported with the other fields
        except ValidationFailed as exc:
            self.errors["comment"] = exc.details["fields"]["comment"]
        if self.base_version_text and self.base_version is None:
            self.errors[BASE_VERSION_FIELD] = (
                "This form's version field was damaged, so it cannot tell whether someone saved "
                "since it was opened: reload the page and make the change again."
            )
        self.document = document
        return not self.errors

    @property
    def error_labels(self) -> list[str]:
        """The fields with an error, named as the page names them, in the form's order."""
        others = {RELAXABLE_KEY: axis_label(RELAXABLE_KEY), "comment": "Change comment"}
        names = {**{name: axis_label(name) for name in AXES}, **others}
        return [label for name, label in names.items() if name in self.errors]

    @property
    def relaxing_labels(self) -> list[str]:
        return [axis_label(name) for name in self.relaxing]

    # errors from the domain

    def add_error(self, exc: PolicyError | DomainError) -> None:
        """Put a service's or the algebra's error next to the fields it names."""
        for error in domain_errors(exc, floor=self.floor):
            if error.relaxes:
                self.relaxing.append(error.field)
            if error.field:
                self.errors[error.field] = error.message
            else:
                self.non_field_errors.append(error.message)

    # rendering

    def _value(self, name: str) -> Any:
        return self.initial.get(name, self.floor.get(name))

    def bound_axes(self) -> list[BoundAxis]:
        return [self._bind(axis) for axis in AXES.values()]

    def _bind(self, axis: Axis) -> BoundAxis:
        name = axis.name
        widget = WIDGETS[axis.kind]
        bound = BoundAxis(
            axis=axis,
            widget=widget,
            included=self._included(name),
            error=self.errors.get(name, ""),
            relaxes=name in self.relaxing,
            display=axis_value(name, self.initial[name]) if name in self.initial else "",
        )
        if self.partial:
            bound.floor_display = axis_value(name, self.floor.get(name))
        else:
            relaxable = (
                self.data.getlist("relaxable") if self.data is not None else self.initial_relaxable
            )
            bound.relaxable = name in relaxable
        data = self.data
        value = self._value(name)
        if widget == "checks":
            chosen = set(data.getlist(bound.input_name) if data is not None else value or [])
            bound.choices = [Choice(v, value_label(v), v in chosen) for v in _labels(axis)]
        elif widget == "select":
            chosen_label = data.get(bound.input_name, "") if data is not None else value
            bound.choices = [Choice(v, value_label(v), v == chosen_label) for v in _labels(axis)]
        elif widget == "number":
            bound.value = data.get(bound.input_name, "") if data is not None else _text(value)
        elif widget == "duration":
            amount, unit = _duration_parts(value)
            if data is not None:
                amount = data.get(bound.input_name, "")
                unit = data.get(bound.unit_input_name, "second")
            bound.value = amount
            bound.units = [Choice(u, f"{u}s", u == unit) for u, _ in DURATION_UNITS]
        elif widget == "map":
            current = value or {}
            bound.entries = [
                MapEntry(
                    kind,
                    data.get(f"{bound.input_name}-{kind}", "")
                    if data is not None
                    else _text(current.get(kind)),
                    f"{bound.input_name}-{kind}",
                )
                for kind in SEGMENT_KINDS
            ]
        else:
            order = list(value or [])
            for i in range(len(SEGMENT_KINDS)):
                input_name = f"{bound.input_name}-{i}"
                chosen_label = (
                    data.get(input_name, "")
                    if data is not None
                    else (order[i] if i < len(order) else "")
                )
                bound.positions.append(
                    Position(
                        POSITION_NAMES[i],
                        input_name,
                        [Choice("", "—", chosen_label == "")]
                        + [Choice(k, value_label(k), k == chosen_label) for k in SEGMENT_KINDS],
                    )
                )
        return bound

    def groups(self) -> list[tuple[str, list[BoundAxis]]]:
        axes = self.bound_axes()
        return [
            ("Recall axes", [a for a in axes if a.axis.group == "recall"]),
            ("Budget axes", [a for a in axes if a.axis.group == "budget"]),
        ]
