"""Mutants that gradcheck's random draws alone miss: a gradient wrong only for one combination of
choice, bool and int attrs (at the end of its range), a gradient wrong only for an empty list, and
a forward kernel with an off-by-one (reported as a forward bug, not as the gradient mismatch it
causes on all-zero inputs). Also: the report names the combinations it covered, warns when they
were sampled, and a failure's reproduce line reruns the very check that failed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from opsdk.cli.main import main
from opsdk.gradcheck import run_gradcheck
from opsdk.registry import load_registry

# y = x * scale(mode, flip, k); the gradient op is chosen per op.
SCALE = """\
op: {name}
summary: x times a factor chosen by the attrs.
type_attrs: {{T: [float64]}}
attrs:
  mode: {{type: str, default: a, choices: [a, b, c, d, e]}}
  flip: {{type: bool, default: false}}
  k: {{type: int, default: 1, min: 1, max: 5}}
inputs:
  x: {{dtype: T, shape: [n]}}
outputs:
  y: {{dtype: T, shape: [n]}}
gradient: {name}_grad
kernels: {{python: kernels.py:scale}}
reference: "x * ('abcde'.index(mode) + 1) * (-1 if flip else 1) * k"
gradcheck: {gradcheck}
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs: {{T: [float64]}}
attrs:
  mode: {{type: str, default: a, choices: [a, b, c, d, e]}}
  flip: {{type: bool, default: false}}
  k: {{type: int, default: 1, min: 1, max: 5}}
inputs:
  x: {{dtype: T, shape: [n]}}
  grad_y: {{dtype: T, shape: [n]}}
outputs:
  grad_x: {{dtype: T, shape: [n]}}
kernels: {{python: kernels.py:{grad}}}
"""

# y = x + the sum of the tensors of xs (which may be none).
LSUM = """\
op: {name}
summary: x plus each tensor of xs.
type_attrs: {{T: [float64]}}
attrs:
  N: {{type: int, min: 0, max: 2}}
inputs:
  x: {{dtype: T, shape: [n]}}
  xs: {{dtype: T, shape: [n], list: N}}
outputs:
  y: {{dtype: T, shape: [n]}}
gradient: {name}_grad
kernels: {{python: kernels.py:lsum}}
reference: "x + sum(xs)"
gradcheck: {gradcheck}
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs: {{T: [float64]}}
attrs:
  N: {{type: int, min: 0, max: 2}}
inputs:
  x: {{dtype: T, shape: [n]}}
  xs: {{dtype: T, shape: [n], list: N}}
  grad_y: {{dtype: T, shape: [n]}}
outputs:
  grad_x: {{dtype: T, shape: [n]}}
  grad_xs: {{dtype: T, shape: [n], list: N}}
kernels: {{python: kernels.py:{grad}}}
"""

# y = 2x, with a forward kernel that may read the next element instead of this one.
DOUBLE = """\
op: {name}
summary: Twice x.
type_attrs: {{T: [float64]}}
inputs:
  x: {{dtype: T, shape: [n]}}
outputs:
  y: {{dtype: T, shape: [n]}}
gradient: {name}_grad
kernels: {{python: kernels.py:{forward}}}
reference: "2 * x"
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs: {{T: [float64]}}
inputs:
  x: {{dtype: T, shape: [n]}}
  grad_y: {{dtype: T, shape: [n]}}
outputs:
  grad_x: {{dtype: T, shape: [n]}}
kernels: {{python: kernels.py:twice_grad}}
"""

KERNELS = """\
def _factor(mode, flip, k):
    return ("abcde".index(mode) + 1) * (-1 if flip else 1) * k


def scale(xp, x, mode, flip, k):
    return x * _factor(mode, flip, k)


def scale_grad(xp, x, grad_y, mode, flip, k):
    return grad_y * _factor(mode, flip, k)


def scale_grad_wrong_for_e_flip_k5(xp, x, grad_y, mode, flip, k):
    # Wrong on purpose for one combination of 50, with k at the end of its range.
    wrong = mode == "e" and flip and k == 5
    return grad_y * _factor(mode, flip, k) * (2 if wrong else 1)


def lsum(xp, x, xs, N):
    out = xp.array(x, copy=True)
    for t in xs:
        out = out + t
    return out


def lsum_grad(xp, x, xs, grad_y, N):
    return grad_y, [grad_y for _ in xs]


def lsum_grad_wrong_when_empty(xp, x, xs, grad_y, N):
    # Wrong on purpose for the empty list only.
    return (grad_y if len(xs) else 0 * grad_y), [grad_y for _ in xs]


def twice(xp, x):
    return 2 * x


def twice_off_by_one(xp, x):
    # Wrong on purpose: reads x[i + 1] (the last element reads itself).
    return x + xp.concatenate([x[1:], x[-1:]])


def twice_grad(xp, x, grad_y):
    return 2 * grad_y
"""

DEFAULTS = "{dims: [1, 3]}"
RANDOM_ONLY = "{dims: [1, 3], max_combinations: 0}"  # the draws of before: no combination cases
OPS = {
    "scale_right": SCALE.format(name="scale_right", gradcheck=DEFAULTS, grad="scale_grad"),
    "scale_wrong": SCALE.format(name="scale_wrong", gradcheck=DEFAULTS, grad="scale_grad_wrong_for_e_flip_k5"),
    "scale_wrong_random": SCALE.format(name="scale_wrong_random", gradcheck=RANDOM_ONLY,
                                       grad="scale_grad_wrong_for_e_flip_k5"),
    "scale_sampled": SCALE.format(name="scale_sampled", gradcheck="{dims: [1, 3], max_combinations: 6}",
                                  grad="scale_grad"),
    "lsum_wrong": LSUM.format(name="lsum_wrong", gradcheck=DEFAULTS, grad="lsum_grad_wrong_when_empty"),
    "lsum_right": LSUM.format(name="lsum_right", gradcheck=DEFAULTS, grad="lsum_grad"),
    "double_right": DOUBLE.format(name="double_right", forward="twice"),
    "double_wrong": DOUBLE.format(name="double_wrong", forward="twice_off_by_one"),
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("combinations_ws")
    opdefs = root / "opdefs"
    opdefs.mkdir()
    (opdefs / "kernels.py").write_text(KERNELS)
    for name, text in OPS.items():
        (opdefs / f"{name}.yaml").write_text(text)
    return root


def _gradcheck(workspace: Path, capsys, *args: str) -> tuple[int, str]:
    code = main(["gradcheck", "-C", str(workspace), *args])
    return code, capsys.readouterr().out


def test_a_gradient_wrong_for_one_attr_combination_is_caught_by_default(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "scale_wrong", "scale_right")
    assert code == 1, out
    assert "scale_wrong on python: gradient mismatch" in out
    assert re.search(r"case: dims n=\d; attrs mode='e' flip=true k=5;", out), out
    assert "scale_right on python: 20/20 combinations of mode 'a','b','c','d','e' x flip false,true x k 1,5 checked" in out


def test_random_draws_alone_miss_it(workspace, capsys):
    # The control: without the combination cases (max_combinations: 0) the 25 drawn cases pass.
    code, out = _gradcheck(workspace, capsys, "scale_wrong_random")
    assert code == 0, out


def test_a_sampled_grid_is_reported_as_partial(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "scale_sampled")
    assert code == 0, out
    assert ("warning: scale_sampled on python: attr coverage is partial: 6 of 20 combinations sampled "
            "(gradcheck.max_combinations is 6; raise it to check them all)") in out


def test_a_gradient_wrong_only_for_the_empty_list_is_caught(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "lsum_wrong", "lsum_right")
    assert code == 1, out
    assert "lsum_wrong on python: gradient mismatch" in out and "lists N=0" in out, out
    assert "lsum_right on python: 2/2 combinations of N 0,2 checked" in out


def test_an_off_by_one_forward_is_reported_as_a_forward_bug(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "double_wrong", "double_right")
    assert code == 1, out
    failure = out[out.index("double_wrong on python:"):]
    assert failure.startswith("double_wrong on python: forward mismatch"), failure
    assert "gradient mismatch" not in out
    # Not an all-zero input: the values shown differ from each other and from 0.
    x = [float(v) for v in re.search(r"x = \[([^\]]*)\]", failure).group(1).split(",")]
    assert len(x) >= 2 and 0.0 not in x and len(set(x)) == len(x), failure


def test_the_reproduce_line_carries_every_option_and_reproduces(workspace, capsys):
    code, out = _gradcheck(workspace, capsys, "scale_wrong", "--seed", "3", "--max-examples", "7")
    assert code == 1, out
    line = re.search(r"reproduce: (.*)", out).group(1)
    assert line == f"opsdk gradcheck scale_wrong --seed 3 --max-examples 7 -C {shlex.quote(str(workspace))}"
    counterexample = out[out.index("scale_wrong on python:"):out.index("reproduce:")]
    again_code, again = _gradcheck_line(line, capsys)
    assert again_code == 1 and counterexample in again, again


def _gradcheck_line(line: str, capsys) -> tuple[int, str]:
    argv = shlex.split(line)
    assert argv[:2] == ["opsdk", "gradcheck"]
    code = main(argv[1:])
    return code, capsys.readouterr().out


def test_run_gradcheck_records_max_examples_for_the_reproduce_line(workspace):
    report = run_gradcheck(load_registry(workspace), ["scale_right"], max_examples=4)
    assert report.ok and report.max_examples == 4
