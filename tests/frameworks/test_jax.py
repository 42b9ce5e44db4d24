"""opsdk.jax: declared ops as JAX functions under jit, grad and vmap, checked by JAX's own tools."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX not installed: pip install 'opsdk[jax]'")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

from opsdk.jax import ops  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.random((5, 3), dtype=np.float32)
Y = RNG.random((4, 3), dtype=np.float32)
REFERENCE = np.abs(X[:, None, :] - Y[None]).sum(-1)


def test_jit_matches_the_reference_with_declared_shapes():
    z = jax.jit(ops.pairwise_manhattan)(jnp.asarray(X), jnp.asarray(Y))
    assert z.shape == (5, 4) and z.dtype == jnp.float32
    np.testing.assert_allclose(z, REFERENCE, rtol=1e-5)
    shape = jax.eval_shape(ops.pairwise_manhattan, jax.ShapeDtypeStruct((7, 3), jnp.float32),
                           jax.ShapeDtypeStruct((2, 3), jnp.float32))
    assert shape.shape == (7, 2)


def test_grad_uses_the_gradient_op():
    g = jax.jit(jax.grad(lambda a: ops.pairwise_manhattan(a, jnp.asarray(Y)).sum()))(jnp.asarray(X))
    np.testing.assert_allclose(g, np.sign(X[:, None, :] - Y[None]).sum(1), atol=1e-6)


def test_check_grads_passes_on_the_flagship():
    with jax.enable_x64(True):
        x, y = jnp.asarray(X, jnp.float64), jnp.asarray(Y, jnp.float64)
        check_grads(ops.pairwise_manhattan, (x, y), order=1, modes=("rev",))


def test_vmap_loops_over_the_batch():
    batch = jnp.stack([jnp.asarray(X), jnp.asarray(X) + 1])
    z = jax.vmap(ops.pairwise_manhattan, in_axes=(0, None))(batch, jnp.asarray(Y))
    assert z.shape == (2, 5, 4)
    np.testing.assert_allclose(z[1], np.abs(X[:, None] + 1 - Y[None]).sum(-1), rtol=1e-5)


def test_attrs_are_keywords_and_python_kernel_ops_work():
    with jax.enable_x64(True):
        x = jnp.asarray(RNG.random((3, 4)))
        np.testing.assert_allclose(ops.reduce_sum(x, axes=[1]), np.asarray(x).sum(1))
        check_grads(lambda a: ops.reduce_sum(ops.softmax(a), axes=[0]), (x,), order=1,
                    modes=("rev",))


def test_a_wrong_shape_or_count_is_a_clear_error():
    with pytest.raises(Exception, match="pairwise_manhattan"):
        ops.pairwise_manhattan(jnp.ones((2, 3)), jnp.ones((2, 4)))
    with pytest.raises(Exception, match="takes 2 input"):
        ops.pairwise_manhattan(jnp.ones((2, 3)))


def test_list_inputs_and_outputs_are_python_lists():
    from jax.test_util import check_grads

    a = jnp.arange(6.0).reshape(2, 3)
    b = jnp.ones((4, 3))
    assert jax.jit(lambda x, y: ops.concat([x, y], axis=0))(a, b).shape == (6, 3)
    ga, gb = jax.grad(lambda x, y: (ops.concat([x, y], axis=0) ** 2).sum(), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, 2 * a)
    np.testing.assert_allclose(gb, 2 * b)
    pieces = ops.concat_grad([a, b], jnp.ones((6, 3)), axis=0)
    assert isinstance(pieces, list) and [p.shape for p in pieces] == [(2, 3), (4, 3)]
    check_grads(lambda x, y: ops.stack([x, y], axis=1), (a, a + 1.0), order=1, modes=["rev"])


def _count_kernel_calls(monkeypatch) -> list:
    """Spy on the host kernel (the callback path: FFI handlers off): (op, input shapes) per
    kernel call; tracing counted apart."""
    import opsdk.jax as opsdk_jax

    monkeypatch.setattr(opsdk_jax, "FFI", False)
    calls: list = []
    run, init = opsdk_jax._HostKernel._run, opsdk_jax._HostKernel.__init__

    def spy_run(self, arrays, batch):
        calls.append((self.spec.name, [a.shape for a in arrays]))
        return run(self, arrays, batch)

    def spy_init(self, spec, *args):
        calls.append(("trace", spec.name))
        init(self, spec, *args)

    monkeypatch.setattr(opsdk_jax._HostKernel, "_run", spy_run)
    monkeypatch.setattr(opsdk_jax._HostKernel, "__init__", spy_init)
    return calls


def test_an_unjitted_call_of_a_seen_signature_is_not_traced_again(monkeypatch):
    calls = _count_kernel_calls(monkeypatch)
    x = jnp.asarray(RNG.random((11, 3), dtype=np.float32))  # a shape no other test uses
    for _ in range(3):
        np.testing.assert_allclose(ops.pairwise_manhattan(x, jnp.asarray(Y)),
                                   np.abs(np.asarray(x)[:, None] - Y[None]).sum(-1), rtol=1e-5)
    assert [c for c in calls if c[0] == "trace"] == [("trace", "pairwise_manhattan")]
    assert len([c for c in calls if c[0] == "pairwise_manhattan"]) == 3


def test_a_traced_attr_is_an_error_saying_attrs_are_static():
    x = jnp.ones((2, 3))
    with pytest.raises(Exception, match=r"reduce_sum.*attr 'axes' is a traced JAX value.*"
                                        r"static_argnames=\['axes'\]"):
        jax.jit(lambda a, k: ops.reduce_sum(a, axes=[k]))(x, 1)
    summed = jax.jit(lambda a, k: ops.reduce_sum(a, axes=[k]), static_argnames=["k"])(x, k=1)
    np.testing.assert_allclose(summed, [3.0, 3.0])
    np.testing.assert_allclose(ops.reduce_sum(x, axes=jnp.asarray([0])), [2.0, 2.0, 2.0])


def test_vmap_of_an_op_with_a_leading_batch_is_one_kernel_call(monkeypatch):
    calls = _count_kernel_calls(monkeypatch)
    a = jnp.asarray(RNG.random((4, 5, 3), dtype=np.float32))
    b = jnp.asarray(RNG.random((3, 2), dtype=np.float32))
    z = jax.vmap(ops.matmul, in_axes=(0, None))(a, b)  # matmul: [..., n, k] @ [..., k, m]
    np.testing.assert_allclose(z, np.asarray(a) @ np.asarray(b), rtol=1e-5)
    assert [c for c in calls if c[0] == "matmul"] == [("matmul", [(4, 5, 3), (4, 3, 2)])]
    calls.clear()
    g = jax.vmap(jax.grad(lambda v: ops.relu(v - 0.5).sum()))(a)
    np.testing.assert_array_equal(g, (np.asarray(a) > 0.5).astype(np.float32))
    assert [c[0] for c in calls if c[0] != "trace"] == ["relu", "relu_grad"]


def test_vmap_over_an_input_without_a_batch_loops_in_one_callback(monkeypatch):
    calls = _count_kernel_calls(monkeypatch)
    value = jnp.asarray(RNG.random((5, 3), dtype=np.float32))
    biases = jnp.asarray(RNG.random((2, 3), dtype=np.float32))  # bias: [c], no `...`
    z = jax.vmap(ops.bias_add, in_axes=(None, 0))(value, biases)
    np.testing.assert_allclose(z, np.asarray(value)[None] + np.asarray(biases)[:, None], rtol=1e-6)
    assert [c for c in calls if c[0] == "bias_add"] == [("bias_add", [(5, 3), (3,)])] * 2


def _ffi_target(name: str) -> str:
    from opsdk import _jax_ffi
    from opsdk.registry import load_registry

    target = _jax_ffi.target(load_registry().get(name))
    if target is None:
        pytest.skip(f"no JAX FFI handler built for '{name}' (jaxlib's headers were missing when "
                    "`opsdk build` ran, or the build is older): rerun `opsdk build`")
    return target


def test_a_compiled_cpu_kernel_runs_through_its_ffi_handler_under_jit():
    target = _ffi_target("pairwise_manhattan")
    lowered = jax.jit(ops.pairwise_manhattan).lower(jnp.asarray(X), jnp.asarray(Y)).as_text()
    assert f"custom_call @{target}(" in lowered and "callback" not in lowered
    np.testing.assert_allclose(jax.jit(ops.pairwise_manhattan)(X, Y), REFERENCE, rtol=1e-5)


@pytest.mark.parametrize("attrs", [{}, {"stride_h": 2, "stride_w": 1, "same": 1}])
def test_the_ffi_handler_and_the_callback_agree_with_attrs_and_gradients(monkeypatch, attrs):
    import opsdk.jax as opsdk_jax

    _ffi_target("conv2d")
    with jax.enable_x64(True):
        image = jnp.asarray(RNG.random((2, 7, 6, 3)))
        weights = jnp.asarray(RNG.random((3, 2, 3, 4)))

        def run():
            value = ops.conv2d(image, weights, **attrs)
            grads = jax.grad(lambda a, b: (ops.conv2d(a, b, **attrs) ** 2).sum(),
                             argnums=(0, 1))(image, weights)
            return value, grads

        through_ffi = run()
        monkeypatch.setattr(opsdk_jax, "FFI", False)
        through_callback = run()
        # An op traced with the FFI off keeps it off in its backward, traced later.
        monkeypatch.setattr(opsdk_jax, "FFI", True)

        def without_ffi(a):
            opsdk_jax.FFI = False
            try:
                return ops.conv2d(a, weights, **attrs).sum()
            finally:
                opsdk_jax.FFI = True

        lowered = jax.jit(jax.grad(without_ffi)).lower(image).as_text()
        assert "@opsdk_conv2d" not in lowered
    for a, b in zip(jax.tree_util.tree_leaves(through_ffi),
                    jax.tree_util.tree_leaves(through_callback)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_vmap_of_an_ffi_op_loops_in_xla():
    _ffi_target("pairwise_manhattan")
    batch = jnp.asarray(RNG.random((3, 5, 3), dtype=np.float32))
    lowered = jax.jit(jax.vmap(ops.pairwise_manhattan, in_axes=(0, None))).lower(
        batch, jnp.asarray(Y)).as_text()
    assert "callback" not in lowered
    z = jax.vmap(ops.pairwise_manhattan, in_axes=(0, None))(batch, jnp.asarray(Y))
    np.testing.assert_allclose(z, np.abs(np.asarray(batch)[:, :, None] - Y[None, None]).sum(-1),
                               rtol=1e-5)


def test_a_handler_built_against_another_cpu_kernel_is_not_used(tmp_path):
    from opsdk import _jax_ffi

    (tmp_path / "build" / "jax_ffi" / "op").mkdir(parents=True)
    (tmp_path / "build" / "cpu" / "op").mkdir(parents=True)
    (tmp_path / "build" / "cpu" / "op" / "manifest.json").write_text('{"key": "new"}')
    (tmp_path / "build" / "jax_ffi" / "op" / "lib.so").write_bytes(b"")
    (tmp_path / "build" / "jax_ffi" / "op" / "manifest.json").write_text(
        '{"cpu_key": "old", "file": "lib.so", "sha256": "x", "symbol": "s"}')
    assert _jax_ffi._registered(str(tmp_path), "op") is None


WSCALE = """
op: wscale
summary: y = x * w (w optional; 1 when absent).
type_attrs: {T: [float64]}
inputs: {x: {dtype: T, shape: [n]}, w: {dtype: T, shape: [n], optional: true}}
outputs: {y: {dtype: T, shape: [n]}}
gradient: wscale_grad
kernels: {python: k.py:wscale}
---
op: wscale_grad
summary: Its gradient.
type_attrs: {T: [float64]}
inputs: {x: {dtype: T, shape: [n]}, w: {dtype: T, shape: [n], optional: true},
         grad_y: {dtype: T, shape: [n]}}
outputs: {grad_x: {dtype: T, shape: [n]}, grad_w: {dtype: T, shape: [n]}}
kernels: {python: k.py:wscale_grad}
"""
WSCALE_KERNELS = """
def wscale(xp, x, w):
    return x.copy() if w is None else x * w
def wscale_grad(xp, x, w, grad_y):
    return (grad_y.copy(), xp.zeros_like(x)) if w is None else (grad_y * w, grad_y * x)
"""


def test_an_optional_input_takes_none_or_is_left_out(tmp_path):
    from opsdk.jax import load_ops

    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "k.py").write_text(WSCALE_KERNELS)
    (tmp_path / "opdefs" / "wscale.yaml").write_text(WSCALE)
    mine = load_ops(tmp_path)
    with jax.enable_x64(True):
        x, w = jnp.arange(4.0), jnp.array([1.0, 2.0, 3.0, 4.0])
        np.testing.assert_array_equal(mine.wscale(x), x)
        np.testing.assert_array_equal(jax.jit(lambda x: mine.wscale(x, None))(x), x)
        np.testing.assert_array_equal(mine.wscale(x, w), x * w)
        np.testing.assert_array_equal(jax.grad(lambda x: mine.wscale(x).sum())(x), np.ones(4))
        check_grads(lambda x, w: mine.wscale(x, w), (x, w), order=1, modes=["rev"])
        check_grads(lambda x: mine.wscale(x, None), (x,), order=1, modes=["rev"])
