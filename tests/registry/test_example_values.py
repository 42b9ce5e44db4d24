"""`example:` in the declaration: input values the docstring example uses instead of random ones
(reshape_dims' example drew a random shape, which almost never holds x's elements, and failed),
and attr values it uses instead of defaults (einsum's equation, which has none that fits)."""

from __future__ import annotations

from opsdk.codegen.wrappers import example_lines

RESHAPE = """\
op: reshaper
summary: x with the shape dims.
inputs:
  x: {dtype: float64}
  dims: {dtype: int64, shape: [r]}
outputs:
  y: {dtype: float64}
shape_fn: like_x
kernels: {python: kernels.py:foo}
example: {dims: [3, 2]}
"""


def test_example_values_are_parsed_and_reach_the_docstring_example(ws):
    spec = ws.parse(RESHAPE)
    assert spec.example == (("dims", (3, 2)),)
    lines = example_lines(spec)
    assert ">>> dims = np.array([3, 2], dtype=np.int64)" in lines
    assert any(line.startswith(">>> x = rng.uniform") for line in lines)


def test_an_example_naming_no_input_or_holding_text_is_an_error_at_its_line(ws):
    bad_name = RESHAPE.replace("example: {dims: [3, 2]}", "example:\n  dimz: [3, 2]")
    assert ws.error(bad_name) == ("opdefs/op.yaml:11: op 'reshaper': example: 'dimz' is neither an "
                                  "input (not a list) nor an attr of the op (give values for x, "
                                  "dims)")
    bad_value = RESHAPE.replace("example: {dims: [3, 2]}", "example:\n  dims: [3, two]")
    assert ws.error(bad_value) == ("opdefs/op.yaml:11: op 'reshaper': example: input 'dims' must be a "
                                   "number or a nested list of numbers, e.g. [3, 2]")


EQUATION = """\
op: contract
summary: Sums of products over an equation.
attrs:
  equation: {type: str}
  scale: {type: int, default: 1, min: 1}
inputs:
  xs: {dtype: float64, list: N}
outputs:
  y: {dtype: float64}
shape_fn: like_x
kernels: {python: kernels.py:foo}
example: {equation: "ij,ij->i"}
"""


def test_an_attr_example_replaces_its_default_and_is_checked_like_one(ws):
    spec = ws.parse(EQUATION)
    assert spec.example == (("equation", "ij,ij->i"),)
    assert any("contract(xs, equation='ij,ij->i')" in line for line in example_lines(spec))
    bad = EQUATION.replace('example: {equation: "ij,ij->i"}', "example: {scale: 0}")
    assert ws.error(bad) == "opdefs/op.yaml:12: op 'contract': example: attr 'scale': 0 must be >= 1"
    length = EQUATION.replace('example: {equation: "ij,ij->i"}', "example: {N: 3}")
    assert "example: 'N' is neither an input (not a list) nor an attr" in ws.error(length)
