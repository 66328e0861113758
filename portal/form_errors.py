"""Domain errors onto forms: one mapping for every page (the API's exception handler is the other).

An error says what it is about in its details: ``fields`` maps a name to a message, and
``axes`` lists names the error's message as a whole is about. A name may be a path
(``history[2].content``): the form field it belongs on is the one its head names
(``history``), through the caller's aliases where the form spells a wire name differently
(``actorId`` → ``actor``). An error that names nothing is about the form as a whole. What
names no field of the form comes back unplaced, for the caller to word: a page shows it on
the form as a whole, or in a sentence of its own.

Works on ``DomainError`` and on the coded errors the apps register (``portal.errors``), so the
policy algebra's errors are read here without importing it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django import forms

from portal.errors import DomainError, as_domain_error

_HEAD = re.compile(r"[^.\[]*")


@dataclass(frozen=True)
class FormError:
    name: str  # what the error names, as it names it; "" for nothing in particular
    field: str | None  # the form field it belongs on; None when the form has none for it
    message: str

    @property
    def named_message(self) -> str:
        """The message saying what it is about, for a place away from that field."""
        return f"{self.name}: {self.message}" if self.name else self.message


def field_for(name: str, *, fields: Collection[str], aliases: Mapping[str, str]) -> str | None:
    """The form field an error's name (or path) belongs on, or None when there is none."""
    head = _HEAD.match(name)
    assert head is not None  # the pattern matches every string, if only emptily
    target = aliases.get(name, aliases.get(head.group(), head.group()))
    return target if target in fields else None


def place_errors(
    named: Iterable[tuple[str, Any]],
    *,
    fields: Collection[str],
    aliases: Mapping[str, str] | None = None,
) -> list[FormError]:
    """``(name, message)`` pairs, each with the form field it belongs on."""
    return [
        FormError(name, field_for(name, fields=fields, aliases=aliases or {}), str(message))
        for name, message in named
    ]


def _domain(exc: Exception) -> DomainError:
    domain = as_domain_error(exc)
    if domain is None:
        raise TypeError(f"{type(exc).__name__} is neither a DomainError nor a registered one")
    return domain


def form_errors(
    exc: Exception, *, fields: Collection[str], aliases: Mapping[str, str] | None = None
) -> list[FormError]:
    """A domain error as form errors: one per name its details give, else its message."""
    domain = _domain(exc)
    details = domain.details or {}
    named = [(name, domain.message) for name in details.get("axes") or []]
    named += list((details.get("fields") or {}).items())
    return place_errors(named, fields=fields, aliases=aliases) or [
        FormError("", None, domain.message)
    ]


def add_domain_error(
    form: forms.BaseForm,
    exc: Exception,
    *,
    aliases: Mapping[str, str] | None = None,
    fallback: bool = True,
) -> list[FormError]:
    """Put a domain error next to the fields it names. When none of them is on the form, its
    message goes on the form as a whole, unless ``fallback`` is off. Returns what it did not
    place, for the caller to word."""
    errors = form_errors(exc, fields=form.fields, aliases=aliases)
    placed = [error for error in errors if error.field is not None]
    for error in placed:
        form.add_error(error.field, error.message)
    if not placed and fallback:
        form.add_error(None, _domain(exc).message)
    return [error for error in errors if error.field is None]
