"""Valid declarations become the typed model, with every part where the YAML put it."""

from __future__ import annotations

from dataclasses import replace

from opsdk.registry import NO_DEFAULT, GradCheckSpec, parse_opdef
from opsdk.registry.shapes import BinOp, ConstDim, EllipsisDim, ExprDim, Name, Num, SymDim

PAIRWISE = """
op: pm
summary: Pairwise L1 distance.
doc: |
  z[i, j] = sum_k |x[i, k] - y[j, k]|.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: [n, p], doc: "points"}
  y: {dtype: T, shape: [m, p]}
outputs:
  z: {dtype: T, shape: [n, m]}
gradient: pm_grad
kernels:
  cpu: foo_cpu.cc
  python: kernels.py:foo
reference: "np.abs(x[:, None, :] - y[None, :, :]).sum(-1)"
gradcheck: {rtol: 1e-4, atol: 1.0e-6, domain: [-2, 2], avoid: [0], min_gap: 0.01, dims: [1, 4],
            max_examples: 7, eps: 1e-6, enabled: false}
"""


def test_pairwise_declaration_round_trips(ws):
    [spec] = parse_opdef(ws.write("pm.yaml", PAIRWISE), ws.root)
    assert spec.name == "pm" and spec.summary == "Pairwise L1 distance."
    assert spec.doc == "z[i, j] = sum_k |x[i, k] - y[j, k]|."
    assert spec.file == "opdefs/pm.yaml" and spec.location.line == 1
    assert spec.workspace == ws.root.resolve()
    assert [(t.name, t.allowed) for t in spec.type_attrs] == [("T", ("float32", "float64"))]
    assert [(t.name, t.dtype, t.shape) for t in spec.inputs] == [
        ("x", "T", (SymDim("n"), SymDim("p"))), ("y", "T", (SymDim("m"), SymDim("p")))]
    assert spec.inputs[0].doc == "points" and spec.inputs[0].location.line == 8
    assert spec.outputs[0].shape == (SymDim("n"), SymDim("m"))
    assert spec.gradient == "pm_grad" and spec.gradient_op == "pm_grad" and not spec.stops_gradient
    assert spec.gradient_location.line == 12
    assert spec.differentiable == ("x", "y")
    assert [(k.device, k.source) for k in spec.kernels] == [
        ("cpu", "opdefs/foo_cpu.cc"), ("python", "opdefs/kernels.py:foo")]
    assert spec.reference.startswith("np.abs(")
    assert spec.gradcheck.location.line == 17
    assert replace(spec.gradcheck, location=None) == GradCheckSpec(rtol=1e-4, atol=1e-6, domain=(-2.0, 2.0), avoid=(0.0,), min_gap=0.01,
                                           dim_range=(1, 4), max_examples=7, eps=1e-6, enabled=False)
    assert spec.dim_names == ("n", "p", "m") and not spec.stateful


def test_attrs_type_attr_groups_and_unbound_defaults(ws):
    [spec] = parse_opdef(ws.write("a.yaml", """
        op: fill_like
        summary: Attrs of every kind.
        type_attrs:
          T: [floats, int32, float32]
          DstT: {allowed: [reals], default: float32}
        attrs:
          k: {type: int, default: 2, min: 1, max: 64, doc: how many}
          mode: {type: str, default: sum, choices: [sum, mean]}
          axes: {type: list(int), default: [0, 1]}
          scale: {type: float, default: 1e-3}
          flag: {type: bool}
        inputs:
          x: {dtype: T, shape: [n]}
        outputs:
          y: {dtype: DstT, shape: ["n * k"]}
        kernels: {python: kernels.py:foo}
        stateful: true
        """), ws.root)
    t, dst = spec.type_attrs
    assert t.allowed == ("float16", "float32", "float64", "int32")
    assert dst.default == "float32" and "int64" in dst.allowed and "bool" not in dst.allowed
    assert [ta.name for ta in spec.unbound_type_attrs] == ["DstT"]
    k, mode, axes, scale, flag = spec.attrs
    assert (k.type, k.default, k.min, k.max, k.doc) == ("int", 2, 1, 64, "how many")
    assert mode.choices == ("sum", "mean") and axes.default == (0, 1) and scale.default == 1e-3
    assert flag.required and flag.default is NO_DEFAULT
    assert spec.outputs[0].shape == (ExprDim(BinOp("*", Name("n"), Name("k")), "n * k"),)
    assert spec.stateful and spec.gradient is None and spec.differentiable == ()


def test_list_input_creates_its_length_attr(ws):
    [spec] = parse_opdef(ws.write("c.yaml", """
        op: concat_rows
        summary: List inputs and ellipsis.
        type_attrs: {T: [float32]}
        inputs:
          xs: {dtype: T, shape: [..., r, c], list: N}
        outputs:
          y: {dtype: T, shape: [..., "N * r", c]}
          parts: {dtype: T, shape: [..., r, c], list: N}
        kernels: {python: kernels.py:foo}
        """), ws.root)
    [n] = spec.attrs
    assert (n.name, n.type, n.min, n.required) == ("N", "int", 1, True)
    assert spec.inputs[0].is_list and spec.inputs[0].list_len == "N" and spec.inputs[0].has_ellipsis
    assert spec.outputs[0].shape[0] == EllipsisDim() and spec.outputs[0].shape[2] == SymDim("c")
    assert spec.outputs[1].list_len == "N"


def test_gradient_stop_and_null(ws):
    specs = parse_opdef(ws.write("s.yaml", """
        op: my_sign
        summary: No gradient flows.
        inputs: {x: {dtype: float32, shape: [..., ]}}
        outputs: {y: {dtype: float32, shape: [...]}}
        gradient: stop
        kernels: {python: kernels.py:foo}
        ---
        op: my_round
        summary: Not differentiable.
        inputs: {x: {dtype: float32, shape: [3, n]}}
        outputs: {y: {dtype: float32, shape: [3, n]}}
        gradient: null
        kernels: {python: kernels.py:foo}
        """), ws.root)
    stop, null = specs
    assert stop.stops_gradient and stop.gradient == "stop" and stop.gradient_op is None
    assert stop.differentiable == ()
    assert not null.stops_gradient and null.gradient is None and null.gradient_op is None
    assert null.location.line == 8 and null.inputs[0].shape == (ConstDim(3), SymDim("n"))


def test_shape_fn_forms_and_paths_relative_to_the_declaration(ws, monkeypatch):
    from opsdk.registry import shape_fns

    monkeypatch.setitem(shape_fns.SHAPE_FNS, "same_as_x", lambda shapes, attrs: [shapes["x"]])
    (ws.opdefs / "sub").mkdir()
    (ws.opdefs / "sub" / "shapes.py").write_text("def f(shapes, attrs):\n    return [None]\n")
    named, by_file = parse_opdef(ws.write("sub/d.yaml", """
        op: a
        summary: Named shape function.
        shape_fn: same_as_x
        inputs: {x: {dtype: float32}}
        outputs: {y: {dtype: float32}}
        kernels: {python: ../kernels.py:foo}
        ---
        op: b
        summary: File shape function.
        shape_fn: shapes.py:f
        inputs: {x: {dtype: float32, shape: any}}
        outputs: {y: {dtype: float32, shape: any}}
        kernels: {python: ../kernels.py:foo}
        """), ws.root)
    assert named.shape_fn == "same_as_x" and named.inputs[0].shape is None
    assert named.kernels[0].source == "opdefs/kernels.py:foo" and named.file == "opdefs/sub/d.yaml"
    assert by_file.shape_fn == "opdefs/sub/shapes.py:f" and by_file.outputs[0].shape is None
    # Module names (os.path:join) are refused: tests/registry/test_parse_errors.py.


def test_parsing_is_deterministic(ws):
    path = ws.write("pm.yaml", PAIRWISE)
    assert parse_opdef(path, ws.root) == parse_opdef(path, ws.root)


def test_gradcheck_attr_values_become_typed_tuples(ws):
    [spec] = parse_opdef(ws.write("r.yaml", """
        op: rsum
        summary: Attr values listed for the gradient checker.
        attrs:
          axes: {type: list(int), default: []}
          keepdims: {type: bool, default: false}
          scale: {type: float, default: 1.0, min: 0.0}
          mode: {type: str, default: sum, choices: [sum, mean]}
        inputs: {x: {dtype: float64}}
        outputs: {y: {dtype: float64}}
        shape_fn: reduce
        kernels: {python: kernels.py:foo}
        gradcheck:
          max_examples: 9
          attrs: {axes: [[], [0], [-1, 0]], keepdims: [true, false], scale: [1e-3, 2], mode: [mean]}
        """), ws.root)
    gc = spec.gradcheck
    # Declaration order of the gradcheck mapping; list values as tuples, like normalised attrs.
    assert gc.attr_values == (("axes", ((), (0,), (-1, 0))), ("keepdims", (True, False)),
                              ("scale", (1e-3, 2.0)), ("mode", ("mean",)))
    assert gc.values_for("keepdims") == (True, False) and gc.values_for("other") is None
    assert gc.max_examples == 9 and isinstance(gc.values_for("scale")[1], float)
