"""Choice and bool attrs in dim expressions (`w // s if padding == 'same' else ...`) and named
derived dims (`dims: {oh: ...}`): parsing, located mistakes, graph-time inference, and a gradient
op using its forward op's named dims by name."""

from __future__ import annotations

import pytest

from opsdk.registry import OpDefErrors, load_registry
from opsdk.registry.errors import OpError
from opsdk.registry.infer import infer_outputs
from opsdk.registry.shapes import ExprDim, Name, SymDim, eval_expr, parse_expr, render_cpp

F = "opdefs/op.yaml"

POOL = """\
op: pool
summary: Pool.
attrs:
  k: {type: int, default: 2, min: 1}
  stride: {type: int, default: 1, min: 1}
  padding: {type: str, default: valid, choices: [valid, same]}
  flip: {type: bool, default: false}
dims:
  oh: "(h + stride - 1) // stride if padding == 'same' else (h - k) // stride + 1"
  twice: "2 * oh if flip else oh"
inputs:
  x: {dtype: float64, shape: [n, h]}
outputs:
  y: {dtype: float64, shape: [n, twice]}
kernels: {python: kernels.py:foo}
"""


def test_conditions_evaluate_in_python_and_render_in_cpp():
    expr = parse_expr("w // s if padding == 'same' and not flip else max(w - k, 0)")
    env = {"w": 7, "s": 2, "k": 3, "padding": "same", "flip": False}
    assert eval_expr(expr, env) == 3
    assert eval_expr(expr, {**env, "flip": True}) == 4
    assert eval_expr(expr, {**env, "padding": None}) is None  # unknown propagates
    assert render_cpp(expr, lambda n: f"a.{n}") == (
        '(((a.padding == std::string("same")) && (!a.flip)) ? opsdk::floordiv(a.w, a.s) : '
        'std::max<int64_t>((a.w - a.k), 0))')


def test_named_dims_are_parsed_in_order_and_used_by_name(ws):
    spec = ws.parse(POOL)
    assert spec.derived_dim_names == ("oh", "twice")
    assert spec.outputs[0].shape == (SymDim("n"), ExprDim(Name("twice"), "twice"))
    assert spec.dim_names == ("n", "h")  # named dims are computed, never bound


@pytest.mark.parametrize("attrs, want", [
    ({}, (2, 4)),                                   # valid: (5 - 2) // 1 + 1
    ({"padding": "same", "stride": 2}, (2, 3)),     # same: ceil(5 / 2)
    ({"padding": "same", "stride": 2, "flip": True}, (2, 6)),
    ({"k": 3, "stride": 2}, (2, 2)),
])
def test_inference_reads_choice_and_bool_attrs(ws, attrs, want):
    spec = ws.parse(POOL)
    assert infer_outputs(spec, [(2, 5)], ["float64"], attrs) == [(want, "float64")]


def test_a_negative_named_dim_names_the_dim(ws):
    spec = ws.parse(POOL)
    with pytest.raises(OpError, match=r"^pool: dim 'oh' \(.*\) would be -1; check the inputs and attrs$"):
        infer_outputs(spec, [(2, 1)], ["float64"], {"k": 3})


@pytest.mark.parametrize("dims, message", [
    ("oh: \"h if padding == 'sme' else 1\"",
     "'sme' is not a choice of attr 'padding' (valid, same) (did you mean 'same'?)"),
    ("oh: \"h + padding\"", "str attr 'padding' may stand only in a comparison with one of its choices "
                            "(padding == 'valid')"),
    ("oh: \"h if padding < 'same' else 1\"", "str attr 'padding' may be compared only with == or !=, not <"),
    ("oh: \"h * flip\"", "bool attr 'flip' may stand only as a condition ('a if flip else b')"),
    ("oh: \"h if name == 'x' else 1\"", "a string ('x') may be compared only with a str attr that has choices"),
    ("oh: \"h ** 2\"", "dim expression 'h ** 2' may use only integers"),
])
def test_mistakes_in_named_dims_are_located(ws, dims, message):
    text = POOL.replace("  oh: \"(h + stride - 1) // stride if padding == 'same' else (h - k) // stride + 1\"",
                        "  " + dims)
    got = ws.error(text)
    assert got.startswith(f"{F}:9: op 'pool': dim 'oh': ") and message in got, got


def test_a_named_dim_reading_an_unbound_dim_or_a_later_named_dim_is_refused(ws):
    text = POOL.replace("  twice: \"2 * oh if flip else oh\"", "  twice: \"2 * q\"")
    assert ws.error(text) == (f"{F}:10: op 'pool': dim 'twice' uses dim 'q' that no input binds; "
                                f"name it alone in an input shape to bind it")
    swapped = POOL.replace("dims:\n  oh:", "dims:\n  zz: \"twice + 1\"\n  oh:")
    assert "dim 'zz' uses dim 'twice' that no input binds" in ws.error(swapped)


def test_a_named_dim_may_not_take_an_attr_name(ws):
    text = POOL.replace("  twice: \"2 * oh if flip else oh\"", "  k: \"2 * oh\"")
    assert f"{F}:10: op 'pool': dim 'k' has the name of attr 'k'; rename one" in ws.error(text)


def test_an_input_naming_a_named_dim_is_checked_against_it(ws):
    spec = ws.parse(POOL.replace("  x: {dtype: float64, shape: [n, h]}",
                                   "  x: {dtype: float64, shape: [n, h]}\n  g: {dtype: float64, shape: [n, oh]}"))
    assert infer_outputs(spec, [(2, 5), (2, 4)], ["float64"] * 2, {})[0][0] == (2, 4)
    with pytest.raises(OpError, match=r"^pool: input 'g' must have 4 columns \(oh\), got 3$"):
        infer_outputs(spec, [(2, 5), (2, 3)], ["float64"] * 2, {})


PAIR = """\
op: box
summary: Box.
attrs:
  k: {type: int, default: 2, min: 1}
  padding: {type: str, default: valid, choices: [valid, same]}
dims:
  oh: "h if padding == 'same' else h - k + 1"
  pad: "(k - 1) // 2 if padding == 'same' else 0"
inputs:
  x: {dtype: float64, shape: [n, h]}
outputs:
  y: {dtype: float64, shape: [n, oh]}
gradient: box_grad
kernels: {python: kernels.py:foo}
---
op: box_grad
summary: Box grad.
attrs:
  k: {type: int, default: 2, min: 1}
  padding: {type: str, default: valid, choices: [valid, same]}
inputs:
  x: {dtype: float64, shape: [n, h]}
  grad_y: {dtype: float64, shape: [n, oh]}
outputs:
  grad_x: {dtype: float64, shape: [n, h]}
kernels: {python: kernels.py:foo}
"""


def test_a_gradient_op_uses_its_forward_ops_named_dims(fake_builtin, ws):
    ws.write("a.yaml", PAIR)
    grad = load_registry(ws.root).get("box_grad")
    # oh is no longer bound from grad_y: it is box's dim, checked; pad comes along for the kernel.
    assert grad.derived_dim_names == ("oh", "pad")
    assert grad.inputs[1].shape[1] == ExprDim(Name("oh"), "oh")
    assert infer_outputs(grad, [(2, 5), (2, 4)], ["float64"] * 2, {"k": 2}) == [((2, 5), "float64")]
    with pytest.raises(OpError, match=r"^box_grad: input 'grad_y' must have 5 columns \(oh\), got 4$"):
        infer_outputs(grad, [(2, 5), (2, 4)], ["float64"] * 2, {"k": 2, "padding": "same"})


def test_a_gradient_op_lacking_an_attr_a_named_dim_reads_is_refused(fake_builtin, ws):
    ws.write("a.yaml", PAIR.replace("summary: Box grad.\nattrs:\n  k: {type: int, default: 2, min: 1}\n",
                                    "summary: Box grad.\nattrs:\n"))
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value) == (
        "opdefs/a.yaml:13: op 'box': gradient op 'box_grad' (opdefs/a.yaml:16) uses dim 'oh' of 'box' "
        "(h if padding == 'same' else h - k + 1), which reads attr 'k'; declare it under attrs "
        "(autodiff passes it)")
