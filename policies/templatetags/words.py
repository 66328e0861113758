"""Template filters for policy words: ``{% load words %}``, then
``{{ name|axis_label }}``, ``{{ value|axis_value:name }}``, ``{{ key|count_label }}``,
``{{ "digest"|term_hint }}``, ``{{ value|value_label }}``, ``{{ seconds|duration }}``, and a
memory's ``{{ m.lifecycle_status|status_badge }}`` (the badge's class, one rule everywhere)."""

from __future__ import annotations

from typing import Any

from django import template

from policies import labels

register = template.Library()


@register.filter
def axis_label(name: str) -> str:
    return labels.axis_label(name)


@register.filter
def axis_value(value: Any, name: str) -> str:
    return labels.axis_value(name, value)


@register.filter
def value_label(value: Any) -> str:
    return labels.value_label(value)


@register.filter
def duration(seconds: Any) -> str:
    return labels.duration_label(seconds)


@register.filter
def count_label(key: str) -> str:
    return labels.COUNT_LABELS.get(key, key)


@register.filter
def term_hint(term: str) -> str:
    return labels.TERM_HINTS.get(term, "")


# A memory's lifecycle status as a badge: recalled (ok), taken out by someone (bad), or set
# aside by a rule that a person may undo (warn).
STATUS_BADGES = {"active": "ok", "suppressed": "bad", "disabled": "bad"}


@register.filter
def status_badge(status: str) -> str:
    return STATUS_BADGES.get(status, "warn")
