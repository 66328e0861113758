"""Forms of the recall pages: the sandbox request, memory edits and the JSON Lines import.

Forms only turn strings into values. Every policy rule (vocabularies, the floor, budgets)
stays in ``policies.algebra``; its errors come back through :func:`add_domain_error`, which
puts each one next to the field it is about.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms

from policies.algebra import AXES, SEGMENT_KINDS, VOCABULARIES, Axis, PolicyError
from policies.models import Workload
from portal.errors import DomainError
from recall.api.serializers import MEMORY_BATCH_MAX, MemoryInputSerializer
from recall.models import MemoryRecord
from recall.services import TOP_K_MAX

# Wire names used by services and the algebra → the form field that shows their errors.
_FIELD_ALIASES = {"actorId": "actor", "workloadId": "workload", "topK": "top_k"}


def add_domain_error(form: forms.Form, exc: DomainError | PolicyError) -> None:
    """Put a domain error's details next to the fields they name; the rest on the form."""
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
    if not placed:
        form.add_error(None, exc.message)


# --- the sandbox -------------------------------------------------------------------------------


@dataclass
class AxisBlock:
    """One override axis as the template shows it."""

    axis: Axis
    relaxable: bool
    toggle: forms.BoundField
    inputs: list[forms.BoundField] = field(default_factory=list)
    saved: str = ""  # the saved effective value, as text

    @property
    def name(self) -> str:
        return self.axis.name

    @property
    def kind(self) -> str:
        return self.axis.kind

    @property
    def errors(self) -> list[str]:
        return list(self.toggle.errors) + [e for bf in self.inputs for e in bf.errors]


def show_value(value: Any) -> str:
    if value is None:
        return "no limit"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "(none)"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _axis_fields(axis: Axis, value: Any) -> dict[str, forms.Field]:
    """The input fields of one axis, prefilled with the saved effective value."""
    name = f"axis_{axis.name}"
    if axis.kind in ("set", "superset"):
        return {
            name: forms.MultipleChoiceField(
                choices=[(v, v.replace("_", " ")) for v in VOCABULARIES[axis.vocabulary or ""]],
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
        labels = VOCABULARIES[axis.vocabulary or ""]
        return {
            name: forms.ChoiceField(choices=[(v, v) for v in labels], initial=value, required=False)
        }
    if axis.kind in ("max_age", "max_int"):
        return {
            name: forms.IntegerField(
                required=False,
                initial=value,
                widget=forms.NumberInput(
                    attrs={"min": 1, "placeholder": "no limit" if axis.kind == "max_age" else ""}
                ),
            )
        }
    if axis.kind in ("ceiling_map", "reservation_map"):
        placeholder = "no cap" if axis.kind == "ceiling_map" else "none"
        return {
            f"{name}_{kind}": forms.IntegerField(
                label=kind,
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


class SandboxForm(forms.Form):
    """A recall request as an agent would send it, plus a draft override per relaxable axis.

    An axis enters the override only when its "override" box is ticked. Axes the floor does not
    mark relaxable are disabled, so a value posted for them anyway is ignored.
    """

    actor = forms.CharField(
        label="Actor", max_length=250, help_text="kind:name, for example user:ada"
    )
    workload = forms.ChoiceField(label="Workload")
    environment = forms.ChoiceField(label="Environment")
    query = forms.CharField(
        label="Query", required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 2})
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
        self._axis_names: dict[str, list[str]] = {}
        for axis in AXES.values():
            allowed = editable and axis.name in self.relaxable
            toggle = forms.BooleanField(label="Override this axis", required=False)
            toggle.disabled = not allowed
            self.fields[f"override_{axis.name}"] = toggle
            inputs = _axis_fields(axis, saved_policy.get(axis.name))
            for name, input_field in inputs.items():
                input_field.disabled = not allowed
                self.fields[name] = input_field
            self._axis_names[axis.name] = list(inputs)
        if not editable:
            for form_field in self.fields.values():
                form_field.disabled = True

    def selected_workload(self) -> Workload:
        return self.workloads[self.cleaned_data["workload"]]

    def axis_blocks(self) -> list[AxisBlock]:
        """Every axis, the relaxable ones first (registry order within each group)."""
        blocks = [
            AxisBlock(
                axis=axis,
                relaxable=axis.name in self.relaxable,
                toggle=self[f"override_{axis.name}"],
                inputs=[self[name] for name in self._axis_names[axis.name]],
                saved=show_value(self.saved_policy.get(axis.name)),
            )
            for axis in AXES.values()
        ]
        return sorted(blocks, key=lambda block: not block.relaxable)

    def override_touched(self) -> bool:
        """Whether the draft override section should start open: an axis ticked or in error."""
        if not self.is_bound:
            return False
        return any(
            block.errors or block.toggle.value() for block in self.axis_blocks() if block.relaxable
        )

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


# --- the memory browser ------------------------------------------------------------------------

EDITABLE = ("content", "memory_type", "sensitivity", "segment_kind", "confidence")
CONTENT_MAX = 20_000


def _model_choice(name: str, label: str) -> forms.ChoiceField:
    return forms.ChoiceField(label=label, choices=MemoryRecord._meta.get_field(name).choices)


class MemoryEditForm(forms.Form):
    """The fields an editor may change in the browser; content edits are re-embedded.

    A plain form, not a ModelForm: validating a ModelForm writes the new values into the
    instance, and ``memory_update`` needs the row as it was to know what changed.
    """

    content = forms.CharField(label="Content", widget=forms.Textarea(attrs={"rows": 3}))
    memory_type = _model_choice("memory_type", "Memory type")
    sensitivity = _model_choice("sensitivity", "Sensitivity")
    segment_kind = _model_choice("segment_kind", "Segment kind")
    confidence = forms.FloatField(
        label="Confidence",
        min_value=0.0,
        max_value=1.0,
        widget=forms.NumberInput(attrs={"min": 0, "max": 1, "step": "0.01"}),
    )

    def __init__(self, data: Any = None, *, memory: MemoryRecord) -> None:
        super().__init__(data, initial={name: getattr(memory, name) for name in EDITABLE})

    def clean_content(self) -> str:
        content = str(self.cleaned_data.get("content") or "").strip()
        if not content:
            raise forms.ValidationError("The content cannot be empty.")
        if len(content) > CONTENT_MAX:
            raise forms.ValidationError(f"Keep the content under {CONTENT_MAX:,} characters.")
        return content

    def changes(self) -> dict[str, Any]:
        return {
            name: self.cleaned_data[name]
            for name in EDITABLE
            if self.cleaned_data[name] != self.initial[name]
        }


IMPORT_MAX_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class LineError:
    line: int
    field: str
    message: str


class MemoryImportForm(forms.Form):
    """A JSON Lines file: one memory per line in the API's camelCase shape."""

    actor = forms.CharField(
        label="Actor", max_length=250, help_text="Every line becomes a memory of this actor."
    )
    file = forms.FileField(
        label="JSON Lines file",
        help_text=f"One memory object per line, at most {MEMORY_BATCH_MAX:,} lines.",
    )

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > IMPORT_MAX_BYTES:
            raise forms.ValidationError("The file is larger than 5 MB; split it.")
        return upload


def parse_jsonl(raw: bytes) -> tuple[list[dict[str, Any]], list[LineError]]:
    """Validate every line (blank lines are skipped); model-field items, or per-line errors."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], [LineError(0, "file", "The file is not UTF-8 text.")]
    items: list[dict[str, Any]] = []
    errors: list[LineError] = []
    lines = text.splitlines()
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        return [], [LineError(0, "file", "The file has no memories in it.")]
    if len(numbered) > MEMORY_BATCH_MAX:
        return [], [
            LineError(
                0,
                "file",
                f"At most {MEMORY_BATCH_MAX:,} memories per import; the file has "
                f"{len(numbered):,}.",
            )
        ]
    for number, line in numbered:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(
                LineError(number, "line", f"Not valid JSON: {exc.msg} (column {exc.colno}).")
            )
            continue
        if not isinstance(obj, dict):
            errors.append(LineError(number, "line", "Each line must be one JSON object."))
            continue
        serializer = MemoryInputSerializer(data=obj)
        if serializer.is_valid():
            items.append(serializer.to_model_fields())
        else:
            for name, messages in serializer.errors.items():
                text_messages = messages if isinstance(messages, list) else [messages]
                errors.append(LineError(number, name, " ".join(str(m) for m in text_messages)))
    return items, errors
