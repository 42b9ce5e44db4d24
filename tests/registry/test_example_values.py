"""`example:` in the declaration: input values the docstring example uses instead of random ones
(reshape_dims' example drew a random shape, which almost never holds x's elements, and failed)."""

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
    assert ws.error(bad_name) == ("opdefs/op.yaml:11: op 'reshaper': example: 'dimz' is not an input "
                                  "of the op (give values for x, dims)")
    bad_value = RESHAPE.replace("example: {dims: [3, 2]}", "example:\n  dims: [3, two]")
    assert ws.error(bad_value) == ("opdefs/op.yaml:11: op 'reshaper': example: input 'dims' must be a "
                                   "number or a nested list of numbers, e.g. [3, 2]")
