"""The builtin Python kernels with xp=cupy: the same bodies must run on the GPU and agree with
NumPy, forward and gradient. Skipped, with the reason, where CuPy or a CUDA device is missing."""

from __future__ import annotations


import numpy as np
import pytest

from test_builtin_grads import _grad_op_outputs, f64
from test_builtin_ops import CASES, declarations, run
import test_builtin_ops

pytestmark = pytest.mark.gpu




def _to_gpu(cp, value):
    if isinstance(value, list):
        return [_to_gpu(cp, v) for v in value]
    return cp.asarray(value) if isinstance(value, (np.ndarray, np.generic)) else value


def _to_host(value):
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v) for v in value)
    return value.get()


def run_on(xp, op, inputs, attrs):
    """Like test_builtin_ops.run, with the given array module."""
    decl = declarations()[op]
    full = {k: v["default"] for k, v in (decl.get("attrs") or {}).items() if "default" in v}
    full.update(attrs)
    for (_, t), value in zip(decl.get("inputs", {}).items(), inputs):
        if "list" in t:
            full[t["list"]] = len(value)
    file, fn = decl["kernels"]["python"].split(":")
    return getattr(test_builtin_ops._module(file), fn)(xp, *inputs, **full)


@pytest.mark.parametrize("op, inputs, attrs, expected", CASES)
def test_gpu_forward_matches_numpy(cupy, op, inputs, attrs, expected):
    cp = cupy
    got = run_on(cp, op, _to_gpu(cp, inputs), attrs)
    assert isinstance(got, cp.ndarray), f"{op} returned {type(got).__name__} on the GPU"
    host = got.get()
    assert host.dtype == np.asarray(expected).dtype and host.shape == np.shape(expected)
    np.testing.assert_allclose(host, run(op, inputs, attrs), rtol=1e-5, atol=1e-6)


GRAD_CASES = [
    ("add", [f64(3, 1), f64(2, 1, 4)], {}), ("div", [f64(2, 3, low=0.5), f64(3, low=0.5)], {}),
    ("pow", [f64(2, 3, low=0.5), f64(2, 3)], {}), ("maximum", [f64(3, 1), f64(4)], {}),
    ("where", [np.array([[True], [False]]), f64(2, 3), f64(3)], {}),
    ("matmul", [f64(2, 3, 4), f64(2, 4, 5)], {}),
    ("reduce_max", [f64(2, 3, 4)], {"axes": [1], "keepdims": False}),
    ("reduce_mean", [f64(2, 3, 4)], {"axes": [], "keepdims": True}),
    ("transpose", [f64(2, 3, 4)], {"perm": [2, 0, 1]}),
    ("slice", [f64(4, 5)], {"begin": [1, 2], "size": [2, -1]}),
    ("concat", [[f64(2, 1), f64(2, 3)]], {"axis": 1}),
    ("stack", [[f64(2, 3), f64(2, 3)]], {"axis": 1}),
    ("gather", [f64(4, 3), np.array([[0, 3], [3, 3]], dtype=np.int64)], {"axis": 0}),
    ("softmax", [f64(3, 4)], {"axis": 0}), ("log_softmax", [f64(3, 4)], {"axis": -1}),
    ("softmax_cross_entropy_with_logits", [f64(3, 4), f64(3, 4)], {}),
    ("sigmoid", [f64(5)], {}), ("relu", [f64(5)], {}),
]


def check_gradient_on(xp, to_device, to_host, op, inputs, attrs):
    """The gradient op of `op` run with array module `xp` agrees with the NumPy one."""
    fwd = declarations()[op]
    grad = declarations()[fwd["gradient"]]
    outputs = run(op, inputs, attrs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    cots = [np.random.default_rng(3).normal(size=np.shape(o)) for o in outputs]
    want = _grad_op_outputs(op, inputs, attrs, cots)
    values = dict(zip(fwd["inputs"], inputs))
    values.update(zip(fwd["outputs"], outputs))
    values.update({f"grad_{n}": c for n, c in zip(fwd["outputs"], cots)})
    declared = grad.get("attrs") or {}
    result = run_on(xp, fwd["gradient"], to_device([values[n] for n in grad["inputs"]]),
                    {k: v for k, v in attrs.items() if k in declared})
    got = dict(zip(grad["outputs"], result if isinstance(result, tuple) else (result,)))
    for name, value in want.items():
        host = to_host(got[name])
        pairs = zip(host, value) if isinstance(value, list) else [(host, value)]  # list outputs
        for g, w in pairs:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("op, inputs, attrs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gpu_gradient_matches_numpy(cupy, op, inputs, attrs):
    check_gradient_on(cupy, lambda v: _to_gpu(cupy, v), _to_host, op, inputs, attrs)


@pytest.mark.parametrize("op", ["random_uniform", "random_normal"])
def test_gpu_random_values_equal_cpu_values_for_a_seed(cupy, op):
    cp = cupy
    attrs = {"shape": [4, 5], "seed": 42, "dtype": np.dtype("float32")}
    got = run_on(cp, op, [], attrs)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(got.get(), run(op, [], attrs))
