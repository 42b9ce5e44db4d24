"""Each builtin gradient op against central finite differences of its forward op, in float64,
on a few fixed small cases (broadcasting, lists, duplicate gather indices included).

The hypothesis-driven checker (opsdk.gradcheck) covers every op automatically; this is the
direct sanity check of the kernels, calling them with xp=numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from test_builtin_ops import declarations, run

RNG = np.random.default_rng(11)
EPS = 1e-6


def f64(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape)


def away_from_zero(*shape):
    """Values in ±[0.2, 2]: the kinks of abs and relu are far from any finite difference."""
    return np.asarray(RNG.uniform(0.2, 2.0, shape) * RNG.choice([-1.0, 1.0], shape))


def _outputs(op, inputs, attrs):
    out = run(op, inputs, attrs)
    return out if isinstance(out, tuple) else (out,)


def _grad_op_outputs(op, inputs, attrs, cotangents):
    """Call `<op>_grad` with the inputs its declaration names (forward inputs/outputs, grad_*)."""
    fwd, grad_name = declarations()[op], declarations()[op]["gradient"]
    values = dict(zip(fwd.get("inputs", {}), inputs))
    outputs = _outputs(op, inputs, attrs)
    values.update(zip(fwd["outputs"], outputs))
    values.update({f"grad_{n}": c for n, c in zip(fwd["outputs"], cotangents)})
    grad_inputs = [values[n] for n in declarations()[grad_name]["inputs"]]
    # Like autodiff: the gradient op gets the forward attrs it declares (type attrs are bound
    # by its inputs).
    declared = declarations()[grad_name].get("attrs") or {}
    result = run(grad_name, grad_inputs, {k: v for k, v in attrs.items() if k in declared})
    return dict(zip(declarations()[grad_name]["outputs"], result if isinstance(result, tuple) else (result,)))


def _objective(op, inputs, attrs, cotangents) -> float:
    return float(sum(np.sum(o * c) for o, c in zip(_outputs(op, inputs, attrs), cotangents)))


def _numeric(op, inputs, attrs, cotangents, slot, index):
    """d objective / d inputs[slot] (or inputs[slot][index] for a list input)."""
    def get(values):
        return values[slot] if index is None else values[slot][index]

    base = get(inputs)
    grad = np.zeros_like(base)
    for pos in np.ndindex(base.shape):
        value = base[pos]
        diffs = []
        for step in (EPS, -EPS):
            trial = [list(v) if isinstance(v, list) else v for v in inputs]
            moved = base.copy()
            moved[pos] = value + step
            if index is None:
                trial[slot] = moved
            else:
                trial[slot][index] = moved
            diffs.append(_objective(op, trial, attrs, cotangents))
        grad[pos] = (diffs[0] - diffs[1]) / (2 * EPS)
    return grad


def check_gradient(op, inputs, attrs=None):
    attrs = attrs or {}
    fwd = declarations()[op]
    cotangents = [RNG.normal(size=np.shape(o)) for o in _outputs(op, inputs, attrs)]
    analytic = _grad_op_outputs(op, inputs, attrs, cotangents)
    checked = 0
    for slot, name in enumerate(fwd["inputs"]):
        if f"grad_{name}" not in analytic:
            continue
        got = analytic[f"grad_{name}"]
        if isinstance(inputs[slot], list):
            assert isinstance(got, list) and len(got) == len(inputs[slot])
            pairs = [(g, _numeric(op, inputs, attrs, cotangents, slot, i)) for i, g in enumerate(got)]
        else:
            pairs = [(got, _numeric(op, inputs, attrs, cotangents, slot, None))]
        for g, want in pairs:
            assert g.shape == want.shape, f"{op}: grad_{name} has shape {g.shape}, want {want.shape}"
            assert g.dtype == want.dtype
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7, err_msg=f"{op}: grad_{name}")
            checked += 1
    assert checked, f"{op}: no gradient was checked"


BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("sx, sy", [((2, 3), (2, 3)), ((3, 1), (2, 1, 4)), ((), (3,))])
def test_binary_gradients_reduce_broadcasting(op, sx, sy):
    low = 0.5 if op in ("div", "pow") else -2.0
    x, y = f64(*sx, low=low), f64(*sy, low=low)
    check_gradient(op, [x, y])


UNARY = {"neg": f64, "abs": away_from_zero, "exp": f64, "log": lambda *s: f64(*s, low=0.5),
         "sqrt": lambda *s: f64(*s, low=0.5), "square": f64, "relu": away_from_zero,
         "sigmoid": f64, "tanh": f64, "identity": f64}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_gradients(op):
    check_gradient(op, [UNARY[op](2, 3)])
    check_gradient(op, [UNARY[op]()])


def test_cast_gradient_converts_back():
    check_gradient("cast", [f64(2, 3)], {"DstT": np.dtype("float64")})
    g = run("cast_grad", [np.ones(3, np.float64), np.ones(3, np.float32)], {})
    assert g.dtype == np.float64


def test_where_gradient():
    cond = np.array([[True], [False], [True]])
    check_gradient("where", [np.broadcast_to(cond, (3, 4)).copy(), f64(3, 1), f64(4)])


@pytest.mark.parametrize("sx, sy", [((3, 4), (4, 2)), ((2, 3, 4), (2, 4, 5))])
def test_matmul_gradient(sx, sy):
    check_gradient("matmul", [f64(*sx), f64(*sy)])


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("axes, keepdims", [([], False), ([1], False), ([0, -1], True)])
def test_reduce_gradients(op, axes, keepdims):
    check_gradient(op, [f64(2, 3, 4)], {"axes": axes, "keepdims": keepdims})


def test_reduce_max_shares_gradient_among_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    g = run("reduce_max_grad", [x, np.array([3.0, 2.0]), np.array([1.0, 1.0])], {"axes": [1]})
    np.testing.assert_array_equal(g, [[0, 0.5, 0.5], [1, 0, 0]])


def test_shape_op_gradients():
    x = f64(2, 3, 4)
    check_gradient("reshape", [x], {"shape": [4, -1]})
    check_gradient("transpose", [x], {"perm": [2, 0, 1]})
    check_gradient("transpose", [x], {})
    check_gradient("slice", [x], {"begin": [1, 0, 1], "size": [1, -1, 2]})


def test_list_input_gradients():
    check_gradient("concat", [[f64(2, 1), f64(2, 3), f64(2, 2)]], {"axis": 1})
    check_gradient("stack", [[f64(2, 3) for _ in range(3)]], {"axis": -1})


def test_gather_gradient_adds_duplicate_indices():
    indices = np.array([[0, 2], [2, 2]], dtype=np.int32)
    check_gradient("gather", [f64(3, 4), indices], {"axis": 0})
    check_gradient("gather", [f64(2, 3, 2), indices], {"axis": 1})


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_gradients(op, axis):
    check_gradient(op, [f64(3, 4)], {"axis": axis})


def test_softmax_cross_entropy_gradient():
    labels = np.abs(f64(2, 3, 4))
    labels /= labels.sum(-1, keepdims=True)
    check_gradient("softmax_cross_entropy_with_logits", [labels, f64(2, 3, 4)])
    check_gradient("softmax_cross_entropy_with_logits", [f64(3, 4), f64(3, 4)])  # any labels


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint8"])
@pytest.mark.parametrize("shape", [(), (5,), (3, 1000, 700)])  # 2.1M elements: split over threads
def test_relu_grads_compiled_kernel_matches_its_python_kernel(dtype, shape):
    """The cpu kernel (relu_grad_cpu.cc) and the python one (the GPU's): grad_y where x > 0, else
    0, so a NaN or infinite grad_y where x <= 0 gives 0, and a NaN x gives 0."""
    from opsdk.registry import load_registry
    from opsdk.runtime.kernels.choice import choose_kernel

    spec = load_registry().get("relu_grad")
    compiled = choose_kernel(spec, kind="cpu").fn
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, shape).astype(dtype)
    g = rng.uniform(0, 5, shape).astype(dtype)
    if x.size and np.dtype(dtype).kind == "f":
        x.flat[0], g.flat[0] = -1.0, np.nan       # masked NaN gradient
        if x.size > 2:
            x.flat[1], x.flat[2], g.flat[2] = np.nan, 0.0, np.inf
    want = choose_kernel(spec, kind="python").fn(np, x, g)
    got = compiled(x, g)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    np.testing.assert_array_equal(got, want)
