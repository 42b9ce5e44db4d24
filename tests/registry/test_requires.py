"""`requires:`: conditions on attrs in the declaration. Parsed with their lines, refused where
they read anything but attrs, checked before any kernel runs, and used by gradcheck to leave out
the attr combinations no call may make (each once cost a long search for a case the op takes)."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.gradcheck.attr_draws import attr_grid
from opsdk.gradcheck.strategies import plan_op
from opsdk.registry import normalize_attrs
from opsdk.registry.errors import OpError

STRIDED = """\
op: strided
summary: A strided copy.
attrs:
  stride: {type: int, default: 1, min: 1}
  extra: {type: int, default: 0, min: 0}
  padding: {type: str, default: valid, choices: [valid, same]}
  flip: {type: bool, default: false}
requires:
  - extra < stride
  - "padding == 'same' or not flip"
inputs:
  x: {dtype: float64, shape: [n]}
outputs:
  y: {dtype: float64, shape: [n]}
kernels: {python: kernels.py:foo}
gradcheck: {attrs: {stride: [1, 2], extra: [0, 1]}}
"""


def test_requirements_are_parsed_with_their_lines(ws):
    spec = ws.parse(STRIDED)
    assert [r.text for r in spec.requires] == ["extra < stride", "padding == 'same' or not flip"]
    assert [r.location.line for r in spec.requires] == [9, 10]


def test_a_call_breaking_a_requirement_is_refused_naming_it_and_the_values(ws):
    spec = ws.parse(STRIDED)
    assert normalize_attrs(spec, {"stride": 2, "extra": 1})["extra"] == 1
    with pytest.raises(OpError, match=r"strided: attrs must meet `extra < stride` \(requires: at "
                                      r"opdefs/op\.yaml:9\), got extra=1, stride=1"):
        normalize_attrs(spec, {"extra": 1})
    with pytest.raises(OpError, match=r"`padding == 'same' or not flip`.*flip=True, padding='valid'"):
        normalize_attrs(spec, {"flip": True})


@pytest.mark.parametrize("requirement, message", [
    ("extra < n", "reads 'n', which is not an attr of the op"),
    ("stride + 1", "is not a condition"),
    ("extra <", "requires: cannot parse condition"),
    ("padding == 'diagonal'", "diagonal"),
    ("[1]", "a requirement must be a non-empty string"),
])
def test_a_wrong_requirement_is_a_located_error(ws, requirement, message):
    text = STRIDED.replace("  - extra < stride\n", f"  - {requirement}\n" if requirement != "[1]" else "  - [1]\n")
    error = ws.error(text)
    assert "opdefs/op.yaml:9:" in error and message in error, error


def test_gradcheck_leaves_out_the_combinations_a_requirement_refuses(ws):
    plan = plan_op(ws.parse(STRIDED))
    spec = plan.spec
    from opsdk.registry.attrs import unmet_requirement

    grid = attr_grid(plan.attrs, plan.list_lens, 64, 0, plan.optional,
                     lambda attrs: unmet_requirement(spec, attrs) is None)
    combos = [dict(zip(grid.names, c)) for c in grid.combos]
    assert combos and all(c["extra"] < c["stride"] for c in combos)
    assert all(c["padding"] == "same" or not c["flip"] for c in combos)
    # stride 1,2 x extra 0,1 x padding 2 x flip 2 = 16; extra < stride keeps 3 of 4, the other 3 of 4
    assert (grid.total, grid.excluded) == (9, 7)


def test_the_builtin_conv2d_transpose_declares_its_stride_requirement():
    import opsdk

    x, f = np.ones((1, 3, 3, 2)), np.ones((2, 2, 4, 2))
    assert opsdk.ops.conv2d_transpose(x, f, stride_h=2, extra_h=1).shape == (1, 6, 3, 4)
    with pytest.raises(OpError, match="extra_h < stride_h"):
        opsdk.ops.conv2d_transpose(x, f, extra_h=1)
