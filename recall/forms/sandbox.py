"""The recall sandbox's form: the request and a draft override of any policy axis.

Forms only turn strings into values; policy rules stay in ``policies.algebra`` and their
errors come back next to the field they name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.http import QueryDict

from policies import labels
from policies.algebra import AXES, SEGMENT_KINDS, VOCABULARIES, Axis, PolicyError
from policies.models import Workload
from portal.errors import DomainError
from recall.api.serializers import QUERY_REQUIRED
from recall.services import TOP_K_MAX

# Wire names used by services and the algebra → the form field that shows their errors.


_FIELD_ALIASES = {"actorId": "actor", "workloadId": "workload", "topK": "top_k"}


def add_domain_error(
    form: forms.Form, exc: DomainError | PolicyError, *, fallback: bool = True
) -> bool:
    """Put a domain error's details next to the fields they name; if none of them is on the
    form, the message goes on the form itself (unless ``fallback`` is off). Returns whether
    something was placed next to a field."""
    details = exc.details or {}
    placed = False
    for name in details.get("axes", []):  # USER_OVERRIDE_NOT_PERMITTED
        if f"override_{name}" in form.fields:
            form.add_error(f"override_{name}", exc.message)
            placed = True
    for name, message in (details.get("fields") or {}).items():
        target = _FIELD_ALIASES.get(name, name)
        if f"override_{target}" in form.fields:
            target = f"override_{target}"
        if target in form.fields:
            form.add_error(target, str(message))
            placed = True
    if not placed and fallback:
        form.add_error(None, exc.message)
    return placed


# --- the sandbox -------------------------------------------------------------------------------


@dataclass
class AxisBlock:
    """One relaxable axis of the draft override, as the template shows it."""

    axis: Axis
    toggle: forms.BoundField
    inputs: list[forms.BoundField] = field(default_factory=list)
    saved: str = ""  # the saved effective value, in words

    @property
    def name(self) -> str:
        return self.axis.name

    @property
    def kind(self) -> str:
        return self.axis.kind

    @property
    def label(self) -> str:
        return labels.axis_label(self.axis.name)

    @property
    def hint(self) -> str:
        return labels.axis_hint(self.axis.name)

    @property
    def errors(self) -> list[str]:
        return [str(e) for e in self.toggle.errors] + [
            str(e) for bf in self.inputs for e in bf.errors
        ]


def _input_names(axis: Axis) -> list[str]:
    """The names of an axis's inputs (a map axis has one per segment kind)."""
    name = f"axis_{axis.name}"
    if axis.kind in ("ceiling_map", "reservation_map"):
        return [f"{name}_{kind}" for kind in SEGMENT_KINDS]
    return [name]


def _axis_fields(axis: Axis, value: Any) -> dict[str, forms.Field]:
    """The input fields of one axis, prefilled with the saved effective value."""
    name = f"axis_{axis.name}"
    if axis.kind in ("set", "superset"):
        return {
            name: forms.MultipleChoiceField(
                choices=[(v, labels.value_label(v)) for v in VOCABULARIES[axis.vocabulary or ""]],
                widget=forms.CheckboxSelectMultiple,
                required=False,
                initial=list(value or []),
            )
        }
    if axis.kind == "min_number":
        return {
            name: forms.FloatField(
                required=False,
                initial=value,
                widget=forms.NumberInput(attrs={"min": 0, "max": 1, "step": "0.01"}),
            )
        }
    if axis.kind == "ordered_max":
        choices = [(v, labels.value_label(v)) for v in VOCABULARIES[axis.vocabulary or ""]]
        return {name: forms.ChoiceField(choices=choices, initial=value, required=False)}
    if axis.kind in ("max_age", "max_int"):
        return {
            name: forms.IntegerField(
                required=False,
                initial=value,
                help_text="In seconds." if axis.kind == "max_age" else "",
                widget=forms.NumberInput(
                    attrs={"min": 1, "placeholder": "no limit" if axis.kind == "max_age" else ""}
                ),
            )
        }
    if axis.kind in ("ceiling_map", "reservation_map"):
        placeholder = "no cap" if axis.kind == "ceiling_map" else "none"
        return {
            f"{name}_{kind}": forms.IntegerField(
                label=labels.value_label(kind),
                required=False,
                initial=(value or {}).get(kind),
                widget=forms.NumberInput(attrs={"min": 0, "placeholder": placeholder}),
            )
            for kind in SEGMENT_KINDS
        }
    # ordered_list (dropOrder): one text box, kinds separated by commas
    return {
        name: forms.CharField(
            required=False,
            initial=", ".join(value or []),
            help_text="Segment kinds, first cut first, separated by commas.",
        )
    }


def draft_kept(params: QueryDict) -> dict[str, Any]:
    """The ticked axes of a draft override as the page holds it, to redraw them unchanged.

    Choosing another workload or environment redraws the override panel with that policy's
    saved values; an axis the user ticked keeps what they typed instead.
    """
    kept: dict[str, Any] = {}
    for axis in AXES.values():
        toggle = f"override_{axis.name}"
        if not params.get(toggle):
            continue
        kept[toggle] = True
        for name in _input_names(axis):
            many = axis.kind in ("set", "superset")
            kept[name] = params.getlist(name) if many else params.get(name, "")
    return kept


class SandboxForm(forms.Form):
    """A recall request as an agent would send it, plus a draft override per relaxable axis.

    An axis enters the override only when its "override" box is ticked. Axes the floor does not
    mark relaxable have no fields at all, so a value posted for them anyway is ignored.
    """

    actor = forms.CharField(
        label="Actor", max_length=250, help_text="kind:name, for example user:ada"
    )
    workload = forms.ChoiceField(label="Workload")
    environment = forms.ChoiceField(label="Environment")
    query = forms.CharField(
        label="Query",
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": QUERY_REQUIRED},
    )
    top_k = forms.IntegerField(label="Top K", min_value=1, max_value=TOP_K_MAX, initial=5)
    compare = forms.BooleanField(
        label="Compare: run the saved policy and this draft override side by side",
        required=False,
    )

    def __init__(
        self,
        data: Any = None,
        *,
        workloads: Sequence[Workload],
        environments: Sequence[str],
        relaxable: Iterable[str],
        saved_policy: Mapping[str, Any],
        editable: bool,
        initial: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(data, initial=initial)
        self.workloads = {str(w.pk): w for w in workloads}
        workload_field = self.fields["workload"]
        assert isinstance(workload_field, forms.ChoiceField)
        workload_field.choices = [(key, w.name) for key, w in self.workloads.items()]
        environment_field = self.fields["environment"]
        assert isinstance(environment_field, forms.ChoiceField)
        environment_field.choices = [(e, e) for e in environments]
        self.relaxable = set(relaxable)
        self.saved_policy = dict(saved_policy)
        # Registry order; the floor's locked axes are only named (``locked``), never fields.
        self.locked = [name for name in AXES if name not in self.relaxable]
        self._axis_names: dict[str, list[str]] = {}
        for axis in AXES.values():
            if axis.name not in self.relaxable:
                continue
            self.fields[f"override_{axis.name}"] = forms.BooleanField(
                label="Override this axis", required=False
            )
            inputs = _axis_fields(axis, saved_policy.get(axis.name))
            self.fields.update(inputs)
            self._axis_names[axis.name] = list(inputs)
        if not editable:
            for form_field in self.fields.values():
                form_field.disabled = True

    def selected_workload(self) -> Workload:
        return self.workloads[self.cleaned_data["workload"]]

    def axis_blocks(self) -> list[AxisBlock]:
        """The relaxable axes, in registry order."""
        return [
            AxisBlock(
                axis=AXES[name],
                toggle=self[f"override_{name}"],
                inputs=[self[field_name] for field_name in names],
                saved=labels.axis_value(name, self.saved_policy.get(name)),
            )
            for name, names in self._axis_names.items()
        ]

    def override_touched(self) -> bool:
        """Whether the draft override section should start open: an axis ticked or in error."""
        return any(block.errors or block.toggle.value() for block in self.axis_blocks())

    def overridden_axes(self) -> list[str]:
        if not self.is_bound:
            return []
        return [name for name in AXES if self.cleaned_data.get(f"override_{name}")]

    def override(self) -> dict[str, Any]:
        """The draft override document (raw: the algebra validates it)."""
        data = self.cleaned_data
        document: dict[str, Any] = {}
        for name in self.overridden_axes():
            axis = AXES[name]
            key = f"axis_{name}"
            if axis.kind in ("set", "superset"):
                document[name] = list(data.get(key) or [])
            elif axis.kind in ("ceiling_map", "reservation_map"):
                document[name] = {
                    kind: data[f"{key}_{kind}"]
                    for kind in SEGMENT_KINDS
                    if data.get(f"{key}_{kind}") is not None
                }
            elif axis.kind == "ordered_list":
                text = data.get(key) or ""
                document[name] = [part.strip() for part in text.split(",") if part.strip()]
            elif axis.kind == "max_age":
                document[name] = data.get(key)
            else:
                value = data.get(key)
                if value is None or value == "":
                    self.add_error(f"override_{name}", "Enter a value to override this axis.")
                    continue
                document[name] = value
        return document
