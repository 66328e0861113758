"""The recall sandbox's form: the request and a draft override of any relaxable policy axis.

The override's inputs are ``policies.axis_fields``' override inputs (``axis_<axis>``…), each
behind an "override this axis" box (``override_<axis>``). Forms only turn strings into values;
policy rules stay in ``policies.algebra`` and their errors come back next to the axis they
name (``portal.form_errors``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django import forms
from django.http import QueryDict

from policies.axes import AXES
from policies.axis_fields import OVERRIDE_INPUTS, BoundAxis, bind_axis, parse_axes
from policies.labels import axis_value
from policies.models import Workload
from recall.api.serializers import QUERY_REQUIRED
from recall.assembly import TOP_K_MAX

FULL = "full"
# The recall request's wire names (services' errors use them) -> this form's fields.
REQUEST_FIELDS = {"actorId": "actor", "workloadId": "workload", "topK": "top_k"}


class SandboxForm(forms.Form):
    """A recall request as an agent would send it, plus a draft override per relaxable axis.

    An axis enters the override only when its "override" box is ticked. Axes the floor does not
    mark relaxable have no fields at all, so a value posted for them anyway is ignored. An
    axis's errors, its inputs' and the domain's, are its box's.

    ``drafted``: the override panel as the page held it when another workload or environment
    is chosen (an unbound form); the axes ticked there keep what was typed, the others show
    the newly chosen policy's saved values.
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
    # "Show every decision": the same recall, reporting every decision whatever the policy's
    # diagnostics detail (a hidden field of the result's button, never of the form itself).
    verbosity = forms.ChoiceField(
        choices=[("", "the policy's"), (FULL, "every decision")], required=False
    )

    def __init__(
        self,
        data: QueryDict | None = None,
        *,
        workloads: Sequence[Workload],
        environments: Sequence[str],
        relaxable: Iterable[str],
        saved_policy: Mapping[str, Any],
        editable: bool,
        initial: dict[str, Any] | None = None,
        drafted: QueryDict | None = None,
    ) -> None:
        super().__init__(data, initial=initial)
        self.posted = data  # ``self.data`` as the axes read it
        self.editable = editable
        self.drafted = drafted
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
        self.axes = {name: axis for name, axis in AXES.items() if name in self.relaxable}
        for name in self.axes:
            self.fields[f"override_{name}"] = forms.BooleanField(
                label="Override this axis", required=False
            )
            if drafted is not None and drafted.get(f"override_{name}"):
                self.initial[f"override_{name}"] = True
        # Services' and the algebra's errors: the request's fields, and each axis on its box.
        self.error_aliases = {**REQUEST_FIELDS, **{name: f"override_{name}" for name in AXES}}
        self.draft: dict[str, Any] = {}
        if not editable:
            for form_field in self.fields.values():
                form_field.disabled = True

    def selected_workload(self) -> Workload:
        return self.workloads[self.cleaned_data["workload"]]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        ticked = {name: axis for name, axis in self.axes.items() if data.get(f"override_{name}")}
        self.draft, errors = parse_axes(ticked, self.posted or QueryDict(), OVERRIDE_INPUTS)
        for name, message in errors.items():
            self.add_error(f"override_{name}", message)
        return data

    def _shown(self, name: str) -> QueryDict | None:
        """What an axis's inputs show: what was submitted, or typed before a redraw."""
        if self.posted is not None:
            return self.posted
        if self.drafted is not None and self.drafted.get(f"override_{name}"):
            return self.drafted
        return None

    def bound_axes(self) -> list[BoundAxis]:
        """The relaxable axes, in registry order."""
        bound_axes = []
        for name, axis in self.axes.items():
            saved = self.saved_policy.get(name)
            bound = bind_axis(axis, OVERRIDE_INPUTS, value=saved, data=self._shown(name))
            bound.toggle = self[f"override_{name}"]
            bound.included = bool(bound.toggle.value())
            bound.errors = [str(e) for e in bound.toggle.errors]
            bound.display = axis_value(name, saved)
            bound.disabled = not self.editable
            bound_axes.append(bound)
        return bound_axes

    def override_touched(self) -> bool:
        """Whether the draft override section should start open: an axis ticked or in error."""
        return any(axis.errors or axis.included for axis in self.bound_axes())

    def override(self) -> dict[str, Any]:
        """The draft override document of a valid form (raw: the algebra validates it)."""
        return dict(self.draft)
