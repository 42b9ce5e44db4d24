"""gradcheck and optional inputs: every case gives an optional input or leaves it out, both are
covered by default (the report says `w given,absent`), the reference sees None for an absent one,
and a gradient wrong only when the weight is absent is caught (the same op with it right
passes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opsdk.cli.main import main

# y = x * w (w: 1 when absent); the gradient kernel is chosen per op.
WSCALE = """\
op: {name}
summary: x times an optional weight.
type_attrs: {{T: [float64]}}
inputs:
  x: {{dtype: T, shape: [n]}}
  w: {{dtype: T, shape: [n], optional: true}}
outputs:
  y: {{dtype: T, shape: [n]}}
gradient: {name}_grad
kernels: {{python: kernels.py:wscale}}
reference: "x * (1 if w is None else w)"
gradcheck: {{dims: [1, 3]}}
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs: {{T: [float64]}}
inputs:
  x: {{dtype: T, shape: [n]}}
  w: {{dtype: T, shape: [n], optional: true}}
  grad_y: {{dtype: T, shape: [n]}}
outputs:
  grad_x: {{dtype: T, shape: [n]}}
  grad_w: {{dtype: T, shape: [n]}}
kernels: {{python: kernels.py:{grad}}}
"""

KERNELS = """\
def wscale(xp, x, w):
    return x if w is None else x * w


def wscale_grad(xp, x, w, grad_y):
    if w is None:
        return grad_y.copy(), xp.zeros_like(x)
    return grad_y * w, grad_y * x


def wscale_grad_wrong_when_absent(xp, x, w, grad_y):
    # Wrong on purpose when w is left out only.
    if w is None:
        return 2 * grad_y, xp.zeros_like(x)
    return grad_y * w, grad_y * x
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("optional_ws")
    opdefs = root / "opdefs"
    opdefs.mkdir()
    (opdefs / "kernels.py").write_text(KERNELS)
    (opdefs / "right.yaml").write_text(WSCALE.format(name="wscale_right", grad="wscale_grad"))
    (opdefs / "wrong.yaml").write_text(WSCALE.format(name="wscale_wrong", grad="wscale_grad_wrong_when_absent"))
    return root


def _gradcheck(workspace: Path, capsys, *args: str) -> tuple[int, str]:
    code = main(["gradcheck", "-C", str(workspace), *args])
    return code, capsys.readouterr().out


def test_both_presences_are_checked_and_reported(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "wscale_right")
    assert code == 0, out
    assert "wscale_right on python: 2/2 combinations of w given,absent checked" in out


def test_a_gradient_wrong_only_without_the_input_is_caught(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "wscale_wrong")
    assert code == 1, out
    assert "wscale_wrong on python: gradient mismatch" in out
    assert re.search(r"case: dims n=\d; x float64\[\d\], w absent", out), out
