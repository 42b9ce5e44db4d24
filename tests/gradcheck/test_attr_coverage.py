"""Attr values listed under `gradcheck: {attrs: ...}` are checked: a gradient that is wrong only
for a non-default attr value is caught once the value is listed, and the report counts the
attr combinations that were checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opsdk.cli.main import main

# The "sizes checked" column: per dim its sizes ("x 1-3,15-17; y 2"), or "-".
SIZES = r"(?:[a-z_]\w* [\d,-]+(?:; [a-z_]\w* [\d,-]+)*|-)"

# y = sum(x over axes); the gradient op is named per op so that one workspace holds the right
# gradient and one that ignores `axes` (treating every reduction as a sum over all axes), which
# is right for the default `axes: []` and wrong for any other.
RSUM = """\
op: {name}
summary: Sum of x over attr axes.
type_attrs:
  T: [float64]
attrs:
  axes: {{type: list(int), default: []}}
  keepdims: {{type: bool, default: false}}
inputs:
  x: {{dtype: T}}
outputs:
  y: {{dtype: T}}
shape_fn: reduce
gradient: {name}_grad
kernels:
  python: kernels.py:rsum
reference: "np.sum(x, axis=(*axes,) or None, keepdims=keepdims)"
gradcheck: {gradcheck}
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs:
  T: [float64]
attrs:
  axes: {{type: list(int), default: []}}
  keepdims: {{type: bool, default: false}}
inputs:
  x: {{dtype: T}}
  grad_y: {{dtype: T}}
outputs:
  grad_x: {{dtype: T}}
shape_fn: like_x
gradient: null
kernels:
  python: kernels.py:{grad_fn}
"""

KERNELS = """\
def _axes(axes, ndim):
    return tuple(range(ndim)) if not axes else tuple(a % ndim for a in axes)


def rsum(xp, x, axes, keepdims):
    return xp.asarray(xp.sum(x, axis=_axes(axes, x.ndim), keepdims=keepdims))


def rsum_grad(xp, x, grad_y, axes, keepdims):
    kept = tuple(1 if i in _axes(axes, x.ndim) else d for i, d in enumerate(x.shape))
    return xp.array(xp.broadcast_to(xp.reshape(grad_y, kept), x.shape))


def rsum_grad_ignoring_axes(xp, x, grad_y, axes, keepdims):
    # Wrong on purpose: every element gets the sum of all of grad_y, as if axes were [].
    return xp.full(x.shape, xp.sum(grad_y))
"""

LISTED = "{dims: [1, 3], max_examples: 30, attrs: {axes: [[], [0], [-1]]}}"
OPS = {
    # name: (gradcheck settings, gradient kernel)
    "wrong_unlisted": ("{dims: [1, 3], max_examples: 30}", "rsum_grad_ignoring_axes"),
    "wrong_listed": (LISTED, "rsum_grad_ignoring_axes"),
    "right_listed": ("{dims: [1, 3], max_examples: 30, attrs: {axes: [[], [0], [-1], [7]]}}", "rsum_grad"),
    "never_fits": ("{dims: [1, 3], max_examples: 5, attrs: {axes: [[7], [-9]]}}", "rsum_grad"),
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("attrs_ws")
    opdefs = root / "opdefs"
    opdefs.mkdir()
    (opdefs / "kernels.py").write_text(KERNELS)
    for name, (gradcheck, grad_fn) in OPS.items():
        (opdefs / f"{name}.yaml").write_text(RSUM.format(name=name, gradcheck=gradcheck, grad_fn=grad_fn))
    return root


def test_wrong_gradient_for_default_axes_only_passes_when_axes_are_not_listed(workspace, capsys):
    # The gap this key closes: with axes kept at [], the broken gradient looks right.
    code = main(["gradcheck", "wrong_unlisted", "-C", str(workspace)])
    out = capsys.readouterr().out
    assert code == 0, out
    # keepdims is a bool, drawn both ways even when not listed: 2 combinations, both checked.
    assert re.search(r"wrong_unlisted\s+python\s+\d+\s+2/2\s+" + SIZES + r"\s+\S+\s+float64 rtol=0\.0001 atol=1e-06\s+pass", out), out


def test_wrong_gradient_is_caught_once_axes_are_listed(workspace, capsys):
    code = main(["gradcheck", "wrong_listed", "-C", str(workspace), "--seed", "5"])
    out = capsys.readouterr().out
    assert code == 1 and "1 failing: " in out and "::wrong_listed (python)" in out, out
    assert "gradient mismatch" in out
    # The counterexample reduces over one axis: the attrs that the broken gradient ignores.
    case = re.search(r"case: (.*)", out).group(1)
    assert re.search(r"axes=\[(0|-1)\]", case), case
    assert "reproduce: opsdk gradcheck wrong_listed --seed 5" in out


def test_report_counts_checked_combinations_and_names_listed_values_never_checked(workspace, capsys):
    code = main(["gradcheck", "right_listed", "-C", str(workspace)])
    out = capsys.readouterr().out
    assert code == 0, out
    # 4 axes x 2 keepdims can be drawn; axes [7] never fits a drawn x (rank <= 3), so at most 6.
    row = re.search(r"right_listed\s+python\s+(\d+)\s+(\d+)/8\s+" + SIZES + r"\s+(\S+)\s+float64 rtol=0\.0001 atol=1e-06\s+pass", out)
    assert row and 4 <= int(row.group(2)) <= 6 and float(row.group(3)) <= 1.0, out
    assert "note: right_listed on python: no checked case used axes=[7]" in out


def test_listed_values_that_never_fit_are_nothing_checked_not_a_pass(workspace, capsys):
    code = main(["gradcheck", "never_fits", "-C", str(workspace), "--max-examples", "3"])
    out = capsys.readouterr().out
    assert code == 1 and re.search(r"never_fits\s+python\s+0\s+0/4\s+-\s+-\s+float64 rtol=0\.0001 atol=1e-06\s+error", out), out
    assert "no valid case could be drawn" in out and "out of range" in out
