"""The rewrite that gives the pinned model int8 matrix products (``recall.onnx_int8``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from recall.embedding_onnx import default_model_path
from recall.onnx_int8 import FLOAT, INT8, INT8_MATMUL, MS_DOMAIN, _model_class, int8_matmuls

INT32 = 6


def parsed(model: bytes) -> Any:
    return _model_class().FromString(model)


def tiny(
    *,
    scale_dims: list[int],
    cast_to: int = FLOAT,
    mul_read_again: bool = False,
    subgraph: bool = False,
) -> bytes:
    """``y = x @ (float(W) * s)`` with ``W`` a 4×3 int8 initializer, as the pinned file
    writes its products; with ``mul_read_again``, a second node reads the scaled weights; with
    ``subgraph``, an ``If`` node's branches might."""
    model = _model_class()()
    graph = model.graph
    graph.initializer.add(name="W", data_type=INT8, dims=[4, 3])
    graph.initializer.add(name="s", data_type=FLOAT, dims=scale_dims)
    cast = graph.node.add(name="cast", op_type="Cast", input=["W"], output=["W_f"])
    cast.attribute.add(name="to", i=cast_to)
    graph.node.add(name="mul", op_type="Mul", input=["W_f", "s"], output=["W_scaled"])
    graph.node.add(name="matmul", op_type="MatMul", input=["x", "W_scaled"], output=["y"])
    if mul_read_again:
        graph.node.add(name="again", op_type="Identity", input=["W_scaled"], output=["z"])
    if subgraph:  # its branches (left out here) could read W_scaled from the graph around
        graph.node.add(name="branch", op_type="If", input=["flag"], output=["z"])
    graph.output.add(name="y")
    model.opset_import.add(domain="", version=17)
    serialized: bytes = model.SerializeToString()
    return serialized


class Int8MatmulsTests:
    @pytest.mark.parametrize("scale_dims", [[], [1], [3], [1, 3]])
    def test_a_product_by_int8_weights_scaled_per_column_runs_in_int8(
        self, scale_dims: list[int]
    ) -> None:
        rewritten = parsed(int8_matmuls(tiny(scale_dims=scale_dims)))
        (node,) = rewritten.graph.node  # the Cast and the Mul went with nothing to read them
        assert (node.op_type, node.domain, node.name) == (INT8_MATMUL, MS_DOMAIN, "matmul")
        assert (list(node.input), list(node.output)) == (["x", "W", "s"], ["y"])
        opsets = [(o.domain, o.version) for o in rewritten.opset_import]
        assert opsets == [("", 17), (MS_DOMAIN, 1)]

    @pytest.mark.parametrize(
        "model",
        [
            pytest.param(tiny(scale_dims=[4, 1]), id="a scale per row"),
            pytest.param(tiny(scale_dims=[2]), id="a scale of another width"),
            pytest.param(tiny(scale_dims=[1, 3], cast_to=INT32), id="cast to int32"),
        ],
    )
    def test_any_other_product_is_left_as_it_was(self, model: bytes) -> None:
        assert int8_matmuls(model) == model

    def test_scaled_weights_another_node_reads_stay(self) -> None:
        rewritten = parsed(int8_matmuls(tiny(scale_dims=[1, 3], mul_read_again=True)))
        ops = [node.op_type for node in rewritten.graph.node]
        assert ops == ["Cast", "Mul", INT8_MATMUL, "Identity"]

    def test_a_graph_with_subgraphs_keeps_the_weights_steps_they_could_read(self) -> None:
        rewritten = parsed(int8_matmuls(tiny(scale_dims=[1, 3], subgraph=True)))
        ops = [node.op_type for node in rewritten.graph.node]
        assert ops == ["Cast", "Mul", INT8_MATMUL, "If"]

    def test_the_pinned_model_gets_its_36_products_in_int8_and_nothing_else_changes(
        self,
    ) -> None:
        original = default_model_path().read_bytes()
        rewritten = int8_matmuls(original)
        before, after = parsed(original), parsed(rewritten)
        ops_before = Counter(node.op_type for node in before.graph.node)
        ops_after = Counter(node.op_type for node in after.graph.node)
        assert ops_after[INT8_MATMUL] == 36
        assert ops_before["MatMul"] - ops_after["MatMul"] == 36  # attention's stay in fp32
        # The weights' Cast and Mul went; the embeddings' dequantisation stays.
        assert ops_before["Cast"] - ops_after["Cast"] == 36
        assert ops_before["Mul"] - ops_after["Mul"] == 36
        # Every initializer and every node not rewritten is as it was, byte for byte (the
        # fields the rewrite does not know pass through).
        assert [t.SerializeToString() for t in after.graph.initializer] == [
            t.SerializeToString() for t in before.graph.initializer
        ]
        untouched = {n.SerializeToString() for n in before.graph.node}
        kept = [n for n in after.graph.node if n.op_type != INT8_MATMUL]
        assert all(n.SerializeToString() in untouched for n in kept)
        assert int8_matmuls(rewritten) == rewritten
