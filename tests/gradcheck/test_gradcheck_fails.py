"""A wrong gradient makes `opsdk gradcheck` fail with a shrunk counterexample; its twin passes."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from opsdk.cli.main import main
from opsdk.registry.spec import GradCheckSpec

# The "sizes checked" column: per dim its sizes ("x 1-3,15-17; y 2"), or "-".
SIZES = r"(?:[a-z_]\w* [\d,-]+(?:; [a-z_]\w* [\d,-]+)*|-)"

# y = x^3, with two gradient ops: the right one, and one that is wrong only for negative x
# (3 x |x| instead of 3 x^2), which the checker must find and shrink to a single element.
CUBE = """\
op: {name}
summary: x cubed.
type_attrs:
  T: [float64]
inputs:
  x: {{dtype: T, shape: [n, m]}}
outputs:
  y: {{dtype: T, shape: [n, m]}}
gradient: {name}_grad
kernels:
  python: kernels.py:{forward_fn}
reference: "x ** 3"
gradcheck: {{max_examples: 15, dims: [0, 3]}}
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs:
  T: [float64]
inputs:
  x: {{dtype: T, shape: [n, m]}}
  grad_y: {{dtype: T, shape: [n, m]}}
outputs:
  grad_x: {{dtype: T, shape: [n, m]}}
gradient: null
kernels:
  {grad_kernel}
"""

KERNELS = """\
def cube(xp, x):
    return x * x * x


def cube_grad(xp, x, grad_y):
    return 3 * x * x * grad_y


def cube_grad_wrong(xp, x, grad_y):
    return 3 * x * xp.abs(x) * grad_y


def cube_refusing_all(xp, x):
    from opsdk.registry.errors import OpsdkError
    raise OpsdkError("cube_refusing_all: refuses every input")


def cube_crashing_on_2x2(xp, x):
    if x.shape == (2, 2):
        raise IndexError("off by one")
    return x * x * x
"""

CPU_CUBE_GRAD_WRONG = """\
namespace opsdk_op_{name}_grad {{
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs&) {{
    // Wrong on purpose: 3 x |x| instead of 3 x^2, which differ where x < 0.
    for (int64_t i = 0; i < in.x.size(); ++i) {{
        const T x = in.x.data[i];
        out.grad_x.data[i] = 3 * x * (x < 0 ? -x : x) * in.grad_y.data[i];
    }}
}}
}}  // namespace opsdk_op_{name}_grad
"""


def _workspace(root: Path, ops: dict[str, str], forward: dict[str, str] | None = None) -> Path:
    """A workspace of cubes: name -> the gradient op's kernel line; `forward` names the python
    forward kernel of some of them (default `cube`)."""
    opdefs = root / "opdefs"
    opdefs.mkdir(parents=True)
    (opdefs / "kernels.py").write_text(KERNELS)
    for name, grad_kernel in ops.items():
        forward_fn = (forward or {}).get(name, "cube")
        (opdefs / f"{name}.yaml").write_text(CUBE.format(name=name, grad_kernel=grad_kernel,
                                                         forward_fn=forward_fn))
    return root


@pytest.fixture(scope="module")
def python_workspace(tmp_path_factory) -> Path:
    good = "python: kernels.py:cube_grad"
    return _workspace(tmp_path_factory.mktemp("ws"), {
        "good_cube": good, "bad_cube": "python: kernels.py:cube_grad_wrong",
        "refusing_cube": good, "crashing_cube": good,
    }, forward={"refusing_cube": "cube_refusing_all", "crashing_cube": "cube_crashing_on_2x2"})


def test_wrong_python_gradient_fails_with_a_shrunk_counterexample(python_workspace, capsys):
    code = main(["gradcheck", "bad_cube", "-C", str(python_workspace), "--seed", "7"])
    out = capsys.readouterr().out
    assert code == 1
    assert "1 failing: " in out and "::bad_cube (python)" in out  # qualified: namespace::op
    assert "gradient mismatch" in out and "d/dx[0, 0]" in out
    # Shrunk to one element, negative (where 3 x |x| and 3 x^2 differ).
    assert "dims n=1 m=1" in out
    analytic, numeric = map(float, re.search(r"analytic (\S+), numeric (\S+) ", out).groups())
    assert analytic == pytest.approx(-numeric, rel=1e-4) and numeric > 0
    x = float(re.search(r"x = \[\[(\S+)\]\]", out).group(1))
    assert x < 0
    assert "reproduce: opsdk gradcheck bad_cube --seed 7" in out


def test_same_seed_reproduces_the_same_counterexample(python_workspace, capsys):
    outs = []
    for _ in range(2):
        main(["gradcheck", "bad_cube", "-C", str(python_workspace), "--seed", "11"])
        outs.append(capsys.readouterr().out.split("failing:")[1])
    assert outs[0] == outs[1]


def test_correct_twin_passes(python_workspace, capsys):
    code = main(["gradcheck", "good_cube", "-C", str(python_workspace), "--max-examples", "8"])
    out = capsys.readouterr().out
    assert code == 0, out
    # Cases with an empty x (dims may be 0) are drawn but not counted: at most 8 are, plus one
    # stress case per stress size. "-" under attrs: the cube has no attrs to draw.
    row = re.search(r"good_cube\s+python\s+(\d+)\s+-\s+" + SIZES + r"\s+(\S+)\s+float64 rtol=0\.0001 atol=1e-06\s+pass", out)
    stress = len(GradCheckSpec().stress_sizes)
    assert row and 1 + stress <= int(row.group(1)) <= 8 + stress and float(row.group(2)) <= 1.0, out
    assert "all gradients agree" in out


def test_gradient_ops_are_listed_as_skipped(python_workspace, capsys):
    main(["gradcheck", "good_cube", "good_cube_grad", "-C", str(python_workspace),
          "--max-examples", "2"])
    out = capsys.readouterr().out
    assert re.search(r"good_cube_grad .*skipped.*not differentiable", out), out


def test_an_op_refusing_every_case_is_an_error_not_a_pass(python_workspace, capsys):
    code = main(["gradcheck", "refusing_cube", "-C", str(python_workspace), "--max-examples", "5"])
    out = capsys.readouterr().out
    assert code == 1 and re.search(r"refusing_cube\s+python\s+0\s+-\s+-\s+-\s+float64 rtol=0\.0001 atol=1e-06\s+error", out), out
    assert "no valid case could be drawn" in out and "refuses every input" in out


def test_a_crashing_kernel_is_a_failure_with_its_case(python_workspace, capsys):
    code = main(["gradcheck", "crashing_cube", "-C", str(python_workspace)])
    out = capsys.readouterr().out
    assert code == 1 and "crashing_cube on python: error" in out
    assert "dims n=2 m=2" in out and "IndexError: off by one" in out


def test_unknown_op_is_one_clear_error(python_workspace, capsys):
    code = main(["gradcheck", "bad_cub", "-C", str(python_workspace)])
    err = capsys.readouterr().err
    assert code == 1 and "bad_cub" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build a C++ kernel")
def test_wrong_cpp_gradient_fails_and_an_unbuilt_kernel_says_build(tmp_path, capsys):
    from opsdk.build.driver import build_workspace

    root = _workspace(tmp_path, {"cpp_cube": "cpu: cpp_cube_grad_cpu.cc"})
    (root / "opdefs" / "cpp_cube_grad_cpu.cc").write_text(CPU_CUBE_GRAD_WRONG.format(name="cpp_cube"))
    assert main(["gradcheck", "cpp_cube", "-C", str(root)]) == 1
    assert "opsdk build" in capsys.readouterr().out  # not built yet: the message says what to do

    build_workspace(root, progress=False)
    code = main(["gradcheck", "cpp_cube", "-C", str(root), "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 1 and "gradient mismatch" in out and "dims n=1 m=1" in out
    x = float(re.search(r"x = \[\[(\S+)\]\]", out).group(1))
    assert x < 0


# An op with a list output (its N pieces drawn each with its own cotangent): x's halves scaled
# by 1 and 2. The wrong gradient swaps the pieces' cotangents, which only the list-aware
# contraction of the checker can tell from the right one.
HALVES = """\
op: {name}
summary: x's two halves along its last dim, the second doubled.
type_attrs:
  T: [float64]
attrs:
  N: {{type: int, min: 2, max: 2, default: 2}}
inputs:
  x: {{dtype: T, shape: [n, 2]}}
outputs:
  ys: {{dtype: T, shape: [n, 1], list: N}}
gradient: {name}_grad
kernels:
  python: halves.py:halves
reference: "[x[:, :1], 2 * x[:, 1:]]"
gradcheck: {{max_examples: 10, dims: [1, 3]}}
---
op: {name}_grad
summary: Gradient of {name}.
type_attrs:
  T: [float64]
attrs:
  N: {{type: int, min: 2, max: 2, default: 2}}
inputs:
  x: {{dtype: T, shape: [n, 2]}}
  grad_ys: {{dtype: T, shape: [n, 1], list: N}}
outputs:
  grad_x: {{dtype: T, shape: [n, 2]}}
gradient: null
kernels:
  python: halves.py:{grad_fn}
"""

HALVES_KERNELS = """\
def halves(xp, x, N):
    return [x[:, :1].copy(), 2 * x[:, 1:]]


def halves_grad(xp, x, grad_ys, N):
    return xp.concatenate([grad_ys[0], 2 * grad_ys[1]], axis=1)


def halves_grad_swapped(xp, x, grad_ys, N):
    return xp.concatenate([grad_ys[1], 2 * grad_ys[0]], axis=1)
"""


def test_an_op_with_a_list_output_is_checked_piece_by_piece(tmp_path, capsys):
    opdefs = tmp_path / "opdefs"
    opdefs.mkdir()
    (opdefs / "halves.py").write_text(HALVES_KERNELS)
    for name, grad_fn in (("halves", "halves_grad"), ("bad_halves", "halves_grad_swapped")):
        (opdefs / f"{name}.yaml").write_text(HALVES.format(name=name, grad_fn=grad_fn))
    assert main(["gradcheck", "halves", "-C", str(tmp_path)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["gradcheck", "bad_halves", "-C", str(tmp_path), "--seed", "5"]) == 1
    out = capsys.readouterr().out
    assert "gradient mismatch" in out and "grad_ys[0] = " in out and "grad_ys[1] = " in out
