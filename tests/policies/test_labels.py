"""Policy words for people: labels, values and durations (plain Python)."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from policies import labels
from policies.axes import AXES


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (None, "no limit"),
        (0, "0 seconds"),
        (1, "1 second"),
        (90, "1 minute 30 seconds"),
        (5400, "1 hour 30 minutes"),
        (86_400, "1 day"),
        (2_592_000, "30 days"),
        (2_595_600, "30 days 1 hour"),
    ],
)
def test_durations_read_as_durations(seconds, words):
    assert labels.duration_label(seconds) == words


def test_every_axis_has_a_label_that_is_not_its_api_name():
    for name in AXES:
        assert labels.axis_label(name) != name


@pytest.mark.parametrize(
    ("axis", "value", "words"),
    [
        (
            "consentPolicyAllowed",
            ["explicit", "legitimate_interest"],
            "explicit, legitimate interest",
        ),
        ("maxAgeSeconds", 604_800, "7 days"),
        ("maxAgeSeconds", None, "no limit"),
        ("confidenceMin", 0.5, "0.5"),
        ("similarityMin", 0.35, "0.35"),
        ("similarityMin", None, "no floor"),
        ("totalTokenBudget", 32000, "32,000"),
        ("perSegmentReservation", {"system_policy": 400}, "system policy: 400"),
        ("perSegmentCeiling", {}, "none"),
        ("dropOrder", ["tool_result", "retrieval"], "tool result → retrieval"),
        ("sensitivityCeiling", "confidential", "confidential"),
        ("forbiddenSegmentKinds", [], "none"),
    ],
)
def test_values_are_formatted_the_same_everywhere(axis, value, words):
    assert labels.axis_value(axis, value) == words


def test_the_template_filters_say_the_same():
    rendered = Template(
        "{% load words %}{{ 'maxAgeSeconds'|axis_label }}: {{ 86400|axis_value:'maxAgeSeconds' }}"
        " · {{ 'afterPolicy'|count_label }} · {{ 'digest'|term_hint|truncatewords:3 }}"
    ).render(Context())
    assert rendered == "Maximum age: 1 day · After policy · A hash of …"


def test_pages_without_a_query_say_the_similarity_floor_depends_on_it():
    assert labels.query_dependent(0.35) == "depends on each query: similarity floor 0.35"
    assert labels.query_dependent(None) == ""
