"""Policy axes as HTML inputs, for every form that edits them (plain Python, no Django).

The algebra's axis registry (``AXES``) drives it, so a new axis shows up in every form
without template changes. Each axis kind has a widget; the widget decides the names of the
axis's inputs, what they show (the axis's value, or what was submitted) and how the submitted
strings become a JSON-like value. Parsing only turns strings into values (numbers, lists,
maps): every rule (vocabularies, ranges, narrowing, budgets) stays in the algebra and the
services, whose errors reach the forms through ``portal.form_errors``.

Two kinds of page draw the axes, each with its own input names (``AxisInputs``):

- the policy forms (the floor and workload policies): ``ax-<axis>``, ``ax-<axis>-<kind>`` for
  maps, ``ax-dropOrder-<position>`` for the ordered list (a select per position), and
  ``ax-maxAgeSeconds`` an amount with ``ax-maxAgeSeconds-unit`` its unit (``day``, ``hour``,
  ``minute`` or ``second``; seconds when left out), turned into the seconds the policy stores;
- the recall sandbox's draft override: ``axis_<axis>``, ``axis_<axis>_<kind>`` for maps, the
  ordered list one text box of kinds separated by commas, and the maximum age in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from policies.algebra import MAX_AGE_SECONDS, SEGMENT_KINDS, VOCABULARIES
from policies.axes import Axis
from policies.labels import DURATION_UNITS, axis_hint, axis_label, axis_value, value_label

POSITION_NAMES = ("1st", "2nd", "3rd", "4th", "5th", "6th")
UNIT_SIZES: dict[str, int] = dict(DURATION_UNITS)
MAP_KINDS = ("ceiling_map", "reservation_map")


class FormData(Protocol):
    """Submitted form data: a Django ``QueryDict`` or anything that reads like one."""

    def get(self, key: str, default: Any = None, /) -> Any: ...

    def getlist(self, key: str) -> list[Any]: ...


@dataclass(frozen=True)
class AxisInputs:
    """How one kind of page names and draws the axes' inputs."""

    prefix: str
    separator: str
    duration_units: bool  # the maximum age as an amount and a unit, else whole seconds
    order_positions: bool  # the ordered list as a select per position, else one text box
    missing: str  # said of an empty input where the axis needs a value

    def name(self, axis: Axis, *parts: str) -> str:
        return self.separator.join([f"{self.prefix}{axis.name}", *parts])

    def widget(self, axis: Axis) -> str:
        if axis.kind in ("set", "superset"):
            return "checks"
        if axis.kind in ("min_number", "optional_min", "max_int"):
            return "number"
        if axis.kind == "ordered_max":
            return "select"
        if axis.kind == "max_age":
            return "duration"
        if axis.kind in MAP_KINDS:
            return "map"
        return "order" if self.order_positions else "list"  # ordered_list

    def input_names(self, axis: Axis) -> list[str]:
        """Every input the axis has on the page."""
        widget = self.widget(axis)
        if widget == "map":
            return [self.name(axis, kind) for kind in SEGMENT_KINDS]
        if widget == "order":
            return [self.name(axis, str(i)) for i in range(len(SEGMENT_KINDS))]
        if widget == "duration" and self.duration_units:
            return [self.name(axis), self.name(axis, "unit")]
        return [self.name(axis)]


POLICY_INPUTS = AxisInputs(
    prefix="ax-", separator="-", duration_units=True, order_positions=True, missing="Enter a value."
)
OVERRIDE_INPUTS = AxisInputs(
    prefix="axis_",
    separator="_",
    duration_units=False,
    order_positions=False,
    missing="Enter a value to override this axis.",
)


# --- showing values ----------------------------------------------------------------------------


def input_text(value: Any) -> str:
    """A stored number (or label) as an input shows it: no value is empty, ``0.0`` is ``0``,
    and a float keeps every digit it has (``repr`` is the shortest that reads back the same)."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


def duration_parts(seconds: Any) -> tuple[str, str]:
    """Stored seconds as an amount and a unit: the largest unit that holds them exactly."""
    if seconds is None:
        return "", "day"
    for unit, size in DURATION_UNITS:
        if seconds % size == 0:
            return str(seconds // size), unit
    return str(seconds), "second"  # unreachable: every whole number is whole seconds


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
    """Everything a template needs to draw one axis: no lookups left to do there.

    ``bind_axis`` fills in the inputs; each form adds what it alone shows.
    """

    axis: Axis
    inputs: AxisInputs
    widget: str
    value: str = ""  # number, duration amount and list inputs
    choices: list[Choice] = field(default_factory=list)  # checks and select
    entries: list[MapEntry] = field(default_factory=list)  # maps
    positions: list[Position] = field(default_factory=list)  # order
    units: list[Choice] = field(default_factory=list)  # duration in units: the amount's unit
    display: str = ""  # the value in words, read-only
    errors: list[str] = field(default_factory=list)
    # floor: always; workload: set rather than inherited; sandbox: its override box ticked
    included: bool = True
    disabled: bool = False  # drawn for reading only
    relaxes: bool = False  # workload: the error is WORKLOAD_RELAXES_OPERATOR_FLOOR
    relaxable: bool = False  # floor: requests may override the axis
    floor_display: str = ""  # workload: the floor's value in words
    # workload: the axis's inputs holding the floor's value ("set to the floor's value")
    floor_inputs: BoundAxis | None = None
    error_code: str = ""  # the domain error's code, shown after its words
    toggle: Any = None  # sandbox: the "override this axis" box, a bound form field

    @property
    def name(self) -> str:
        return self.axis.name

    @property
    def input_name(self) -> str:
        return self.inputs.name(self.axis)

    @property
    def unit_input_name(self) -> str:
        return self.inputs.name(self.axis, "unit")

    @property
    def label(self) -> str:
        return axis_label(self.axis.name)

    @property
    def hint(self) -> str:
        return axis_hint(self.axis.name)

    @property
    def error(self) -> str:
        return " ".join(self.errors)

    @property
    def number_attrs(self) -> dict[str, str]:
        if self.axis.kind in ("min_number", "optional_min"):
            return {"min": "0", "max": "1", "step": "0.01"}
        if self.axis.kind == "max_age":
            return {"min": "0", "step": "any"}
        return {"min": "1", "step": "1"}


def _labels(axis: Axis) -> tuple[str, ...]:
    return VOCABULARIES[axis.vocabulary] if axis.vocabulary else ()


def bind_axis(
    axis: Axis, inputs: AxisInputs, *, value: Any, data: FormData | None = None
) -> BoundAxis:
    """The axis's inputs showing ``data`` as submitted, or ``value`` when there is none."""
    bound = BoundAxis(axis=axis, inputs=inputs, widget=inputs.widget(axis))
    name = bound.input_name
    widget = bound.widget
    if widget == "checks":
        chosen = set(data.getlist(name) if data is not None else value or [])
        bound.choices = [Choice(v, value_label(v), v in chosen) for v in _labels(axis)]
    elif widget == "select":
        label = data.get(name, "") if data is not None else value
        bound.choices = [Choice(v, value_label(v), v == label) for v in _labels(axis)]
    elif widget == "number":
        bound.value = data.get(name, "") if data is not None else input_text(value)
    elif widget == "duration":
        amount, unit = duration_parts(value) if inputs.duration_units else (input_text(value), "")
        if data is not None:
            amount = data.get(name, "")
            unit = data.get(bound.unit_input_name, "second")
        bound.value = amount
        if inputs.duration_units:
            bound.units = [Choice(u, f"{u}s", u == unit) for u, _ in DURATION_UNITS]
    elif widget == "map":
        current = value or {}
        bound.entries = [
            MapEntry(
                kind,
                data.get(inputs.name(axis, kind), "")
                if data is not None
                else input_text(current.get(kind)),
                inputs.name(axis, kind),
            )
            for kind in SEGMENT_KINDS
        ]
    elif widget == "list":
        bound.value = data.get(name, "") if data is not None else ", ".join(value or [])
    else:  # order
        order = list(value or [])
        for i in range(len(SEGMENT_KINDS)):
            input_name = inputs.name(axis, str(i))
            label = (
                data.get(input_name, "")
                if data is not None
                else (order[i] if i < len(order) else "")
            )
            bound.positions.append(
                Position(
                    POSITION_NAMES[i],
                    input_name,
                    [Choice("", "—", label == "")]
                    + [Choice(k, value_label(k), k == label) for k in SEGMENT_KINDS],
                )
            )
    return bound


# --- parsing -----------------------------------------------------------------------------------


class AxisInputError(ValueError):
    """What was typed for an axis is not a value of its kind; the message is for people."""


def parse_axis(axis: Axis, data: FormData, inputs: AxisInputs) -> Any:
    """The axis's value from its submitted inputs (raw: the algebra validates it)."""
    widget = inputs.widget(axis)
    name = inputs.name(axis)
    if widget == "checks":
        return data.getlist(name)
    if widget == "map":
        return _parse_map(data, axis, inputs)
    if widget == "order":
        positions = [str(data.get(n, "")) for n in inputs.input_names(axis)]
        return [p for p in positions if p]
    raw = str(data.get(name, "")).strip()
    if widget == "list":
        return [part.strip() for part in raw.split(",") if part.strip()]
    if widget == "duration":
        unit = str(data.get(inputs.name(axis, "unit"), "second"))
        return _parse_duration(raw, unit, axis, inputs)
    if raw == "":
        if axis.optional:
            return None  # no bound
        raise AxisInputError(inputs.missing)
    if widget == "select":
        return raw
    if axis.kind in ("min_number", "optional_min"):
        try:
            return float(raw)
        except ValueError:
            empty = ", or leave it empty for no floor" if axis.optional else ""
            raise AxisInputError(f"Enter a number between 0 and 1{empty}.") from None
    try:
        return int(raw)
    except ValueError:
        raise AxisInputError("Enter a whole number.") from None


def _parse_duration(raw: str, unit: str, axis: Axis, inputs: AxisInputs) -> int | None:
    """An amount and its unit as seconds; empty is no limit. The algebra checks the range,
    but an amount past it is refused here, before turning, say, 1e9999 days into seconds."""
    size = UNIT_SIZES.get(unit)
    if size is None:
        raise AxisInputError("Choose days, hours, minutes or seconds.")
    if raw == "":
        return None
    try:
        amount = Decimal(raw)
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite():
        raise AxisInputError(f"Enter a number of {unit}s, or leave it empty for no limit.")
    if amount <= 0:
        raise AxisInputError("Enter a duration above zero, or leave it empty for no limit.")
    if amount * size > MAX_AGE_SECONDS:
        raise AxisInputError(f"At most a century ({axis_value(axis.name, MAX_AGE_SECONDS)}).")
    seconds = amount * size
    if seconds != seconds.to_integral_value():
        if not inputs.duration_units:
            raise AxisInputError("Enter a whole number of seconds.")
        raise AxisInputError(f"{raw} {unit}s is not a whole number of seconds: use a smaller unit.")
    return int(seconds)


def _parse_map(data: FormData, axis: Axis, inputs: AxisInputs) -> dict[str, int]:
    result: dict[str, int] = {}
    bad = []
    for kind in SEGMENT_KINDS:
        raw = str(data.get(inputs.name(axis, kind), "")).strip()
        if raw == "":
            continue  # a kind left out: no cap / no reservation
        try:
            result[kind] = int(raw)
        except ValueError:
            bad.append(kind)
    if bad:
        raise AxisInputError(f"Enter whole numbers of tokens (see {', '.join(bad)}).")
    return result


def parse_axes(
    axes: Mapping[str, Axis], data: FormData, inputs: AxisInputs
) -> tuple[dict[str, Any], dict[str, str]]:
    """``parse_axis`` for each of ``axes``: the values parsed, and the errors by axis name."""
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, axis in axes.items():
        try:
            values[name] = parse_axis(axis, data, inputs)
        except AxisInputError as exc:
            errors[name] = str(exc)
    return values, errors
