"""The recall request's plain check (``recall_request_plain``), the hot path's stand-in for
``RecallRequestSerializer``: whatever it accepts, the serializer accepts with the same data;
everything else is left to the serializer, whose messages callers see. And the envelope's
renderer (``FastJSONRenderer``), whose output parses as ``JSONRenderer``'s does."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.renderers import JSONRenderer

from portal.api.renderers import FastJSONRenderer
from recall.api.serializers import RecallRequestSerializer, recall_request_plain
from recall.assembly import TOP_K_MAX
from tests.properties import examples

WORKLOAD = "3ce644fd-4c3a-44b1-82e2-e7e6fe75456e"
PLAIN = {"workloadId": WORKLOAD, "environment": "prod", "query": "release notes", "topK": 5}

# Values near each rule's edge, and a little of everything else.
UUIDS = st.one_of(
    st.just(WORKLOAD),
    st.just(WORKLOAD.upper()),
    st.just(WORKLOAD.replace("-", "")),
    st.just("{" + WORKLOAD + "}"),
    st.uuids().map(str),
    st.text(max_size=40),
    st.integers(),
    st.none(),
)
ENVIRONMENTS = st.one_of(
    st.sampled_from(["prod", "staging-2", "-prod", "Prod", "prod ", " prod", "prod\n", "a" * 50]),
    st.just("a" * 51),
    st.from_regex(r"[a-z0-9][a-z0-9-]{0,49}", fullmatch=True),
    st.text(max_size=60),
    st.integers(),
)
QUERIES = st.one_of(
    st.sampled_from(["release", " release", "release\t", "", "   ", "a\x00b", "caf\u00e9"]),
    st.just("\ud800"),
    st.just("q" * 10_000),
    st.just("q" * 10_001),
    st.text(max_size=50),
    st.integers(),
    st.none(),
)
TOP_KS = st.one_of(
    st.integers(min_value=-2, max_value=TOP_K_MAX + 2),
    st.sampled_from([True, False, 5.0, "5", None]),
)
OVERRIDES = st.one_of(st.none(), st.just({}), st.just({"sensitivityCeiling": "public"}))
OPTIONAL = {"topK": TOP_KS, "policyOverride": OVERRIDES, "unknown": st.integers()}


@st.composite
def requests(draw: st.DrawFn) -> Any:
    body = {
        "workloadId": draw(UUIDS),
        "environment": draw(ENVIRONMENTS),
        "query": draw(QUERIES),
    }
    for key in draw(st.lists(st.sampled_from(["workloadId", "environment", "query"]), max_size=1)):
        del body[key]
    for key, values in OPTIONAL.items():
        if draw(st.booleans()):
            body[key] = draw(values)
    return body


@st.composite
def near_plain(draw: st.DrawFn) -> Any:
    """A plain request with one value drawn from its edge cases (or none changed)."""
    strategies = {"workloadId": UUIDS, "environment": ENVIRONMENTS, "query": QUERIES, **OPTIONAL}
    key = draw(st.sampled_from([None, *strategies]))
    return PLAIN if key is None else {**PLAIN, key: draw(strategies[key])}


class RecallRequestPlainTests:
    def test_a_plain_request_is_accepted_as_the_serializer_would(self):
        plain = recall_request_plain(PLAIN)

        assert plain == {**PLAIN, "workloadId": uuid.UUID(WORKLOAD)}
        assert recall_request_plain({k: v for k, v in PLAIN.items() if k != "topK"}) == {
            **plain,
            "topK": 10,
        }

    def test_what_it_leaves_to_the_serializer(self):
        for changed in (
            {"query": " release"},
            {"query": "release \ud800"},  # a lone surrogate: no UTF-8 for it
            {"workloadId": WORKLOAD.upper()},
            {"topK": True},
            {"policyOverride": {"sensitivityCeiling": "public"}},
            {"extra": 1},
        ):
            assert recall_request_plain({**PLAIN, **changed}) is None, changed
        assert recall_request_plain([PLAIN]) is None

    @settings(max_examples=examples(400), deadline=None)
    @given(st.one_of(requests(), near_plain()))
    def test_whatever_it_accepts_the_serializer_accepts_with_the_same_data(self, body):
        plain = recall_request_plain(body)
        if plain is None:
            return
        serializer = RecallRequestSerializer(data=body)
        assert serializer.is_valid(), (body, serializer.errors)
        assert dict(serializer.validated_data) == plain


class FastJSONRendererTests:
    @settings(max_examples=examples(200), deadline=None)
    @given(
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(min_value=-(2**63), max_value=2**63 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda children: (
                st.lists(children, max_size=4)
                | st.dictionaries(st.text(max_size=8), children, max_size=4)
            ),
            max_leaves=20,
        )
    )
    def test_it_parses_as_json_renderers_output(self, data):
        fast, reference = FastJSONRenderer().render(data), JSONRenderer().render(data)
        if data is None:  # no body at all
            assert fast == reference == b""
        else:
            assert json.loads(fast) == json.loads(reference)

    @pytest.mark.parametrize(
        "value",
        [
            datetime(2026, 12, 4, 15, 30, 1, 123456, tzinfo=UTC),
            date(2026, 12, 4),
            2**70,
            {1: "a key that is not a string"},
        ],
        ids=["datetime", "date", "big-int", "int-key"],
    )
    def test_what_orjson_would_write_otherwise_is_written_by_json_renderer(self, value):
        data = {"id": uuid.UUID(WORKLOAD), "value": value}

        assert FastJSONRenderer().render(data) == JSONRenderer().render(data)
