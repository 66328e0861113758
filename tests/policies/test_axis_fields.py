"""policies.axis_fields: the axes' inputs on the policy forms and the sandbox's draft override."""

from __future__ import annotations

from typing import Any

import pytest
from django.http import QueryDict

from policies.algebra import default_floor
from policies.axes import AXES
from policies.axis_fields import (
    OVERRIDE_INPUTS,
    POLICY_INPUTS,
    AxisInputError,
    bind_axis,
    input_text,
    parse_axis,
)


def posted(**fields: Any) -> QueryDict:
    data = QueryDict(mutable=True)
    for name, value in fields.items():
        data.setlist(name, value if isinstance(value, list) else [value])
    return data


def parse(name: str, inputs=POLICY_INPUTS, **fields: Any) -> Any:
    return parse_axis(AXES[name], posted(**fields), inputs)


class InputNamesTests:
    def test_each_page_names_an_axis_s_inputs_its_own_way(self) -> None:
        ceiling, order, age = AXES["perSegmentCeiling"], AXES["dropOrder"], AXES["maxAgeSeconds"]
        assert POLICY_INPUTS.input_names(ceiling)[1] == "ax-perSegmentCeiling-memory"
        assert OVERRIDE_INPUTS.input_names(ceiling)[1] == "axis_perSegmentCeiling_memory"
        assert POLICY_INPUTS.input_names(order)[:2] == ["ax-dropOrder-0", "ax-dropOrder-1"]
        assert OVERRIDE_INPUTS.input_names(order) == ["axis_dropOrder"]
        assert POLICY_INPUTS.input_names(age) == ["ax-maxAgeSeconds", "ax-maxAgeSeconds-unit"]
        assert OVERRIDE_INPUTS.input_names(age) == ["axis_maxAgeSeconds"]


class ParseAxisTests:
    def test_numbers_labels_and_lists_are_read_raw_for_the_algebra_to_judge(self) -> None:
        assert parse("confidenceMin", **{"ax-confidenceMin": " 0.5 "}) == 0.5
        assert parse("totalTokenBudget", **{"ax-totalTokenBudget": "-5"}) == -5
        assert parse("sensitivityCeiling", **{"ax-sensitivityCeiling": "secret"}) == "secret"
        types = ["fact", "nonsense"]
        assert parse("memoryTypeAllowed", **{"ax-memoryTypeAllowed": types}) == types

    def test_an_empty_similarity_floor_is_no_floor_on_either_page(self) -> None:
        assert parse("similarityMin", **{"ax-similarityMin": ""}) is None
        assert parse("similarityMin", OVERRIDE_INPUTS, axis_similarityMin=" ") is None
        assert parse("similarityMin", **{"ax-similarityMin": "0.35"}) == 0.35
        with pytest.raises(AxisInputError, match="or leave it empty for no floor"):
            parse("similarityMin", **{"ax-similarityMin": "high"})

    def test_an_empty_value_that_is_needed_is_refused_in_each_page_s_words(self) -> None:
        with pytest.raises(AxisInputError, match="^Enter a value.$"):
            parse("totalTokenBudget", **{"ax-totalTokenBudget": ""})
        with pytest.raises(AxisInputError, match="^Enter a value to override this axis.$"):
            parse("sensitivityCeiling", OVERRIDE_INPUTS, axis_sensitivityCeiling="")

    @pytest.mark.parametrize(
        ("name", "raw", "message"),
        [
            ("totalTokenBudget", "lots", "Enter a whole number."),
            ("confidenceMin", "high", "Enter a number between 0 and 1."),
        ],
    )
    def test_a_number_that_is_not_one_is_refused(self, name, raw, message) -> None:
        with pytest.raises(AxisInputError, match=f"^{message}$"):
            parse(name, **{f"ax-{name}": raw})

    def test_a_map_skips_the_kinds_left_empty_and_names_the_ones_that_are_not_numbers(
        self,
    ) -> None:
        fields = {"axis_perSegmentCeiling_memory": "300", "axis_perSegmentCeiling_retrieval": ""}
        assert parse("perSegmentCeiling", OVERRIDE_INPUTS, **fields) == {"memory": 300}
        with pytest.raises(AxisInputError, match=r"\(see memory, tool_result\)"):
            parse(
                "perSegmentCeiling",
                **{"ax-perSegmentCeiling-memory": "x", "ax-perSegmentCeiling-tool_result": "1.5"},
            )

    def test_the_drop_order_is_positions_on_the_policy_forms_and_text_in_the_sandbox(
        self,
    ) -> None:
        positions = {"ax-dropOrder-0": "memory", "ax-dropOrder-1": "", "ax-dropOrder-2": "system"}
        assert parse("dropOrder", **positions) == ["memory", "system"]
        text = {"axis_dropOrder": " tool_result, ,memory "}
        assert parse("dropOrder", OVERRIDE_INPUTS, **text) == ["tool_result", "memory"]

    def test_a_duration_is_an_amount_in_a_unit_on_the_policy_forms(self) -> None:
        age = {"ax-maxAgeSeconds": "1.5", "ax-maxAgeSeconds-unit": "hour"}
        assert parse("maxAgeSeconds", **age) == 5400
        assert parse("maxAgeSeconds", **{"ax-maxAgeSeconds": ""}) is None
        with pytest.raises(AxisInputError, match="use a smaller unit"):
            parse("maxAgeSeconds", **{**age, "ax-maxAgeSeconds-unit": "second"})
        with pytest.raises(AxisInputError, match="^At most a century"):
            parse("maxAgeSeconds", **{**age, "ax-maxAgeSeconds": "1e9999"})
        with pytest.raises(AxisInputError, match="^Choose days"):
            parse("maxAgeSeconds", **{**age, "ax-maxAgeSeconds-unit": "week"})

    def test_a_duration_is_whole_seconds_in_the_sandbox(self) -> None:
        assert parse("maxAgeSeconds", OVERRIDE_INPUTS, axis_maxAgeSeconds="86400") == 86400
        assert parse("maxAgeSeconds", OVERRIDE_INPUTS, axis_maxAgeSeconds="") is None
        with pytest.raises(AxisInputError, match="^Enter a whole number of seconds.$"):
            parse("maxAgeSeconds", OVERRIDE_INPUTS, axis_maxAgeSeconds="1.5")
        with pytest.raises(AxisInputError, match="^Enter a duration above zero"):
            parse("maxAgeSeconds", OVERRIDE_INPUTS, axis_maxAgeSeconds="0")


class BindAxisTests:
    def test_a_value_is_shown_as_each_page_draws_it(self) -> None:
        floor = default_floor()
        age = AXES["maxAgeSeconds"]
        in_units = bind_axis(age, POLICY_INPUTS, value=7 * 86_400)
        assert (in_units.widget, in_units.value) == ("duration", "7")
        assert [u.value for u in in_units.units if u.selected] == ["day"]
        in_seconds = bind_axis(age, OVERRIDE_INPUTS, value=7 * 86_400)
        assert (in_seconds.value, in_seconds.units) == ("604800", [])
        order = bind_axis(AXES["dropOrder"], OVERRIDE_INPUTS, value=floor["dropOrder"])
        assert (order.widget, order.value) == ("list", "tool_result, retrieval, memory")
        ceiling = bind_axis(AXES["perSegmentCeiling"], POLICY_INPUTS, value={"memory": 1200})
        assert [(e.input_name, e.value) for e in ceiling.entries][:2] == [
            ("ax-perSegmentCeiling-system_policy", ""),
            ("ax-perSegmentCeiling-memory", "1200"),
        ]

    def test_what_was_submitted_is_shown_instead_of_the_value(self) -> None:
        data = posted(**{"ax-sensitivityCeiling": "public", "ax-memoryTypeAllowed": ["fact"]})
        select = bind_axis(AXES["sensitivityCeiling"], POLICY_INPUTS, value="internal", data=data)
        assert [c.value for c in select.choices if c.selected] == ["public"]
        checks = bind_axis(AXES["memoryTypeAllowed"], POLICY_INPUTS, value=["entity"], data=data)
        assert [c.value for c in checks.choices if c.selected] == ["fact"]

    def test_a_stored_number_reads_back_as_itself(self) -> None:
        assert [input_text(v) for v in (None, 0.0, 0.25, 1e-05, 3200)] == [
            "",
            "0",
            "0.25",
            "1e-05",
            "3200",
        ]
        assert float(input_text(0.123456789)) == 0.123456789
