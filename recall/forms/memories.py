"""Forms of the memory browser: editing one memory and the JSON Lines import."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db import models

from recall.api.serializers import MEMORY_BATCH_MAX
from recall.models import MemoryRecord
from recall.services import SUPPRESS_REASON_MAX

# --- the memory browser ------------------------------------------------------------------------

EDITABLE = ("content", "memory_type", "sensitivity", "segment_kind", "confidence")
CONTENT_MAX = 20_000


def _model_choice(name: str, label: str) -> forms.ChoiceField:
    field = MemoryRecord._meta.get_field(name)
    assert isinstance(field, models.Field) and field.choices is not None
    return forms.ChoiceField(label=label, choices=field.choices)


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


class MemoryStatusForm(forms.Form):
    """Suppress (with a reason: the portal asks for one, the API takes it if given), restore,
    or reactivate one memory: the memory page's actions and the browser rows'."""

    action = forms.ChoiceField(
        choices=[("suppress", "Suppress"), ("restore", "Restore"), ("reactivate", "Reactivate")]
    )
    reason = forms.CharField(
        label="Reason",
        required=False,
        max_length=SUPPRESS_REASON_MAX,
        widget=forms.Textarea(attrs={"rows": 2, "maxlength": SUPPRESS_REASON_MAX}),
        help_text="Why it must not be recalled; the audit trail keeps it.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("action") == "suppress" and not str(cleaned.get("reason") or "").strip():
            self.add_error("reason", "Say why this memory must not be recalled.")
        return cleaned


IMPORT_MAX_BYTES = 5 * 1024 * 1024


class MemoryImportForm(forms.Form):
    """A JSON Lines file: one memory per line in the API's camelCase shape."""

    # The services' wire names -> this form's fields (``portal.form_errors``).
    error_aliases = {"actorId": "actor"}

    actor = forms.CharField(
        label="Actor",
        max_length=250,
        required=False,
        help_text="Every line becomes a memory of this actor. Leave it empty when every line "
        "names its own actorId, as a retention archive does.",
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
