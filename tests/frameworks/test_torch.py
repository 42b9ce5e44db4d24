"""opsdk.torch: declared ops as torch.library operators, checked by PyTorch's own tools."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch not installed: pip install 'opsdk[torch]'")

from opsdk.registry import OpsdkError, load_registry  # noqa: E402
from opsdk.torch import TorchOps, ops, schema  # noqa: E402

# Shapes of the forward ops' inputs; a gradient op's inputs are derived from its forward op's.
FORWARD_SHAPES = {"pairwise_manhattan": [(6, 4), (5, 4)], "conv2d": [(2, 5, 5, 3), (3, 3, 3, 4)],
                  "max_pool": [(2, 6, 6, 3)], "avg_pool": [(2, 6, 6, 3)], "relu": [(3, 4)],
                  "conv2d_transpose": [(2, 4, 4, 3), (3, 3, 2, 3)],
                  "gemm": [(3, 4), (4, 5)],  # not differentiable: matmul's kernels call it
                  # not differentiable: the fold pass's stand-ins for conv2d_grad, and for
                  # conv2d with its bias add and ReLU
                  "conv2d_grad_filter": [(2, 5, 5, 3), (3, 3, 3, 4), (2, 5, 5, 4)],
                  "conv2d_bias": [(2, 5, 5, 3), (3, 3, 3, 4), (4,)],
                  # and for max_pool_grad with its bias add's gradient: x, y, grad_y
                  "max_pool_grad_bias": [(2, 6, 6, 3), (2, 3, 3, 3), (2, 3, 3, 3)],
                  # optimizer updates (not differentiable): the variable's shape and scalars
                  "apply_gradient_descent": [(3, 4), (), (3, 4)],
                  "apply_momentum": [(3, 4), (3, 4), (), (3, 4), ()],
                  "apply_adagrad": [(3, 4), (3, 4), (), (3, 4)],
                  "apply_adam": [(3, 4), (3, 4), (3, 4), (), (), (), (), (), (), (3, 4)],
                  "apply_rms_prop": [(3, 4), (3, 4), (3, 4), (), (), (), (), (3, 4)]}


def _inputs(name: str, requires_grad: bool = False):
    """Float64 inputs of `name`; for a gradient op: the forward inputs, the forward outputs (as
    the forward op computes them) and random output gradients, in the gradient op's order."""
    gen = torch.Generator().manual_seed(0)
    forward = name[:-len("_grad")] if name.endswith("_grad") else name
    xs = [torch.rand(tuple(shape), dtype=torch.float64, generator=gen,
                     requires_grad=requires_grad and forward == name)
          for shape in FORWARD_SHAPES[forward]]
    if forward == name:
        return tuple(xs)
    registry = load_registry()
    fwd, grad = registry.get(forward), registry.get(name)
    outputs = getattr(ops, forward)(*xs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    values = dict(zip((t.name for t in fwd.inputs), xs))
    values.update(zip((t.name for t in fwd.outputs), outputs))
    values.update({f"grad_{t.name}": torch.rand(o.shape, dtype=torch.float64, generator=gen)
                   for t, o in zip(fwd.outputs, outputs)})
    return tuple(values[t.name] for t in grad.inputs)


def _compiled() -> list[str]:
    registry = load_registry()
    return sorted(n for n in registry.names() if registry.get(n).kernel("cpu"))


def test_every_builtin_op_with_a_cpu_kernel_is_covered():
    uncovered = [n for n in _compiled() if n.removesuffix("_grad") not in FORWARD_SHAPES]
    assert uncovered == [], "add their input shapes to FORWARD_SHAPES"


def test_schema_from_the_declaration():
    registry = load_registry()
    assert schema(registry.get("pairwise_manhattan")) == ("(Tensor x, Tensor y) -> Tensor", ())
    text, names = schema(registry.get("reduce_sum"))
    assert text == "(Tensor x, *, int[] axes=[], bool keepdims=False) -> Tensor"
    assert names == ("axes", "keepdims")


def test_flagship_matches_its_reference_and_returns_tensors():
    x, y = _inputs("pairwise_manhattan")
    z = ops.pairwise_manhattan(x, y)
    assert isinstance(z, torch.Tensor) and z.dtype == torch.float64
    torch.testing.assert_close(z, (x[:, None, :] - y[None]).abs().sum(-1))


@pytest.mark.parametrize("name", _compiled())
def test_opcheck_passes_on_ops_with_a_cpu_kernel(name):
    torch.library.opcheck(getattr(ops, name).packet.default, _inputs(name))


def _differentiable(name: str) -> bool:
    spec = load_registry().get(name)
    return not name.endswith("_grad") and spec.gradient is not None


@pytest.mark.parametrize("name", [n for n in _compiled() if _differentiable(n)])
def test_gradcheck_passes_on_the_differentiable_ops_with_a_cpu_kernel(name):
    assert torch.autograd.gradcheck(getattr(ops, name), _inputs(name, requires_grad=True))


@pytest.mark.parametrize("name, kwargs", [("softmax", {}), ("reduce_sum", {"axes": [1]}),
                                          ("exp", {})])
def test_python_kernel_ops_pass_opcheck_and_gradcheck(name, kwargs):
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    op = getattr(ops, name)
    torch.library.opcheck(op.packet.default, (x,), kwargs)
    assert torch.autograd.gradcheck(lambda t: op(t, **kwargs), (x,))


def test_a_wrong_shape_is_the_declarations_error():
    x, _ = _inputs("pairwise_manhattan")
    with pytest.raises(Exception, match="pairwise_manhattan"):
        ops.pairwise_manhattan(x, torch.rand(5, 3, dtype=torch.float64))


@pytest.mark.slow
def test_torch_compile_without_graph_breaks_and_backward():
    x, y = _inputs("pairwise_manhattan", requires_grad=True)

    def loss(a, b):
        return (ops.pairwise_manhattan(a, b) * 2).min(dim=1).values.sum()

    compiled = torch.compile(loss, fullgraph=True)  # fullgraph: a graph break is an error
    value = compiled(x, y)
    value.backward()
    torch.testing.assert_close(value, loss(x.detach(), y.detach()))
    assert x.grad is not None and x.grad.shape == x.shape


def test_workspace_ops_load_apart():
    made = TorchOps()
    assert made.pairwise_manhattan.spec.name == "pairwise_manhattan"
    with pytest.raises(AttributeError, match="no op named 'nope'"):
        made.nope


def test_list_inputs_and_outputs_are_tensor_lists():
    registry = load_registry()
    assert schema(registry.get("concat")) == ("(Tensor[] xs, *, int axis=0) -> Tensor", ("axis",))
    assert schema(registry.get("concat_grad"))[0].endswith("-> Tensor[]")
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.rand(4, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    torch.library.opcheck(ops.concat.packet.default, ([a, b],), {"axis": 0})
    torch.library.opcheck(ops.stack.packet.default, ([a, a],), {"axis": 1})
    grads = ops.concat_grad([a.detach(), b.detach()], torch.ones(6, 3, dtype=torch.float64),
                            axis=0)
    assert [tuple(g.shape) for g in grads] == [(2, 3), (4, 3)]
    assert torch.autograd.gradcheck(lambda x, y: ops.concat([x, y], axis=0), (a, b))


def test_a_workspace_op_named_like_a_builtin_one_is_its_own_torch_op(tmp_path):
    ws = tmp_path / "mine"
    (ws / "opdefs").mkdir(parents=True)
    (ws / "opdefs" / "k.py").write_text("def exp(xp, x):\n    return x * 0 + 7\n")
    (ws / "opdefs" / "exp.yaml").write_text(
        "op: exp\nsummary: Sevens.\ntype_attrs:\n  T: [float64]\ninputs:\n"
        "  x: {dtype: T, shape: [n]}\noutputs:\n  y: {dtype: T, shape: [n]}\n"
        "kernels:\n  python: k.py:exp\n")
    mine = TorchOps(ws)
    x = torch.zeros(2, dtype=torch.float64)
    assert mine.exp(x).tolist() == [7.0, 7.0]
    assert ops.exp(x).tolist() == [1.0, 1.0]  # the builtin one, in torch.ops.opsdk
    assert mine.exp.spec.qualified_name == "mine::exp"


CUBE = """
op: cube
summary: y = x ** 3.
type_attrs: {T: [float64]}
inputs: {x: {dtype: T, shape: [n]}}
outputs: {y: {dtype: T, shape: [n]}}
gradient: cube_grad
kernels: {python: k.py:cube}
---
op: cube_grad
summary: grad_x = 3 x^2 grad_y.
type_attrs: {T: [float64]}
inputs: {x: {dtype: T, shape: [n]}, grad_y: {dtype: T, shape: [n]}}
outputs: {grad_x: {dtype: T, shape: [n]}}
gradient: GRAD_OF_GRAD
kernels: {python: k.py:cube_grad}
---
op: cube_grad_grad
summary: The gradient of cube_grad.
type_attrs: {T: [float64]}
inputs: {x: {dtype: T, shape: [n]}, grad_y: {dtype: T, shape: [n]},
         grad_grad_x: {dtype: T, shape: [n]}}
outputs: {grad_x: {dtype: T, shape: [n]}, grad_grad_y: {dtype: T, shape: [n]}}
kernels: {python: k.py:cube_grad_grad}
"""
CUBE_KERNELS = """
def cube(xp, x):
    return x ** 3
def cube_grad(xp, x, grad_y):
    return 3 * x ** 2 * grad_y
def cube_grad_grad(xp, x, grad_y, grad_grad_x):
    return 6 * x * grad_y * grad_grad_x, 3 * x ** 2 * grad_grad_x
"""


def _cube_ops(tmp_path, grad_of_grad: str):
    ws = tmp_path / f"cube_{grad_of_grad}"
    (ws / "opdefs").mkdir(parents=True)
    (ws / "opdefs" / "k.py").write_text(CUBE_KERNELS)
    (ws / "opdefs" / "cube.yaml").write_text(CUBE.replace("GRAD_OF_GRAD", grad_of_grad))
    return TorchOps(ws)


def test_double_backward_runs_the_gradient_ops_declared_gradient(tmp_path):
    cube = _cube_ops(tmp_path, "cube_grad_grad").cube
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(cube, (x,))
    (gx,) = torch.autograd.grad(cube(x).sum(), x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    torch.testing.assert_close(ggx, 6 * x.detach())


def test_double_backward_without_a_declared_gradient_is_an_error_naming_the_op(tmp_path):
    cube = _cube_ops(tmp_path, "null").cube
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(cube(x).sum(), x, create_graph=True)  # first order still works
    torch.testing.assert_close(gx, 3 * x.detach() ** 2)
    with pytest.raises(OpsdkError, match="'cube_grad' .*the gradient op of 'cube'.* declares no "
                                         "gradient of its own"):
        torch.autograd.grad(gx.sum(), x)
    x, y = _inputs("pairwise_manhattan", requires_grad=True)
    with pytest.raises(OpsdkError, match="pairwise_manhattan_grad"):
        torch.autograd.gradgradcheck(ops.pairwise_manhattan, (x, y))


def test_a_stop_gradient_op_passes_no_gradient_and_a_null_one_raises():
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad((ops.sign(x) + x).sum(), x)  # sign: `gradient: stop`
    torch.testing.assert_close(grad, torch.ones(3, dtype=torch.float64))
    var, delta = torch.rand(3, 4, dtype=torch.float64, requires_grad=True), torch.rand(3, 4)
    updated = ops.apply_gradient_descent(var, torch.tensor(0.1, dtype=torch.float64), delta.double())  # `gradient: null`
    with pytest.raises(OpsdkError, match="'apply_gradient_descent' is not differentiable"):
        updated.sum().backward()


def test_a_bfloat16_tensor_is_an_error_naming_the_op_and_its_dtypes():
    x = torch.rand(5, 3, dtype=torch.bfloat16)
    with pytest.raises(OpsdkError, match=r"pairwise_manhattan: input 'x' has dtype bfloat16.*"
                                         r"takes float32, float64"):
        ops.pairwise_manhattan(x, x)


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


def test_an_optional_input_is_a_tensor_or_none(tmp_path):
    ws = tmp_path / "opt"
    (ws / "opdefs").mkdir(parents=True)
    (ws / "opdefs" / "k.py").write_text(WSCALE_KERNELS)
    (ws / "opdefs" / "wscale.yaml").write_text(WSCALE)
    mine = TorchOps(ws)
    assert str(mine.wscale.packet.default._schema).endswith("wscale(Tensor x, Tensor? w=None) -> Tensor")
    # Before a required input, an optional one has no default in torch's schema (it must be passed).
    assert "wscale_grad(Tensor x, Tensor? w, Tensor grad_y)" in str(mine.wscale_grad.packet.default._schema)
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    w = torch.rand(4, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(mine.wscale(x), x.detach())
    assert torch.autograd.gradcheck(lambda x: mine.wscale(x, None), (x,))
    assert torch.autograd.gradcheck(mine.wscale, (x, w))
    torch.library.opcheck(mine.wscale.packet.default, (x.detach(), None))
