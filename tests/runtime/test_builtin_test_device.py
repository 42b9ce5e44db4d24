"""The builtin Python kernels on the test device: the same bodies that run with NumPy (and CuPy
on a GPU) run over the test device's array module, whose arrays host code cannot read, and agree
with NumPy, forward and gradient. This runs everywhere, so a kernel that reaches for NumPy
directly instead of `xp` fails in CI, not first on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.devices.testing import TEST_XP, TestArray
from test_builtin_gpu import GRAD_CASES, check_gradient_on, run_on
from test_builtin_ops import CASES, run


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
    check_gradient_on(TEST_XP, _to_device, _to_host, op, inputs, attrs)



def test_an_op_shaped_by_a_device_tensor_reads_it_on_the_host():
    # On a GPU the dims input is a device array, which host code cannot read implicitly (seen on
    # an H100: tf.zeros(tf.shape(x)) failed there); the test device refuses it the same way. (The
    # random *_dims ops share the reading; they draw on the host and upload, which the test
    # device's array module refuses by design, so a GPU run checks them.)
    dims, value = np.array([2, 3], np.int32), np.float32(1.5)
    got = _to_host(run_on(TEST_XP, "fill_dims", _to_device([dims, value]), {}))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full((2, 3), 1.5, np.float32))
