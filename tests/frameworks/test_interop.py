"""opsdk.runtime.kernels.interop: DLPack arrays become NumPy views without a copy, results go back as the caller's kind."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.kernels.interop import as_kernel_array, first_foreign, is_foreign_array, like


class OnlyDLPack:
    """An array that offers nothing but the DLPack protocol (wrapping a NumPy array)."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_numpy_and_scalars_pass_through_untouched():
    a = np.arange(4.0)
    assert as_kernel_array(a) is a and as_kernel_array(2.5) == 2.5
    assert not is_foreign_array(a) and not is_foreign_array(np.float32(1))
    assert like(a, a) is a


def test_a_dlpack_only_object_becomes_a_numpy_view_without_copy():
    base = np.arange(6.0).reshape(2, 3)
    view = as_kernel_array(OnlyDLPack(base))
    assert isinstance(view, np.ndarray) and np.shares_memory(view, base)
    np.testing.assert_array_equal(view, base)
    assert first_foreign([base, [base, OnlyDLPack(base)]]).__class__ is OnlyDLPack
    assert first_foreign([base, 1.0]) is None


def test_torch_tensors_round_trip_without_copy():
    torch = pytest.importorskip("torch", reason="PyTorch not installed: pip install 'opsdk[torch]'")
    t = torch.arange(6.0, requires_grad=True)
    view = as_kernel_array(t)
    assert isinstance(view, np.ndarray) and view.ctypes.data == t.data_ptr()
    back = like(view * 2, t)
    assert isinstance(back, torch.Tensor) and back.tolist() == [0, 2, 4, 6, 8, 10]
    pair = like((view, view), t)
    assert isinstance(pair, tuple) and all(isinstance(p, torch.Tensor) for p in pair)


def test_jax_arrays_round_trip():
    jnp = pytest.importorskip("jax.numpy", reason="JAX not installed: pip install 'opsdk[jax]'")
    import jax

    # On the host explicitly: JAX's default device is the GPU where there is one (below).
    a = jax.device_put(jnp.arange(3.0), jax.devices("cpu")[0])
    view = as_kernel_array(a)
    assert isinstance(view, np.ndarray)
    back = like(np.asarray(view) + 1, a)
    assert isinstance(back, jax.Array) and back.tolist() == [1.0, 2.0, 3.0]


def test_jax_arrays_on_a_gpu_reach_kernels_as_cupy_arrays(cupy):
    jnp = pytest.importorskip("jax.numpy", reason="JAX not installed: pip install 'opsdk[jax]'")
    import jax

    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError as exc:
        pytest.skip(f"JAX sees no GPU (pip install 'jax[cuda13]'): {exc}")
    a = jax.device_put(jnp.arange(3.0), gpu)
    view = as_kernel_array(a)
    assert isinstance(view, cupy.ndarray)
    back = like(view + 1, a)
    assert isinstance(back, jax.Array) and back.devices() == {gpu} and back.tolist() == [1.0, 2.0, 3.0]


def test_an_eager_call_refuses_a_torch_tensor_that_requires_grad():
    torch = pytest.importorskip("torch", reason="PyTorch not installed: pip install 'opsdk[torch]'")
    import opsdk
    from opsdk.registry import OpError

    x, y = torch.rand(5, 3, requires_grad=True), torch.rand(4, 3)
    with pytest.raises(OpError, match=r"pairwise_manhattan: input 'x' is a torch tensor that "
                                      r"requires grad.*opsdk\.torch"):
        opsdk.ops.pairwise_manhattan(x, y)
    with torch.no_grad():  # no gradient wanted: the eager call is right
        assert opsdk.ops.pairwise_manhattan(x, y).shape == (5, 4)
    assert opsdk.ops.pairwise_manhattan(x.detach(), y).shape == (5, 4)


def test_a_bfloat16_tensor_is_an_error_naming_the_op_and_its_dtypes():
    torch = pytest.importorskip("torch", reason="PyTorch not installed: pip install 'opsdk[torch]'")
    import opsdk
    from opsdk.registry import OpError

    x = torch.rand(5, 3, dtype=torch.bfloat16)
    with pytest.raises(OpError, match=r"pairwise_manhattan: input 'x' has dtype bfloat16.*"
                                      r"takes float32, float64"):
        opsdk.ops.pairwise_manhattan(x, x)
