"""The lifecycle settings form, built from the settings table (``lifecycle.SETTINGS``), so
the page, the API and the rules share one list of keys, bounds and words."""

from __future__ import annotations

from typing import Any

from django import forms

from maintenance.lifecycle import SCHEDULE_MODES, SETTINGS, SWEEPS, WEIGHT_NAMES, Setting

SCHEDULE_WORDS = {"off": "off", "preview": "preview only", "execute": "preview and execute"}


def _number_field(setting: Setting, *, integer: bool) -> forms.Field:
    attrs: dict[str, Any] = {"step": "1" if integer else "any"}
    if setting.minimum is not None:
        attrs["min"] = setting.minimum
    if setting.maximum is not None:
        attrs["max"] = setting.maximum
    kind = forms.IntegerField if integer else forms.FloatField
    return kind(
        label=setting.label,
        help_text=setting.help,
        widget=forms.NumberInput(attrs=attrs),
    )


class LifecycleSettingsForm(forms.Form):
    """Field names are the document's keys; weights and the schedule are one field per part
    (``promotionWeights__age``, ``schedule__decay``). Bounds are checked by the rules."""

    comment = forms.CharField(
        label="Change comment", required=False, max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "Why this change (kept in the history)"}),
    )  # fmt: skip

    def __init__(self, data: Any = None, *, initial: dict[str, Any]) -> None:
        flat: dict[str, Any] = {}
        for setting in SETTINGS:
            value = initial[setting.name]
            if setting.kind in ("weights", "schedule"):
                for part, part_value in value.items():
                    flat[f"{setting.name}__{part}"] = part_value
            elif isinstance(value, float) and value.is_integer():
                flat[setting.name] = int(value)  # shown as 24, not 24.0
            else:
                flat[setting.name] = value
        super().__init__(data, initial=flat)
        for setting in SETTINGS:
            if setting.kind == "number":
                self.fields[setting.name] = _number_field(setting, integer=False)
            elif setting.kind == "integer":
                self.fields[setting.name] = _number_field(setting, integer=True)
            elif setting.kind == "bool":
                self.fields[setting.name] = forms.BooleanField(
                    label=setting.label, help_text=setting.help, required=False
                )
            elif setting.kind == "weights":
                for part in WEIGHT_NAMES:
                    self.fields[f"{setting.name}__{part}"] = forms.FloatField(
                        label=part,
                        widget=forms.NumberInput(attrs={"min": 0, "max": 1, "step": "0.05"}),
                    )
            else:
                for sweep in SWEEPS:
                    self.fields[f"{setting.name}__{sweep}"] = forms.ChoiceField(
                        label=sweep, choices=[(m, SCHEDULE_WORDS[m]) for m in SCHEDULE_MODES]
                    )

    def groups(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """The settings by group, each with its bound fields, for the template."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for setting in SETTINGS:
            if setting.kind in ("weights", "schedule"):
                parts = WEIGHT_NAMES if setting.kind == "weights" else SWEEPS
                fields = [self[f"{setting.name}__{part}"] for part in parts]
            else:
                fields = [self[setting.name]]
            errors = [str(e) for e in self.errors.get(setting.name, [])]
            for bound in fields:
                errors += [str(e) for e in bound.errors]
            groups.setdefault(setting.group, []).append(
                {"setting": setting, "fields": fields, "errors": errors}
            )
        return list(groups.items())

    def document(self) -> dict[str, Any]:
        """The settings document from the cleaned fields (call after ``is_valid``)."""
        data = self.cleaned_data
        document: dict[str, Any] = {}
        for setting in SETTINGS:
            if setting.kind == "weights":
                document[setting.name] = {p: data[f"{setting.name}__{p}"] for p in WEIGHT_NAMES}
            elif setting.kind == "schedule":
                document[setting.name] = {s: data[f"{setting.name}__{s}"] for s in SWEEPS}
            else:
                document[setting.name] = data[setting.name]
        return document

    def add_rule_errors(self, fields: dict[str, str]) -> None:
        for name, message in fields.items():
            if name in self.fields:
                self.add_error(name, message)
            elif name in {s.name for s in SETTINGS}:
                # weights and schedule: shown on the group, not a single part
                self.errors.setdefault(name, self.error_class()).append(message)
            else:
                self.add_error(None, f"{name}: {message}")


class ReactivateForm(forms.Form):
    """A stale or expired memory made active again, maybe with a new expiry."""

    expires_at = forms.DateTimeField(
        label="New expiry (UTC, optional)",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Empty: an expiry already past is cleared, one still ahead is kept.",
    )
