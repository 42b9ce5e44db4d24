"""The builtin Python kernels on the test device: the same bodies that run with NumPy (and CuPy
on a GPU) run over the test device's array module, whose arrays host code cannot read, and agree
with NumPy, forward and gradient. This runs everywhere, so a kernel that reaches for NumPy
directly instead of `xp` fails in CI, not first on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.devices.testing import TEST_XP, TestArray
from test_builtin_gpu import GRAD_CASES, run_on
from test_builtin_grads import _grad_op_outputs
from test_builtin_ops import CASES, declarations, run


def _to_device(value):
    if isinstance(value, list):
        return [_to_device(v) for v in value]
    return TestArray(np.array(value)) if isinstance(value, (np.ndarray, np.generic)) else value


def _to_host(value):
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v) for v in value)
    assert isinstance(value, TestArray), f"a kernel returned a {type(value).__name__}"
    return value.data


@pytest.mark.parametrize("op, inputs, attrs, expected", CASES)
def test_forward_on_the_test_device_matches_numpy(op, inputs, attrs, expected):
    got = run_on(TEST_XP, op, _to_device(inputs), attrs)
    host = _to_host(got)
    assert host.dtype == np.asarray(expected).dtype and host.shape == np.shape(expected)
    np.testing.assert_allclose(host, run(op, inputs, attrs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op, inputs, attrs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradient_on_the_test_device_matches_numpy(op, inputs, attrs):
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
    result = run_on(TEST_XP, fwd["gradient"], _to_device([values[n] for n in grad["inputs"]]),
                    {k: v for k, v in attrs.items() if k in declared})
    got = dict(zip(grad["outputs"], result if isinstance(result, tuple) else (result,)))
    for name, value in want.items():
        host = _to_host(got[name])
        pairs = zip(host, value) if isinstance(value, list) else [(host, value)]
        for g, w in pairs:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=name)
