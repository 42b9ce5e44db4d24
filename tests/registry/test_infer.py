"""Shape and dtype inference from declarations: binding, checks, unknowns, expressions."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry import OpError, axis_phrase, axis_word, infer_outputs, parse_opdef, resolve_type_attrs

OPS = """
op: pm
summary: Pairwise.
type_attrs: {T: [float32, float64]}
inputs:
  x: {dtype: T, shape: [n, p]}
  y: {dtype: T, shape: [m, p]}
outputs:
  z: {dtype: T, shape: [n, m]}
kernels: {python: kernels.py:foo}
---
op: windows
summary: Expressions, constants, ellipsis and fixed dtypes.
attrs:
  k: {type: int, default: 2, min: 1}
inputs:
  x: {dtype: float64, shape: [..., n, 3]}
  idx: {dtype: int64, shape: [...]}
outputs:
  y: {dtype: float64, shape: [..., "n - k + 1", 3]}
  count: {dtype: int32, shape: ["max(n, k)"]}
kernels: {python: kernels.py:foo}
---
op: stack_like
summary: List inputs and outputs; an unbound type attr.
type_attrs:
  T: [float32]
  DstT: {allowed: [float32, float64], default: float64}
inputs:
  xs: {dtype: T, shape: [d], list: N}
outputs:
  y: {dtype: DstT, shape: [N, d]}
  parts: {dtype: T, shape: [d], list: N}
kernels: {python: kernels.py:foo}
---
op: by_fn
summary: Shapes from a file shape function.
shape_fn: shapes.py:transpose
type_attrs: {T: [float32]}
inputs:
  x: {dtype: T}
outputs:
  y: {dtype: T}
kernels: {python: kernels.py:foo}
"""

SHAPES_PY = '''
def transpose(shapes, attrs):
    x = shapes["x"]
    if x is not None and len(x) != 2:
        raise ValueError(f"x must be a matrix, got rank {len(x)}")
    return [None if x is None else tuple(reversed(x))]
'''


@pytest.fixture
def ops(ws):
    (ws.opdefs / "shapes.py").write_text(SHAPES_PY)
    return {spec.name: spec for spec in parse_opdef(ws.write("ops.yaml", OPS), ws.root)}


def test_axis_words():
    assert [axis_word(0, 2), axis_word(1, 2), axis_word(0, 1), axis_word(2, 3)] == [
        "rows", "columns", "size in axis 0", "size in axis 2"]
    assert axis_phrase(4, 1, 2) == "4 columns" and axis_phrase("{}", 2, 3) == "size {} in axis 2"


def test_dims_bind_across_inputs_and_unknowns_propagate(ops):
    pm = ops["pm"]
    assert infer_outputs(pm, [(4, 3), (5, 3)], ["float32", "float32"], {}) == [((4, 5), "float32")]
    assert infer_outputs(pm, [(4, None), (None, 3)], [np.float64, np.dtype("float64")], {}) == [((4, None), "float64")]
    assert infer_outputs(pm, {"x": None, "y": (2, 7)}, {"x": "float32", "y": None}, {}) == [((None, 2), "float32")]


@pytest.mark.parametrize("shapes, dtypes, message", [
    ([(4, 3), (5, 4)], ["float32"] * 2, "pm: input 'y' has 4 columns but x has 3 (dim p)"),
    ([(4, None), (5, 4), ], ["float32"] * 2, None),
    ([(4, 3, 1), (5, 3)], ["float32"] * 2, "pm: input 'x' must have rank 2 ([n, p]), got rank 3"),
    ([(4, 3), (5, 3)], ["int32", "float32"], "pm: input 'x' has dtype int32; expected float32 or float64 (type attr T)"),
    ([(4, 3), (5, 3)], ["float32", "float64"], "pm: inputs 'x' and 'y' share type attr T but have float32 and float64"),
    ([(4, 3)], ["float32"], "pm: takes 2 inputs (x, y), got 1 dtypes"),
])
def test_pairwise_mistakes(ops, shapes, dtypes, message):
    if message is None:
        assert infer_outputs(ops["pm"], shapes, dtypes, {}) == [((4, 5), "float32")]
        return
    with pytest.raises(OpError) as info:
        infer_outputs(ops["pm"], shapes, dtypes, {})
    assert str(info.value) == message


def test_expressions_constants_and_ellipsis(ops):
    op = ops["windows"]
    assert infer_outputs(op, [(2, 7, 5, 3), (2, 7)], ["float64", "int64"], {"k": 2}) == [
        ((2, 7, 4, 3), "float64"), ((5,), "int32")]
    # `...` from an input of unknown rank: the output's rank is unknown too.
    assert infer_outputs(op, [None, None], ["float64", "int64"], {"k": 3}) == [(None, "float64"), ((None,), "int32")]
    assert infer_outputs(op, [(None, 5, 3), (4,)], ["float64", "int64"], {"k": 1})[0][0] == (4, 5, 3)


@pytest.mark.parametrize("shapes, attrs, message", [
    ([(5, 4), ()], {"k": 2}, "windows: input 'x' must have 3 columns, got 4"),
    ([(2, 7, 5, 3), (2, 6)], {"k": 2}, "windows: input 'idx' has leading dims (2, 6) but x has (2, 7) (the '...' dims)"),
    ([(3,), ()], {"k": 2}, "windows: input 'x' must have rank >= 2 ([..., n, 3]), got rank 1"),
    ([(2, 3), ()], {"k": 5}, "windows: output 'y' would have size -2 in axis 0 (n - k + 1); check the inputs and attrs"),
    ([(7, 2, 3), (7,)], {"k": 5}, "windows: output 'y' would have size -2 in axis 1 (n - k + 1); check the inputs and attrs"),
])
def test_expression_op_mistakes(ops, shapes, attrs, message):
    with pytest.raises(OpError) as info:
        infer_outputs(ops["windows"], shapes, ["float64", "int64"], attrs)
    assert str(info.value) == message


def test_fixed_dtype_mismatch(ops):
    with pytest.raises(OpError, match=r"^windows: input 'idx' has dtype int32; expected int64$"):
        infer_outputs(ops["windows"], [(5, 3), ()], ["float64", "int32"], {"k": 1})


def test_list_inputs_and_unbound_type_attrs(ops):
    op = ops["stack_like"]
    result = infer_outputs(op, [[(4,), (4,), (None,)]], [["float32"] * 3], {"N": 3})
    assert result == [((3, 4), "float64"), ([(4,), (4,), (4,)], "float32")]
    assert infer_outputs(op, [[(4,)]], ["float32"], {"N": 1, "DstT": np.float32})[0] == ((1, 4), "float32")
    with pytest.raises(OpError, match=r"^stack_like: input 'xs\[1\]' has size 5 in axis 0 but xs\[0\] has 4 \(dim d\)$"):
        infer_outputs(op, [[(4,), (5,)]], ["float32"], {"N": 2})
    with pytest.raises(OpError, match=r"^stack_like: type attr 'DstT' must be float32 or float64, got 'int8'$"):
        resolve_type_attrs(op, ["float32"], {"DstT": "int8"})


def test_resolve_type_attrs(ops):
    assert resolve_type_attrs(ops["stack_like"], ["float32"], {}) == {"T": "float32", "DstT": "float64"}
    assert resolve_type_attrs(ops["pm"], [None, None], {}) == {"T": None}


def test_shape_fn_from_a_file(ops):
    op = ops["by_fn"]
    assert infer_outputs(op, [(2, 5)], ["float32"], {}) == [((5, 2), "float32")]
    assert infer_outputs(op, [None], ["float32"], {}) == [(None, "float32")]
    with pytest.raises(OpError, match=r"^by_fn: x must be a matrix, got rank 3$"):
        infer_outputs(op, [(1, 2, 3)], ["float32"], {})
