"""Canonical JSON: one text for equal data, whatever containers hold it."""

from __future__ import annotations

from random import Random
from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st

from portal.canonical import canonical_json, sha256_hex


def test_any_mapping_sets_and_tuples_write_as_dicts_sorted_lists_and_lists() -> None:
    data = {"b": {3, 1, 2}, "a": (1, 2), "c": MappingProxyType({"y": 1, "x": frozenset("qp")})}

    assert canonical_json(data) == '{"a":[1,2],"b":[1,2,3],"c":{"x":["p","q"],"y":1}}'


def test_a_list_keeps_its_order_and_keys_are_text() -> None:
    assert canonical_json({2: ["b", "a"], "1": None}) == '{"1":null,"2":["b","a"]}'


@given(st.sets(st.text(max_size=5) | st.integers()), st.randoms(use_true_random=False))
def test_a_set_hashes_alike_whatever_order_it_was_built_in(
    items: set[str | int], random: Random
) -> None:
    shuffled = list(items)
    random.shuffle(shuffled)

    assert sha256_hex({"axis": set(shuffled)}) == sha256_hex({"axis": frozenset(items)})
