"""portal.form_errors: domain errors next to the form fields they name (no database)."""

from __future__ import annotations

import pytest
from django import forms

from policies.algebra import PolicyError
from portal.errors import DomainError, ValidationFailed, VersionConflict
from portal.form_errors import FormError, add_domain_error, form_errors


class RequestForm(forms.Form):
    actor = forms.CharField(required=False)
    query = forms.CharField(required=False)
    override_topK = forms.BooleanField(required=False)


ALIASES = {"actorId": "actor", "topK": "override_topK"}


def bound() -> RequestForm:
    form = RequestForm({})
    assert form.is_valid()
    return form


class FormErrorsTests:
    def test_each_named_field_gets_its_message_through_the_aliases(self) -> None:
        exc = ValidationFailed({"actorId": "Use kind:name.", "query": "Enter a query."})
        assert form_errors(exc, fields=["actor", "query"], aliases=ALIASES) == [
            FormError("actorId", "actor", "Use kind:name."),
            FormError("query", "query", "Enter a query."),
        ]

    def test_a_path_belongs_on_the_field_of_its_head(self) -> None:
        exc = ValidationFailed({"history[2].content": "Empty.", "supporting.passages": "No."})
        errors = form_errors(exc, fields=["history", "supporting"])
        assert [e.field for e in errors] == ["history", "supporting"]
        assert errors[0].named_message == "history[2].content: Empty."

    def test_what_names_no_field_comes_back_unplaced(self) -> None:
        exc = ValidationFailed({"memories[3].actorId": "Wrong actor."})
        assert form_errors(exc, fields=["actor"], aliases=ALIASES) == [
            FormError("memories[3].actorId", None, "Wrong actor.")
        ]

    def test_an_error_naming_nothing_is_about_the_form_as_a_whole(self) -> None:
        exc = VersionConflict(what="The floor", current=3, base=2)
        assert form_errors(exc, fields=["actor"]) == [FormError("", None, exc.message)]

    def test_axes_named_by_an_error_each_get_its_message(self) -> None:
        exc = PolicyError("USER_OVERRIDE_NOT_PERMITTED", "Not relaxable.", {"axes": ["topK"]})
        assert form_errors(exc, fields=["override_topK"], aliases=ALIASES) == [
            FormError("topK", "override_topK", "Not relaxable.")
        ]

    def test_it_refuses_an_error_that_is_not_a_domain_error(self) -> None:
        with pytest.raises(TypeError):
            form_errors(ValueError("no code"), fields=[])


class AddDomainErrorTests:
    def test_placed_errors_go_on_their_fields_and_the_message_is_not_repeated(self) -> None:
        form = bound()
        unplaced = add_domain_error(
            form, ValidationFailed({"actorId": "Use kind:name.", "other": "x"}), aliases=ALIASES
        )
        assert form.errors == {"actor": ["Use kind:name."]}
        assert unplaced == [FormError("other", None, "x")]

    def test_when_nothing_is_placed_the_message_goes_on_the_form(self) -> None:
        form = bound()
        add_domain_error(form, DomainError("NOPE", "Refused.", {"fields": {"other": "x"}}))
        assert form.non_field_errors() == ["Refused."]

    def test_without_fallback_the_caller_words_what_was_not_placed(self) -> None:
        form = bound()
        unplaced = add_domain_error(form, ValidationFailed({"other": "x"}), fallback=False)
        assert form.errors == {}
        assert [e.named_message for e in unplaced] == ["other: x"]
