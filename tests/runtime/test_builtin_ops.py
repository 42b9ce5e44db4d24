"""Every builtin op's Python kernel against NumPy on random inputs (broadcasting, 0-d, empty and
batched shapes included), with its declared `reference`, its output dtype and its shape function
(also with unknown dims) checked on the same case.

Kernels are called directly with xp=numpy, loaded from the files their declarations name.
"""

from __future__ import annotations

import importlib.util
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml

from opsdk.registry.shape_fns import SHAPE_FNS

BUILTIN = Path(__file__).resolve().parents[2] / "opdefs" / "builtin"
RNG = np.random.default_rng(7)


@cache
def declarations() -> dict:
    out = {}
    for path in sorted(BUILTIN.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out[doc["op"]] = doc
    return out


@cache
def _module(file: str):
    spec = importlib.util.spec_from_file_location(f"builtin_{Path(file).stem}", BUILTIN / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(op: str, inputs: list, attrs: dict | None = None):
    """Call op's python kernel like the runtime: defaults filled, N set for list inputs."""
    decl = declarations()[op]
    full = {k: v["default"] for k, v in (decl.get("attrs") or {}).items() if "default" in v}
    full.update(attrs or {})
    for (name, t), value in zip(decl.get("inputs", {}).items(), inputs):
        if "list" in t:
            full[t["list"]] = len(value)
    file, fn = decl["kernels"]["python"].split(":")
    return getattr(_module(file), fn)(np, *inputs, **full)


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _binary_cases():
    pairs = [((2, 3), (2, 3)), ((4, 1, 3), (2, 1)), ((), (3,)), ((0, 3), (1, 3))]
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "pow": np.power, "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal,
           "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
           "greater": np.greater, "greater_equal": np.greater_equal,
           "floor_div": np.floor_divide, "floor_mod": np.mod}
    for op, fn in fns.items():
        low = 0.5 if op in ("div", "pow", "floor_div", "floor_mod") else -2.0
        for sx, sy in pairs:
            x, y = f32(*sx, low=low), f32(*sy, low=low)
            yield pytest.param(op, [x, y], {}, fn(x, y), id=f"{op}-{sx}-{sy}")
    a, b = RNG.integers(-5, 5, (3, 1), dtype=np.int32), RNG.integers(-5, 5, (4,), dtype=np.int32)
    for op in ("add", "sub", "mul", "maximum", "minimum"):
        yield pytest.param(op, [a, b], {}, fns[op](a, b), id=f"{op}-int32")
    nonzero = np.array([3, -2, 1, -4], dtype=np.int32)  # Python's rounding down, either sign
    for op in ("floor_div", "floor_mod"):
        yield pytest.param(op, [a, nonzero], {}, fns[op](a, nonzero), id=f"{op}-int32")


def _unary_cases():
    fns = {"neg": np.negative, "abs": np.abs, "sign": np.sign, "exp": np.exp, "log": np.log,
           "sqrt": np.sqrt, "square": np.square, "relu": lambda x: np.maximum(x, 0),
           "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh,
           "identity": lambda x: x, "stop_gradient": lambda x: x}
    for op, fn in fns.items():
        low = 0.5 if op in ("log", "sqrt") else -2.0
        for shape in [(), (3,), (2, 3)]:
            x = f32(*shape, low=low)
            yield pytest.param(op, [x], {}, fn(x), id=f"{op}-{shape}")


def _reduce_cases():
    x = f32(2, 3, 4)
    for axes, keep in [([], False), ([1], False), ([0, -1], True), ([], True)]:
        ax = tuple(axes) or None
        for op, fn in [("reduce_sum", np.sum), ("reduce_mean", np.mean), ("reduce_max", np.max),
                       ("reduce_min", np.min)]:
            yield pytest.param(op, [x], {"axes": axes, "keepdims": keep},
                               fn(x, axis=ax, keepdims=keep), id=f"{op}-{axes}-{keep}")
    for op, fn in [("argmin", np.argmin), ("argmax", np.argmax)]:
        for axis in (-1, 0, 1):
            yield pytest.param(op, [x], {"axis": axis}, fn(x, axis=axis), id=f"{op}-{axis}")
    small = RNG.integers(0, 100, (3, 4), dtype=np.int8)  # sums overflow int8: wraps, stays int8
    yield pytest.param("reduce_sum", [small], {"axes": [0]}, np.sum(small, axis=0, dtype=np.int8),
                       id="reduce_sum-int8-keeps-dtype")


def _array_cases():
    x = f32(2, 3, 4)
    yield pytest.param("reshape", [x], {"shape": [4, -1]}, x.reshape(4, 6), id="reshape")
    yield pytest.param("reshape", [x], {}, x.reshape(-1), id="reshape-default-flattens")
    yield pytest.param("transpose", [x], {}, x.transpose(), id="transpose-reverse")
    yield pytest.param("transpose", [x], {"perm": [1, 0, 2]}, x.transpose(1, 0, 2), id="transpose")
    parts = [f32(2, 1), f32(2, 3), f32(2, 0)]
    yield pytest.param("concat", [parts], {"axis": -1}, np.concatenate(parts, -1), id="concat")
    same = [f32(2, 3) for _ in range(3)]
    yield pytest.param("stack", [same], {"axis": 1}, np.stack(same, 1), id="stack")
    yield pytest.param("slice", [x], {"begin": [1, 0, 2], "size": [-1, 2, 2]}, x[1:, 0:2, 2:4],
                       id="slice")
    yield pytest.param("slice", [x], {}, x, id="slice-default-whole")
    idx = np.array([[2, 0], [1, 2]], dtype=np.int64)
    yield pytest.param("gather", [x, idx], {"axis": 1}, np.take(x, idx, axis=1), id="gather")
    yield pytest.param("gather", [x, np.int32(1)], {}, x[1], id="gather-scalar-index")
    yield pytest.param("cast", [x], {"DstT": np.dtype("int32")}, x.astype(np.int32), id="cast")
    cond = RNG.random((2, 1, 4)) > 0.5
    a, b = f32(3, 1), f32(4)
    yield pytest.param("where", [cond, a, b], {}, np.where(cond, a, b), id="where")
    m, n = f32(3, 4), f32(4, 5)
    yield pytest.param("matmul", [m, n], {}, m @ n, id="matmul-2d")
    bm, bn = f32(2, 3, 4), f32(2, 4, 5)
    yield pytest.param("matmul", [bm, bn], {}, bm @ bn, id="matmul-batched")


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _nn_cases():
    x = f32(3, 5) * 50  # large logits: a naive exp would overflow float32
    for axis in (-1, 0):
        yield pytest.param("softmax", [x], {"axis": axis}, _softmax(x, axis), id=f"softmax-{axis}")
        yield pytest.param("log_softmax", [x], {"axis": axis}, np.log(_softmax(x.astype(np.float64), axis)).astype(np.float32),
                           id=f"log_softmax-{axis}")
    labels = _softmax(f32(2, 3, 5), -1)
    logits = f32(2, 3, 5)
    loss = -np.sum(labels * np.log(_softmax(logits, -1)), -1)
    yield pytest.param("softmax_cross_entropy_with_logits", [labels, logits], {}, loss, id="xent")
    big = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=np.float32)
    yield pytest.param("sigmoid", [big], {}, np.array([0, 1.9287e-22, 0.5, 1, 1], np.float32),
                       id="sigmoid-extremes")


def _creation_cases():
    yield pytest.param("zeros", [], {"shape": [2, 3], "dtype": np.dtype("int16")},
                       np.zeros((2, 3), np.int16), id="zeros")
    yield pytest.param("ones", [], {"shape": [0, 2], "dtype": np.dtype("float64")},
                       np.ones((0, 2)), id="ones")
    yield pytest.param("fill", [], {"shape": [3], "value": 2.5, "dtype": np.dtype("float32")},
                       np.full(3, 2.5, np.float32), id="fill")


CASES = [*_binary_cases(), *_unary_cases(), *_reduce_cases(), *_array_cases(), *_nn_cases(),
         *_creation_cases()]


@pytest.mark.parametrize("op, inputs, attrs, expected", CASES)
def test_kernel_matches_numpy(op, inputs, attrs, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # overflow or invalid-value warnings are failures
        got = run(op, inputs, attrs)
    assert isinstance(got, np.ndarray), f"{op} returned {type(got).__name__}, not an array"
    assert got.dtype == np.asarray(expected).dtype
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("op, inputs, attrs, expected", CASES)
def test_reference_matches_kernel(op, inputs, attrs, expected):
    """The declared reference, evaluated as the gradient checker does (no builtins)."""
    decl = declarations()[op]
    if "reference" not in decl:
        pytest.fail(f"{op} declares no reference")
    scope = {"np": np, **{k: v["default"] for k, v in (decl.get("attrs") or {}).items() if "default" in v}}
    scope.update(attrs)
    scope.update(zip(decl.get("inputs", {}), inputs))
    with np.errstate(over="ignore"):  # sigmoid's reference overflows exp at -1000, correctly
        want = eval(decl["reference"], {"__builtins__": {}}, scope)  # noqa: S307 - our declarations
    np.testing.assert_allclose(run(op, inputs, attrs), want, rtol=2e-6, atol=1e-6)


def _blur_first(shape):
    return shape if not shape else (None,) + tuple(shape[1:])


@pytest.mark.parametrize("op, inputs, attrs, expected", CASES)
def test_shape_fn_predicts_output_shape(op, inputs, attrs, expected):
    decl = declarations()[op]
    if "shape_fn" not in decl:
        assert all("shape" in t for t in decl.get("inputs", {}).values()), f"{op}: no shapes at all"
        return  # declared shapes: the registry's inference, tested with the parser
    names = list(decl.get("inputs", {}))
    shapes = {n: [np.shape(v) for v in x] if isinstance(x, list) else np.shape(x)
              for n, x in zip(names, inputs)}
    full = {k: v.get("default") for k, v in (decl.get("attrs") or {}).items()}
    full.update(attrs)
    fn = SHAPE_FNS[decl["shape_fn"]]
    assert fn(shapes, full) == [np.shape(expected)]
    blurred = {n: [_blur_first(s) for s in v] if isinstance(v, list) else _blur_first(v)
               for n, v in shapes.items()}
    [guess] = fn(blurred, full)
    assert guess is not None and len(guess) == np.ndim(expected)
    assert all(g is None or g == e for g, e in zip(guess, np.shape(expected)))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_sigmoid_gives_the_bits_of_its_two_sided_formula(dtype):
    """sigmoid picks its numerator with masks, not `where`: the result must be bit for bit
    1 / (1 + e) for x >= 0 and e / (1 + e) below (e = exp(-|x|)), NaN and infinities included."""
    from opsdk.registry import load_registry
    from opsdk.runtime.kernels.choice import choose_kernel

    sigmoid = choose_kernel(load_registry().get("sigmoid"), kind="python").fn
    x = np.concatenate([np.random.default_rng(5).normal(0, 12, 20000),
                        [-np.inf, -800.0, -0.0, 0.0, 800.0, np.inf, np.nan]]).astype(dtype)
    e = np.exp(-np.abs(x))
    want = np.where(x >= 0, np.ones_like(e) / (1 + e), e / (1 + e))
    got = sigmoid(np, x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
