"""The builtin library through the real registry and runtime: every declaration parses, every
gradient op fits the signature rule, graph-time inference handles unknown dims, and eager calls
through `apply_op` (attr normalisation, list inputs, unbound type attrs) agree with NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry import BUILTIN_ROOT, OpError, Registry, infer_outputs, parse_opdef
from opsdk.registry.dtypes import FLOAT_DTYPES
from opsdk.registry.gradients import gradient_problems
from opsdk.runtime.frontend.api import apply_op

BUILTIN_DIR = BUILTIN_ROOT / "opdefs" / "builtin"
# Ops with float inputs that pass no gradient, on purpose (bool results, indices, arange as
# TF's range, or gradient ops).
NO_GRADIENT = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "argmin",
               "argmax", "in_top_k", "top_k_indices", "where_indices", "arange", "unique",
               "floor_div", "floor_mod", "edit_distance", "searchsorted",
               "random_gamma", "random_poisson", "non_max_suppression"}  # (TF has an implicit gradient for gamma's alpha)
# Optimizer updates are applied, never differentiated through.
OPTIMIZER_UPDATES = {"apply_gradient_descent", "apply_momentum", "apply_adagrad", "apply_adam",
                     "apply_rms_prop", "apply_adadelta", "apply_ftrl",
                     "apply_proximal_gradient_descent", "apply_proximal_adagrad"}
# Building blocks that kernels call (graphs differentiate matmul, whose kernels call gemm) or
# that compile passes put in the place of other nodes (the fold pass's conv2d_grad_filter for a
# gradient op, conv2d_bias for a convolution, its bias add and ReLU, max_pool_grad_bias for a
# pool's gradient and its bias add's).
KERNEL_BLOCKS = {"gemm", "conv2d_grad_filter", "conv2d_bias", "max_pool_grad_bias"}
STOPS = {"sign", "stop_gradient", "zeros_like", "ones_like", "random_uniform_like", "shape",
         "fill_dims", "floor", "ceil", "round"}


@pytest.fixture(scope="module")
def registry() -> Registry:
    """The builtin library alone, parsed from its files (user ops elsewhere cannot break it)."""
    specs = {}
    for path in sorted(BUILTIN_DIR.glob("*.yaml")):
        for spec in parse_opdef(path, BUILTIN_ROOT):
            assert spec.name not in specs, f"{spec.name} declared twice"
            specs[spec.name] = spec
    return Registry(specs)


def test_gradient_ops_fit_the_signature_rule(registry):
    for spec in registry:
        if spec.gradient_op:
            assert spec.gradient_op == f"{spec.name}_grad"
            assert gradient_problems(spec, registry.get(spec.gradient_op)) == []


def test_differentiability_policy(registry):
    for spec in registry:
        floats = any(set(spec.dtype_options(t)) & FLOAT_DTYPES for t in spec.inputs)
        if spec.name.endswith("_grad") or not floats:
            assert spec.gradient is None, f"{spec.name} should declare gradient: null"
        elif spec.name in STOPS:
            assert spec.stops_gradient
        elif spec.name in NO_GRADIENT or spec.name in OPTIMIZER_UPDATES or spec.name in KERNEL_BLOCKS:
            assert spec.gradient is None
        else:
            assert spec.gradient_op, f"{spec.name} takes floats but has no gradient op"
            assert spec.reference, f"{spec.name} has no reference for the gradient checker"
    assert registry.get("random_uniform").stateful and registry.get("random_normal").stateful


def test_inference_propagates_unknown_dims(registry):
    def infer(op, shapes, dtypes, attrs=None):
        return infer_outputs(registry.get(op), shapes, dtypes, attrs or {})

    assert infer("add", [(None, 3), (4, 1)], ["float32"] * 2) == [((4, 3), "float32")]
    assert infer("matmul", [(2, None, 3), (2, 3, 5)], ["float64"] * 2) == [((2, None, 5), "float64")]
    assert infer("reduce_sum", [None], ["float32"], {"axes": [0]}) == [(None, "float32")]
    assert infer("less", [(2, 3), (3,)], ["int32"] * 2) == [((2, 3), "bool")]
    got = infer("concat", [[(2, None), (3, 4)]], [["float32"] * 2], {"axis": 0, "N": 2})
    assert got == [((5, 4), "float32")]
    assert infer("cast", [(None,)], ["int32"], {"DstT": "float64"}) == [((None,), "float64")]
    assert infer("zeros", [], [], {"shape": [2, 3]}) == [((2, 3), "float32")]


def test_shape_mistakes_name_the_op(registry):
    with pytest.raises(OpError, match=r"^add.*input 'x' has shape \(2, 3\)"):
        infer_outputs(registry.get("add"), [(2, 3), (4, 3)], ["float32"] * 2, {})
    with pytest.raises(OpError, match="reshape"):
        infer_outputs(registry.get("reshape"), [(2, 3)], ["float32"], {"shape": [4]})


def test_eager_calls_through_apply_op(registry):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(apply_op(registry, "add", [x, np.float32(1)], {}), x + 1)
    got = apply_op(registry, "reduce_mean", [x], {"axes": [-1], "keepdims": True})
    assert got.dtype == np.float32 and got.shape == (2, 1)
    parts = [x, x[:1]]
    np.testing.assert_array_equal(apply_op(registry, "concat", [parts], {}), np.concatenate(parts))
    assert apply_op(registry, "cast", [x], {"DstT": "int8"}).dtype == np.int8
    u = apply_op(registry, "random_uniform", [], {"shape": [3], "seed": 1, "dtype": "float64"})
    assert u.dtype == np.float64 and u.shape == (3,)


def test_eager_list_output_of_a_gradient_op(registry):
    xs = [np.ones((1, 2)), np.ones((3, 2))]
    pieces = apply_op(registry, "concat_grad", [xs, np.arange(8.0).reshape(4, 2)], {})
    assert [p.shape for p in pieces] == [(1, 2), (3, 2)]
    np.testing.assert_array_equal(pieces[1], np.arange(2.0, 8.0).reshape(3, 2))
