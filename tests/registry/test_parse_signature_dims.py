"""Free dims (`_`) and computed input dims (`grad_y: [num_segments, d]`): parsing, inference, and the
gradient signature rule that lets a gradient op name its forward op's attr-sized dims."""

from __future__ import annotations

import pytest

from opsdk.registry import OpDefErrors, load_registry
from opsdk.registry.errors import OpError
from opsdk.registry.infer import infer_outputs
from opsdk.registry.shapes import ExprDim, FreeDim, Name, SymDim, format_shape, parse_expr

HEAD = "op: foo\nsummary: Foo.\n"
PY = "kernels: {python: kernels.py:foo}\n"
F = "opdefs/op.yaml"


def test_a_free_dim_fixes_the_rank_and_gets_a_dims_name(ws):
    spec = ws.parse(HEAD + "inputs:\n  x: {dtype: float32, shape: [..., _, d, _]}\n"
                  "outputs:\n  z: {dtype: float32, shape: [..., d]}\n" + PY)
    assert spec.inputs[0].shape[1:] == (FreeDim("x_0"), SymDim("d"), FreeDim("x_2"))
    assert format_shape(spec.inputs[0].shape) == "[..., _, d, _]"
    assert spec.dim_names == ("x_0", "d", "x_2")  # the kernel's Dims members


def test_free_dims_bind_nothing_across_inputs(ws):
    spec = ws.parse(HEAD + "inputs:\n  x: {dtype: float32, shape: [_, d]}\n  y: {dtype: float32, shape: [_, d]}\n"
                  "outputs:\n  z: {dtype: float32, shape: [d]}\n" + PY)
    assert infer_outputs(spec, [(3, 2), (5, 2)], ["float32"] * 2, {}) == [((2,), "float32")]
    with pytest.raises(OpError, match=r"^foo: input 'x' must have rank 2 \(\[_, d\]\), got rank 1$"):
        infer_outputs(spec, [(3,), (5, 2)], ["float32"] * 2, {})


@pytest.mark.parametrize("text, expected", [
    (HEAD + "inputs:\n  x: {dtype: float32, shape: [n]}\noutputs:\n  z: {dtype: float32, shape: [n, _]}\n" + PY,
     f"{F}:6: op 'foo': output 'z': '_' (a free dim) may stand only in input shapes: the glue allocates outputs, "
     f"so each output size must follow from input dims and int attrs; name the dim in an input and write that "
     f"name here"),
    (HEAD + "inputs:\n  x: {dtype: float32, shape: [_, x_0]}\noutputs:\n  z: {dtype: float32, shape: [x_0]}\n" + PY,
     f"{F}:4: op 'foo': input 'x': its '_' is dims.x_0 to kernels, and 'x_0' also names a dim or attr; "
     f"rename that one"),
    (HEAD + "attrs:\n  s: {type: float, default: 1.0}\ninputs:\n  x: {dtype: float32, shape: [s]}\n"
     "outputs:\n  z: {dtype: float32, shape: [2]}\n" + PY,
     f"{F}:6: op 'foo': input 'x': dim 's' has the name of float attr 's'; rename one (only int attrs may give "
     f"sizes)"),
    (HEAD + "attrs:\n  s: {type: float, default: 1.0}\ninputs:\n  x: {dtype: float32, shape: [n]}\n"
     "  y: {dtype: float32, shape: [\"n * s\"]}\noutputs:\n  z: {dtype: float32, shape: [n]}\n" + PY,
     f"{F}:7: op 'foo': input 'y': attr 's' is a float; dim expressions may use only int attrs "
     f"(and, in conditions, bool attrs and str attrs with choices)"),
    (HEAD + "inputs:\n  x: {dtype: float32, shape: [\"n ** 2\"]}\noutputs:\n  z: {dtype: float32, shape: [2]}\n" + PY,
     f"{F}:4: op 'foo': input 'x': dim expression 'n ** 2' may use only integers, dim and attr names, "
     f"+ - * // %, max()/min() and 'a if cond else b' (cond: comparisons, and/or/not)"),
], ids=["free-output", "free-name-taken", "float-attr-dim", "float-attr-expression", "bad-expression"])
def test_dim_mistakes_are_located(ws, text, expected):
    assert ws.error(text) == expected


def test_an_input_expression_may_read_dims_a_later_input_binds(ws):
    spec = ws.parse(HEAD + "attrs:\n  k: {type: int, default: 2}\n"
                  "inputs:\n  a: {dtype: float32, shape: [\"n + k\", k]}\n  b: {dtype: float32, shape: [n]}\n"
                  "outputs:\n  z: {dtype: float32, shape: [n]}\n" + PY)
    assert spec.inputs[0].shape == (ExprDim(parse_expr("n + k"), "n + k"), ExprDim(Name("k"), "k"))
    assert spec.dim_names == ("n",)
    assert infer_outputs(spec, [(5, 2), (3,)], ["float32"] * 2, {}) == [((3,), "float32")]
    assert infer_outputs(spec, [(None, 2), (None,)], ["float32"] * 2, {}) == [((None,), "float32")]
    with pytest.raises(OpError, match=r"^foo: input 'a' must have 6 rows \(n \+ k\), got 5$"):
        infer_outputs(spec, [(5, 2), (3,)], ["float32"] * 2, {"k": 3})


PAIR = """
op: f
summary: F.
attrs:
  k: {type: int, default: 2, min: 1}
inputs:
  x: {dtype: float64, shape: [FWD_X]}
outputs:
  z: {dtype: float64, shape: [k, d]}
gradient: f_grad
kernels: {python: kernels.py:foo}
---
op: f_grad
summary: F grad.
attrs:
  k: {type: int, default: 2, min: 1}
inputs:
  x: {dtype: float64, shape: [GRAD_X]}
  grad_z: {dtype: float64, shape: [GRAD_Z]}
outputs:
  grad_x: {dtype: float64, shape: [GRAD_X]}
kernels: {python: kernels.py:foo}
"""


def _pair(fwd_x="n, d", grad_x="n, d", grad_z="k, d") -> str:
    return PAIR.replace("FWD_X", fwd_x).replace("GRAD_X", grad_x).replace("GRAD_Z", grad_z)


@pytest.mark.parametrize("fwd_x, grad_x, grad_z", [
    ("n, d", "n, d", "k, d"),    # the forward's attr-sized dim, checked by the glue
    ("n, d", "n, d", "_, d"),    # any size: the kernel need not know it
    ("n, d", "n, d", "s, d"),    # a name for a computed dim: the kernel checks it (conv2d_grad's oh, ow)
    ("_, d", "m, d", "k, d"),    # a free forward dim, named in the gradient op
])
def test_gradient_ops_may_name_computed_and_free_dims(fake_builtin, ws, fwd_x, grad_x, grad_z):
    ws.write("a.yaml", _pair(fwd_x, grad_x, grad_z))
    assert load_registry(ws.root).gradient_of("f").name == "f_grad"


W = "opdefs/a.yaml:9: op 'f': gradient op 'f_grad' (opdefs/a.yaml:12)"


@pytest.mark.parametrize("grad_z, message", [
    ('"k + 1", d', f"{W}: input 'grad_z' has shape [k + 1, d]; expected [k, d] (the shape of output 'z' of 'f'); "
                   f"write the forward op's dims (a name or '_' may stand for a computed one)"),
    ("k, 3", f"{W}: input 'grad_z' has shape [k, 3]; expected [k, d] (the shape of output 'z' of 'f'); "
             f"write the forward op's dims (a name or '_' may stand for a computed one)"),
])
def test_gradient_op_dims_that_do_not_fit_say_what_to_write(fake_builtin, ws, grad_z, message):
    ws.write("a.yaml", _pair(grad_z=grad_z))
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value) == message


def test_a_gradient_op_dim_named_like_an_undeclared_forward_attr_is_refused(fake_builtin, ws):
    # Without the attr, 'k' would be a dim bound from grad_z, and no one would check it against k.
    ws.write("a.yaml", _pair().replace("summary: F grad.\nattrs:\n  k: {type: int, default: 2, min: 1}\n",
                                       "summary: F grad.\n"))
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value) == (
        "opdefs/a.yaml:9: op 'f': gradient op 'f_grad' (opdefs/a.yaml:12): input 'grad_z' has dim 'k', the name of "
        "an int attr of 'f' that 'f_grad' does not declare; declare it under attrs (the glue then checks that "
        "size) or rename the dim")
