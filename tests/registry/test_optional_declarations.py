"""Optional inputs (`optional: true`, PyTorch's `Tensor?`): parsing, the located mistakes, and
graph-time inference with an absent input (ABSENT in place of its shape and dtype)."""

from __future__ import annotations

import pytest

from opsdk.registry import ABSENT, OpDefErrors, load_registry
from opsdk.registry.errors import OpError
from opsdk.registry.infer import infer_outputs

SCALE = """\
op: scale
summary: Scale rows, optionally by a weight per column.
type_attrs: {T: [float32, float64]}
inputs:
  w: {dtype: T, shape: [p], optional: true}
  x: {dtype: T, shape: [n, p]}
outputs:
  y: {dtype: T, shape: [n, p]}
kernels: {python: kernels.py:foo}
"""


def test_an_optional_input_is_parsed(ws):
    spec = ws.parse(SCALE)
    assert [t.optional for t in spec.inputs] == [True, False]
    assert spec.optional_only_dims == ()


def test_inference_with_the_input_absent_or_present(ws):
    spec = ws.parse(SCALE)
    assert infer_outputs(spec, [ABSENT, (2, 3)], [ABSENT, "float32"], {}) == [((2, 3), "float32")]
    # Present, it is checked against the required input that binds p, whatever the order.
    with pytest.raises(OpError, match=r"^scale: input 'w' has size 4 in axis 0 but x has 3 \(dim p\)$"):
        infer_outputs(spec, [(4,), (2, 3)], ["float32", "float32"], {})
    with pytest.raises(OpError, match=r"share type attr T"):
        infer_outputs(spec, [(3,), (2, 3)], ["float64", "float32"], {})


def test_a_required_input_cannot_be_absent(ws):
    spec = ws.parse(SCALE)
    with pytest.raises(OpError, match=r"^scale: input 'x' is required; got None$"):
        infer_outputs(spec, [(3,), ABSENT], ["float32", ABSENT], {})


@pytest.mark.parametrize("change, message", [
    # an output sized by a dim only the optional input binds
    ("  y: {dtype: T, shape: [n, p]}", "  y: {dtype: T, shape: [n, q]}"),
    ("  y: {dtype: T, shape: [n, p]}", '  y: {dtype: T, shape: [n, "q + 1"]}'),
])
def test_a_size_from_an_optional_input_alone_is_refused(ws, change, message):
    text = SCALE.replace("shape: [p], optional", "shape: [q], optional").replace(change, message)
    assert ws.error(text) == (
        "opdefs/op.yaml:8: op 'scale': output 'y': dim 'q' is bound only by optional input 'w', so "
        "it has no size when 'w' is absent; bind 'q' in a required input too, or compute this size "
        "from the required inputs' dims and int attrs")


def test_a_named_dim_reading_an_optional_only_dim_is_refused(ws):
    text = SCALE.replace("shape: [p], optional", "shape: [q], optional").replace(
        "inputs:", 'dims:\n  r: "q + 1"\ninputs:')
    assert "dim 'r': dim 'q' is bound only by optional input 'w'" in ws.error(text)


@pytest.mark.parametrize("text, message", [
    (SCALE.replace("  y: {dtype: T, shape: [n, p]}", "  y: {dtype: T, shape: [n, p], optional: true}"),
     "output 'y': only an input may be optional"),
    (SCALE.replace("  w: {dtype: T, shape: [p], optional: true}",
                   "  w: {dtype: T, shape: [p], optional: true, list: N}"),
     "input 'w': a list input cannot be optional; declare its length attr with min: 0"),
    (SCALE.replace("optional: true", "optional: yes please"), "input 'w': optional must be true or false"),
    (SCALE.replace("  w: {dtype: T, shape: [p], optional: true}",
                   "  w: {dtype: U, shape: [p], optional: true}").replace(
        "type_attrs: {T: [float32, float64]}", "type_attrs: {T: [float32, float64], U: [float32]}"),
     "type attr 'U' is carried only by optional input 'w', so it has no dtype when 'w' is absent"),
    (SCALE.replace("[n, p]}\noutputs", "[n, p]}\noutputs").replace("shape: [n, p]}\nkernels",
                                                                    "shape: [n, p]}\nelementwise: \"x\"\nkernels"),
     "elementwise: an op with an optional input has no scalar formula"),
])
def test_misuses_of_optional_are_located(ws, text, message):
    assert message in ws.error(text)


def test_an_output_ellipsis_needs_a_required_input_with_one(ws):
    text = SCALE.replace("shape: [p], optional", "shape: [..., p], optional").replace(
        "  y: {dtype: T, shape: [n, p]}", "  y: {dtype: T, shape: [..., p]}")
    assert "output 'y' uses '...', which only optional inputs have" in ws.error(text)


GRAD = """\
op: scale
summary: Scale.
type_attrs: {T: [float64]}
inputs:
  x: {dtype: T, shape: [n, p]}
  w: {dtype: T, shape: [p], optional: true}
outputs:
  y: {dtype: T, shape: [n, p]}
gradient: scale_grad
kernels: {python: kernels.py:foo}
---
op: scale_grad
summary: Scale grad.
type_attrs: {T: [float64]}
inputs:
  x: {dtype: T, shape: [n, p]}
  w: {dtype: T, shape: [p]OPT}
  grad_y: {dtype: T, shape: [n, p]}
outputs:
  grad_x: {dtype: T, shape: [n, p]}
  grad_w: {dtype: T, shape: [p]}
kernels: {python: kernels.py:foo}
"""


def test_the_gradient_op_takes_the_optional_input_as_optional(fake_builtin, ws):
    ws.write("a.yaml", GRAD.replace("OPT", ""))
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert "input 'w' must be optional (optional: true), like input 'w' of 'scale'" in str(info.value)
    ws.write("a.yaml", GRAD.replace("OPT", ", optional: true"))
    assert load_registry(ws.root).get("scale_grad").inputs[1].optional


def test_optional_inputs_alone_may_not_share_leading_dims(ws):
    text = SCALE.replace("shape: [p], optional", "shape: [..., p], optional").replace(
        "  x: {dtype: T, shape: [n, p]}", "  x: {dtype: T, shape: [n, p]}\n  v: {dtype: T, shape: [..., p], optional: true}")
    assert ("input 'v': '...' is shared only by optional inputs (w, v), one of which may be absent; "
            "give a required input '...' too") in ws.error(text)


def test_shape_only_marks_an_input_whose_values_the_kernel_never_reads(ws):
    spec = ws.parse(SCALE.replace("  x: {dtype: T, shape: [n, p]}",
                                  "  x: {dtype: T, shape: [n, p], shape_only: true}"))
    assert [t.shape_only for t in spec.inputs] == [False, True]
    assert "output 'y': only an input may be shape_only" in ws.error(
        SCALE.replace("  y: {dtype: T, shape: [n, p]}", "  y: {dtype: T, shape: [n, p], shape_only: true}"))
    assert "input 'x': shape_only must be true or false" in ws.error(
        SCALE.replace("  x: {dtype: T, shape: [n, p]}", "  x: {dtype: T, shape: [n, p], shape_only: 3}"))
