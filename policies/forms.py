"""Policy forms: the floor and workload policy forms, and the rows of a policy diff.

The axes' inputs (names, values shown, parsing) are ``policies.axis_fields``' policy inputs
(``ax-<axis>``…); the service's and the algebra's errors reach the fields through
``portal.form_errors``, worded here. Besides the axes: ``mode-<axis>`` = ``inherit`` | ``set``
on workload forms, ``relaxable`` (one checkbox per axis) on the floor form, ``comment``, and
the hidden ``base_version``: the version the form was opened at, so that a save over someone
else's newer one is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies.algebra import (
    DOCUMENT_FIELD,
    RELAXABLE_KEY,
    WORKLOAD_RELAXES_OPERATOR_FLOOR,
    PolicyError,
)
from policies.axes import AXES, Axis
from policies.axis_fields import POLICY_INPUTS, BoundAxis, bind_axis, parse_axes
from policies.labels import axis_label, axis_value
from policies.services import change_comment, floor_change_comment
from portal.errors import DomainError, ValidationFailed
from portal.form_errors import form_errors
from portal.versioning import NO_VERSION, parse_base_version

BASE_VERSION_FIELD = "base_version"
# The fields a policy's errors may name; anything else is about the policy as a whole.
POLICY_FIELDS = (*AXES, "comment", RELAXABLE_KEY)


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


def _worded(
    exc: PolicyError | DomainError, *, floor: Mapping[str, Any] | None = None
) -> Iterator[tuple[str, str]]:
    """``(field, message)`` per error, "" for the policy as a whole. A relaxed axis says the
    floor's value; ``floor`` supplies it where the error's details leave it out."""
    named_floor = (exc.details or {}).get("floor", {})
    for error in form_errors(exc, fields=POLICY_FIELDS):
        if error.field is None:
            whole = error.name in ("", DOCUMENT_FIELD)
            yield "", error.message if whole else error.named_message
        elif exc.code == WORKLOAD_RELAXES_OPERATOR_FLOOR:
            # The words first; the page shows the code after them (``PolicyForm.error_codes``).
            value = named_floor.get(error.field, (floor or {}).get(error.field))
            yield (
                error.field,
                f"Wider than the operator floor (floor: {axis_value(error.field, value)}).",
            )
        else:
            yield error.field, error.message


def field_name(name: str) -> str:
    """A field as an error shown away from it names it: its label, then the API name."""
    label = axis_label(name)
    return label if label == name else f"{label} ({name})"


def domain_error_lines(exc: PolicyError | DomainError) -> list[str]:
    """A policy error as lines of a list shown away from the form (each names its field, and
    a workload's relaxed axis its code)."""
    code = f" ({exc.code})" if exc.code == WORKLOAD_RELAXES_OPERATOR_FLOOR else ""
    return [
        f"{field_name(name)}: {message}{code}" if name else message
        for name, message in _worded(exc)
    ]


# --- the bound form ----------------------------------------------------------------------------


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
        self.error_codes: dict[str, str] = {}  # field -> the domain error's code, shown after
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

    def is_valid(self, *, saving: bool = True) -> bool:
        """Whether the submitted form parses. ``saving=False`` (an impact preview) asks for
        no change comment: only a save needs one."""
        if self.data is None:
            return False
        included = {name: axis for name, axis in AXES.items() if self._included(name)}
        document, errors = parse_axes(included, self.data, POLICY_INPUTS)
        self.errors.update(errors)
        if not self.partial:
            document[RELAXABLE_KEY] = [a for a in self.data.getlist("relaxable") if a in AXES]
        # The service's rules, reported with the other fields: the floor's comment is required.
        check_comment = floor_change_comment if saving and not self.partial else change_comment
        try:
            check_comment(self.comment)
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
        for name, message in _worded(exc, floor=self.floor):
            if not name:
                self.non_field_errors.append(message)
                continue
            if exc.code == WORKLOAD_RELAXES_OPERATOR_FLOOR:
                self.relaxing.append(name)
                self.error_codes[name] = exc.code
            self.errors[name] = message

    # rendering

    def _value(self, name: str) -> Any:
        return self.initial.get(name, self.floor.get(name))

    def bound_axes(self) -> list[BoundAxis]:
        return [self._bind(axis) for axis in AXES.values()]

    def _bind(self, axis: Axis) -> BoundAxis:
        name = axis.name
        bound = bind_axis(axis, POLICY_INPUTS, value=self._value(name), data=self.data)
        bound.included = self._included(name)
        bound.errors = [self.errors[name]] if name in self.errors else []
        bound.error_code = self.error_codes.get(name, "")
        bound.relaxes = name in self.relaxing
        bound.display = axis_value(name, self.initial[name]) if name in self.initial else ""
        if self.partial:
            bound.floor_display = axis_value(name, self.floor.get(name))
            if bound.relaxes:
                bound.floor_inputs = bind_axis(axis, POLICY_INPUTS, value=self.floor.get(name))
        else:
            relaxable = (
                self.data.getlist("relaxable") if self.data is not None else self.initial_relaxable
            )
            bound.relaxable = name in relaxable
        return bound

    def groups(self) -> list[tuple[str, list[BoundAxis]]]:
        axes = self.bound_axes()
        return [
            ("Recall axes", [a for a in axes if a.axis.group == "recall"]),
            ("Budget axes", [a for a in axes if a.axis.group == "budget"]),
        ]
