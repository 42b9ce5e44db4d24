"""The ops of examples/author_ops, written from the docs as an op author would, built and
gradchecked: a strided box sum whose output dims come from a choice attr through named dims (C++
forward and gradient), a two-output op with an optional weight (C++, checked with the weight given
and absent), and a CUDA-only op (checked where a GPU is; its
.cu files compiled wherever nvcc is)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.cli.main import main
from opsdk.gradcheck import run_gradcheck
from opsdk.registry import load_registry
from opsdk.registry.errors import OpError
from opsdk.registry.infer import infer_outputs
from opsdk.runtime.kernels.loader import load_kernel

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "author_ops"
CPU_OPS = ["box_sum", "weighted_moments"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("author") / "author_ops"
    shutil.copytree(EXAMPLE / "opdefs", root / "opdefs")
    shutil.copy(EXAMPLE / "opsdk.yaml", root / "opsdk.yaml")
    build_workspace(root, ops=CPU_OPS + [f"{op}_grad" for op in CPU_OPS], jobs=2, cuda="off", progress=False)
    return root


def test_the_cpu_ops_pass_gradcheck_on_every_attr_combination(workspace, capsys):
    code = main(["gradcheck", "-C", str(workspace), *CPU_OPS])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "box_sum on cpu: 8/8 combinations of k 1,3 x stride 1,2 x padding 'valid','same' checked" in out
    assert "author_ops::weighted_moments  cpu" in out
    # Its weight is optional: the cases gave it and left it out.
    assert "weighted_moments on cpu: 2/2 combinations of w given,absent checked" in out


def test_weighted_moments_without_its_weight_in_the_glue_and_a_graph(workspace):
    import opsdk
    from opsdk.runtime.frontend.ops_module import load_ops

    spec = load_registry(workspace).get("weighted_moments")
    x = np.arange(6.0).reshape(2, 3)
    m1, m2 = load_kernel(spec, "cpu")(x, None)  # the kernel's in.w is an empty std::optional
    np.testing.assert_array_equal(m1, x.sum(-1))
    np.testing.assert_array_equal(m2, (x * x).sum(-1))
    with pytest.raises(TypeError, match=r"^weighted_moments: input 'w' must be a numpy.ndarray or None"):
        load_kernel(spec, "cpu")(x, 3)
    with pytest.raises(ValueError, match=r"^weighted_moments: input 'w' has size 4 in axis 0 but x has 3"):
        load_kernel(spec, "cpu")(x, np.ones(4))
    ops = load_ops(workspace)
    g = opsdk.Graph()
    with g.as_default():
        xp = opsdk.placeholder("float64", [2, 3], name="x")
        m1, m2 = ops.weighted_moments(xp)
        (gx,) = opsdk.gradients([m1, m2], [xp])
        with opsdk.Session() as sess:
            got = sess.run([m1, m2, gx], {xp: x})
    np.testing.assert_array_equal(got[0], x.sum(-1))
    np.testing.assert_array_equal(got[2], 1 + 2 * x)  # d(m1 + m2)/dx with every weight 1


@pytest.mark.parametrize("attrs, want", [
    ({"k": 3, "stride": 2, "padding": "valid"}, (2, 2, 3)),   # (5 - 3) // 2 + 1, (7 - 3) // 2 + 1
    ({"k": 3, "stride": 2, "padding": "same"}, (2, 3, 4)),    # ceil(5 / 2), ceil(7 / 2)
    ({"k": 1, "stride": 1, "padding": "same"}, (2, 5, 7)),
])
def test_box_sum_sizes_come_from_the_named_dims_in_the_glue_too(workspace, attrs, want):
    spec = load_registry(workspace).get("box_sum")
    x = np.arange(70, dtype=np.float64).reshape(2, 5, 7)
    y = load_kernel(spec, "cpu")(x, attrs["k"], attrs["stride"], attrs["padding"])
    assert y.shape == want
    grad = load_registry(workspace).get("box_sum_grad")
    kernel = load_kernel(grad, "cpu")
    assert kernel(x, np.ones(want), attrs["k"], attrs["stride"], attrs["padding"]).shape == x.shape
    # The gradient op's grad_y is checked against box_sum's oh and ow, in the glue as at graph time.
    wrong = np.ones((2, want[1] + 1, want[2]))
    with pytest.raises(ValueError, match=r"^box_sum_grad: input 'grad_y' must have size \d+ in axis 1 \(oh\)"):
        kernel(x, wrong, attrs["k"], attrs["stride"], attrs["padding"])


def test_a_window_larger_than_the_image_gives_no_rows_in_the_glue_as_in_inference(workspace):
    spec = load_registry(workspace).get("box_sum")
    x = np.zeros((1, 2, 2))
    assert load_kernel(spec, "cpu")(x, 3, 1, "valid").shape == (1, 0, 0)  # max((2 - 3) // 1 + 1, 0)
    assert infer_outputs(spec, [x.shape], ["float64"], {"k": 3}) == [((1, 0, 0), "float64")]


def test_the_cuda_only_op_is_skipped_here_with_the_reason_or_checked_on_a_gpu(workspace, capsys):
    report = run_gradcheck(load_registry(workspace), ["cuda_axpy"], max_examples=5)
    [outcome] = report.outcomes
    if outcome.skipped:
        assert outcome.skipped == "no kernel that runs here (has cuda)"
    else:
        assert report.ok and outcome.results[0].device == "cuda"


@pytest.mark.gpu
def test_the_cuda_only_op_on_a_gpu(workspace, cupy):
    build_workspace(workspace, ops=["cuda_axpy", "cuda_axpy_grad"], jobs=2, progress=False)
    report = run_gradcheck(load_registry(workspace), ["cuda_axpy"], max_examples=5)
    assert report.ok and report.outcomes[0].results[0].device == "cuda"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit) to compile CUDA kernels")
def test_the_cuda_only_ops_compile_with_nvcc(workspace, monkeypatch):
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", "80")  # one arch: the sources' errors, not a fat binary
    report = build_workspace(workspace, ops=["cuda_axpy", "cuda_axpy_grad"], jobs=2, cuda="on", progress=False)
    assert sorted((r.op, r.device) for r in report.results) == [("cuda_axpy", "cuda"), ("cuda_axpy_grad", "cuda")]


def test_an_unknown_choice_is_refused_with_the_choices(workspace):
    from opsdk.registry.attrs import normalize_attrs

    spec = load_registry(workspace).get("box_sum")
    with pytest.raises(OpError, match="padding"):
        normalize_attrs(spec, {"padding": "full"})
