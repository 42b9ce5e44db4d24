"""Built cpu kernels take given outputs (templates/binding.cc.j2, docs/internals.md "The binding
module"), and the runtime hands them buffers from the session's pool."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry import load_registry
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.kernels.loader import load_kernel, takes_given_outputs

# What these tests check is the host's plans: unscoped nodes stay on the host on a GPU machine too.
pytestmark = pytest.mark.usefixtures("host_default")

REGISTRY = load_registry()
CPU_OPS = sorted(n for n in REGISTRY.names() if REGISTRY.get(n).kernel("cpu") is not None)


@pytest.fixture(scope="module")
def relu_grad():
    return load_kernel(REGISTRY.get("relu_grad"), "cpu")


@pytest.mark.parametrize("name", CPU_OPS)
def test_every_built_cpu_kernel_takes_given_outputs(name):
    assert takes_given_outputs(load_kernel(REGISTRY.get(name), "cpu")), \
        f"{name}: rebuild it (`opsdk build`)"


def test_a_given_output_is_written_and_returned(relu_grad):
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((2, 5, 7), np.float32), rng.standard_normal((2, 5, 7), np.float32)
    out = np.full_like(x, np.nan)
    assert relu_grad(x, g, out) is out
    np.testing.assert_array_equal(out, relu_grad(x, g))
    np.testing.assert_array_equal(out, np.where(x > 0, g, 0))


def _bad(shape=(5, 7), dtype=np.float32):
    return np.empty(shape, dtype)


@pytest.mark.parametrize("given, error, message", [
    (_bad(dtype=np.float64), ValueError,
     r"^relu_grad: output 'grad_x' must be a C-contiguous float32 array of shape \(5, 7\), got "
     r"float64 \(5, 7\)$"),
    (_bad((7, 5)), ValueError, r"output 'grad_x' must be .* got float32 \(7, 5\)$"),
    (_bad((5, 14))[:, ::2], ValueError, r"output 'grad_x' .* \(not C-contiguous\)$"),
    ([0.0] * 35, TypeError, r"^relu_grad: output 'grad_x' was given a list; expected a numpy"),
])
def test_a_wrong_given_output_is_an_error_naming_op_and_output(relu_grad, given, error, message):
    x = np.ones((5, 7), np.float32)
    with pytest.raises(error, match=message):
        relu_grad(x, x.copy(), given)


def test_a_read_only_or_overlapping_output_or_a_wrong_count_is_refused(relu_grad):
    x, g = np.ones((5, 7), np.float32), np.ones((5, 7), np.float32)
    frozen = np.empty_like(x)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"^relu_grad: output 'grad_x' was given a read-only"):
        relu_grad(x, g, frozen)
    with pytest.raises(ValueError, match="shares memory with input 'grad_y', which the op does "
                                         "not declare inplace for it"):
        relu_grad(x, g, g)
    with pytest.raises(TypeError, match=r"given outputs must be all 1 of them \(grad_x\).*got 2"):
        relu_grad(x, g, np.empty_like(x), np.empty_like(x))


def _conv_net():
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [4, 12, 12, 3], name="x")
        w = placeholder("float32", [3, 3, 3, 8], name="w")
        y = apply_op(REGISTRY, "conv2d", [x, w], {}, name="conv")
        r = apply_op(REGISTRY, "relu", [y], {}, name="relu")
        p = apply_op(REGISTRY, "max_pool", [r], {}, name="pool")
        loss = apply_op(REGISTRY, "reduce_sum", [p], {}, name="loss")
        grads = gradients(loss, [x, w])
    return g, x, w, [p, *grads]


@pytest.mark.parametrize("mode", ["inline", "concurrent"])
def test_compiled_kernels_fed_from_the_pool_give_the_same_results(mode):
    g, x, w, fetches = _conv_net()
    rng = np.random.default_rng(3)
    feeds = [{x: rng.standard_normal((4, 12, 12, 3), np.float32),
              w: rng.standard_normal((3, 3, 3, 8), np.float32)} for _ in range(3)]
    got = {}
    for pool in (True, False):
        config = SessionConfig(buffer_pool_bytes=(1 << 24) if pool else 0, step_mode=mode)
        with Session(g, config) as sess:
            if pool:
                pooled = sess.explain(fetches, {x: None, w: None}, show=False).pooled
            got[pool] = [sess.run(fetches, f) for f in feeds for _ in range(2)]
            if pool:
                assert sess.buffers.taken > 0
    assert {"conv", "pool"} <= set(pooled)
    assert any("grad" in name for name in pooled)
    for with_pool, without in zip(got[True], got[False]):
        for a, b in zip(with_pool, without):
            np.testing.assert_array_equal(a, b)
