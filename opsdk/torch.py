"""Any declared op as a PyTorch operator (`torch.library`), from its declaration alone.

    import torch
    from opsdk.torch import ops                          # builtin ops; load_ops(dir) for a workspace
    x = torch.rand(5, 3, requires_grad=True)
    z = ops.pairwise_manhattan(x, torch.rand(4, 3))    # torch.ops.opsdk.pairwise_manhattan
    z.sum().backward()                                  # the declared gradient op runs

The operator's fake (meta) implementation gives the output shapes and dtypes the declaration
infers; its autograd formula calls the declared gradient op (itself such an operator, so double
backward works where the gradient op has a gradient); its CPU and CUDA implementations run the
built kernels on the tensors' memory through DLPack (no copy). It is opaque to torch.compile, so a
compiled model keeps it as one node without graph breaks. A list input (`list: N`) is a `Tensor[]`
argument (its length attr N is implied), a list output a `Tensor[]` result. An optional input is
`Tensor?`: None passes through to the kernel, and backward gives it no gradient. Torch schemas
allow no positional argument without a default after one with a default, so an optional input
defaults to None only where no required input follows it (`(Tensor x, Tensor? w=None)`);
before a required one it must be passed, None or a tensor (`(Tensor? w, Tensor x)`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import torch

from opsdk.runtime.kernels.interop import as_kernel_inputs
from opsdk.registry import OpsdkError, load_registry
from opsdk.registry.attrs import normalize_attrs
from opsdk.registry.infer import infer_outputs
from opsdk.registry.spec import ABSENT, NO_DEFAULT, AttrSpec, OpSpec

NAMESPACE = "opsdk"  # the builtin ops' torch namespace; a workspace's ops use its own
_SCHEMA_TYPES = {"int": "int", "float": "float", "bool": "bool", "str": "str",
                 "list(int)": "int[]", "list(float)": "float[]"}
_lock = threading.RLock()
_defined: dict[str, "TorchOp"] = {}  # qualified name -> the op made for it
_libraries: dict[str, Any] = {}  # namespace -> its torch.library.Library


def _library(namespace: str) -> Any:
    if namespace not in _libraries:
        _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    return _libraries[namespace]


@dataclass(frozen=True)
class TorchOp:
    """One declared op registered with torch: call it like the generated wrapper."""
    spec: OpSpec
    attr_names: tuple[str, ...]  # keyword-only arguments: attrs, then unbound type attrs
    packet: Any  # torch.ops.<namespace>.<name>

    def __call__(self, *inputs: Any, **attrs: Any) -> Any:
        return self.packet(*inputs, **attrs)


def _schema_default(attr: AttrSpec) -> str:
    value = attr.default
    if attr.type == "str":
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if attr.type == "bool":
        return "True" if value else "False"
    if attr.type.startswith("list("):
        return "[" + ", ".join(repr(v) for v in value) + "]"
    return repr(float(value)) if attr.type == "float" else repr(int(value))


def _implied(spec: OpSpec) -> set[str]:
    """The length attrs of list inputs: the number of tensors passed says them."""
    return {t.list_len for t in spec.inputs if t.is_list}


def _tensor_type(tspec: Any) -> str:
    return "Tensor?" if tspec.optional else "Tensor[]" if tspec.is_list else "Tensor"


def _input_args(spec: OpSpec) -> list[str]:
    """`Tensor x`, `Tensor? w=None` (no default where a required input follows: see above)."""
    args = []
    for i, t in enumerate(spec.inputs):
        trailing = all(u.optional for u in spec.inputs[i + 1:])
        default = "=None" if t.optional and trailing else ""
        args.append(f"{_tensor_type(t)} {t.name}{default}")
    return args


def schema(spec: OpSpec) -> tuple[str, tuple[str, ...]]:
    """The torch schema of an op, `(Tensor x, Tensor y, *, int k=1) -> Tensor`, and its kwargs."""
    args = _input_args(spec)
    keyword, names = [], []
    implied = _implied(spec)
    for attr in spec.attrs:
        if attr.name in implied:
            continue
        default = "" if attr.default is NO_DEFAULT else f"={_schema_default(attr)}"
        keyword.append(f"{_SCHEMA_TYPES[attr.type]} {attr.name}{default}")
        names.append(attr.name)
    for ta in spec.unbound_type_attrs:
        default = f'="{ta.default}"' if ta.default else ""
        keyword.append(f"str {ta.name}{default}")
        names.append(ta.name)
    if keyword:
        args += ["*", *keyword]
    outs = ", ".join(_tensor_type(t) for t in spec.outputs)
    returns = outs if len(spec.outputs) == 1 else f"({outs})"
    return f"({', '.join(args)}) -> {returns}", tuple(names)


def _split(spec: OpSpec, args: tuple, kwargs: dict) -> tuple[list, dict]:
    """(inputs, attrs) of a call; trailing optional inputs torch left out (their default) are None."""
    count = len(spec.inputs)
    inputs, attrs = list(args[:count]), dict(kwargs)
    inputs += [attrs.pop(t.name, None) for t in spec.inputs[len(inputs):]]
    return inputs, attrs


def _torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


def _flat(values: Any) -> list:
    """Tensors of inputs or outputs with list ones spread out (an absent optional input's None
    stays, so that saved values regroup)."""
    return [v for value in values
            for v in (value if isinstance(value, (list, tuple)) else [value])]


def _tensors(values: Any) -> list:
    return [t for t in _flat(values) if t is not None]


def _run_kernel(spec: OpSpec, registry: Any, inputs: list, attrs: dict) -> Any:
    """The built kernel on the tensors' memory (DLPack, no copy); torch tensors back."""
    from opsdk.runtime.frontend.api import apply_op

    flat = _tensors(inputs)
    device = "cuda" if any(t.is_cuda for t in flat) else None
    arrays = as_kernel_inputs(spec, [[t.detach().contiguous() for t in v]
                                     if isinstance(v, (list, tuple)) else
                                     None if v is None else v.detach().contiguous()
                                     for v in inputs])
    result = apply_op(registry, spec.name, arrays, attrs, device=device)
    results = result if len(spec.outputs) > 1 else (result,)
    tensors = tuple([_owned_tensor(r, flat) for r in out] if tspec.is_list
                    else _owned_tensor(out, flat) for tspec, out in zip(spec.outputs, results))
    return tensors if len(spec.outputs) > 1 else tensors[0]


def _owned_tensor(result: Any, inputs: list) -> torch.Tensor:
    """A result as a tensor torch may own: never a view of an input, never read-only memory."""
    if hasattr(result, "__cuda_array_interface__"):
        tensor = torch.from_dlpack(result)  # a CuPy result of a cuda kernel
    else:
        array = np.asarray(result)
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, order="C")
        tensor = torch.from_numpy(array)
    views_input = any(tensor.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
                      for t in inputs if t.numel())
    return tensor.clone() if views_input else tensor


def _fake(spec: OpSpec, inputs: list, attrs: dict) -> Any:
    """Empty tensors of the shapes and dtypes the declaration infers (torch's meta function)."""
    def each(value: Any, fn: Callable) -> Any:
        if value is None:
            return ABSENT
        return [fn(v) for v in value] if isinstance(value, (list, tuple)) else fn(value)
    shapes = [each(v, lambda t: tuple(t.shape)) for v in inputs]
    dtypes = [each(v, _dtype_name) for v in inputs]
    inferred = infer_outputs(spec, shapes, dtypes, normalize_attrs(spec, attrs, inputs))
    flat = _tensors(inputs)
    device = flat[0].device if flat else torch.device("cpu")
    outs: list = []
    for tensor, (shape, dtype) in zip(spec.outputs, inferred):
        if tensor.is_list:
            if not isinstance(shape, list):
                raise OpsdkError(f"op '{spec.name}': list output '{tensor.name}' has no static "
                                 "shapes from its declaration; torch needs them")
            outs.append([_empty(spec, tensor, s, dtype, device) for s in shape])
        else:
            outs.append(_empty(spec, tensor, shape, dtype, device))
    return tuple(outs) if len(outs) > 1 else outs[0]


def _empty(spec: OpSpec, tensor: Any, shape: Any, dtype: str, device: Any) -> torch.Tensor:
    if shape is None or any(d is None for d in shape):
        raise OpsdkError(f"op '{spec.name}': output '{tensor.name}' has no static shape "
                         "from its declaration; torch needs one for its fake implementation")
    return torch.empty(tuple(shape), dtype=_torch_dtype(dtype), device=device)


def _autograd(spec: OpSpec, registry: Any, attr_names: tuple[str, ...]) -> tuple[Callable, Callable]:
    """setup_context and backward calling the declared gradient op (as a torch op too)."""
    grad_spec = registry.get(spec.gradient_op)
    grad_op = _define(grad_spec, registry)
    input_names = [t.name for t in spec.inputs]
    output_names = [t.name for t in spec.outputs]

    # Attrs are keyword-only in the schema: torch hands them over as keyword_only_inputs, and
    # backward returns one gradient per (tensor) positional input.
    def setup_context(ctx: Any, inputs: tuple, output: Any,
                      keyword_only_inputs: Optional[dict] = None) -> None:
        outputs = output if len(spec.outputs) > 1 else (output,)
        values = (*inputs, *outputs)
        # Saved flat; `sizes` rebuilds list inputs and outputs (None: one tensor).
        ctx.sizes = [len(v) if isinstance(v, (list, tuple)) else None for v in values]
        ctx.save_for_backward(*_flat(values))
        given = keyword_only_inputs or {}
        ctx.grad_attrs = {k: v for k, v in given.items() if k in grad_op.attr_names}

    def backward(ctx: Any, *grads: Any) -> tuple:
        saved, at, values = ctx.saved_tensors, 0, []
        for size in ctx.sizes:
            values.append(saved[at] if size is None else list(saved[at:at + size]))
            at += 1 if size is None else size
        known = dict(zip(input_names + output_names, values))
        for name, grad, out in zip(output_names, grads, values[len(input_names):]):
            known[f"grad_{name}"] = _filled(grad, out)
        result = grad_op(*[known[t.name] for t in grad_spec.inputs], **ctx.grad_attrs)
        results = result if len(grad_spec.outputs) > 1 else (result,)
        by_input = {t.name[len("grad_"):]: r for t, r in zip(grad_spec.outputs, results)}
        # An absent optional input (None) gets no gradient.
        return tuple(None if known[n] is None else by_input.get(n) for n in input_names)

    return setup_context, backward


def _no_autograd(spec: OpSpec, registry: Any) -> tuple[Callable, Callable]:
    """The autograd formula of an op without a gradient op. `gradient: stop` gives every input no
    gradient; otherwise backward raises, naming the op. Without any formula torch would warn and
    hand back None (a double backward through a gradient op that declares no gradient of its own
    was silently wrong so)."""
    count = len(spec.inputs)

    def setup_context(ctx: Any, inputs: tuple, output: Any,
                      keyword_only_inputs: Optional[dict] = None) -> None:
        pass

    def backward(ctx: Any, *grads: Any) -> tuple:
        if spec.stops_gradient:
            return (None,) * count
        raise OpsdkError(_no_gradient_message(spec, registry))

    return setup_context, backward


def _no_gradient_message(spec: OpSpec, registry: Any) -> str:
    forward = [name for name in registry.names() if registry.get(name).gradient_op == spec.name]
    if forward:
        return (f"opsdk.torch: op '{spec.name}' (the gradient op of '{forward[0]}') declares no "
                f"gradient of its own, so a second derivative of '{forward[0]}' (double backward, "
                f"create_graph=True, gradgradcheck) is not available; declare `gradient:` for "
                f"'{spec.name}' (docs/opdefs.md, Gradients)")
    return (f"opsdk.torch: op '{spec.name}' is not differentiable (its declaration has no "
            "`gradient:`); detach its inputs or declare a gradient op (docs/opdefs.md, Gradients)")


def _filled(grad: Any, out: Any) -> Any:
    """An output's gradient, zeros where torch gives none (element by element for a list)."""
    if isinstance(out, list):
        grads = grad if isinstance(grad, (list, tuple)) else [None] * len(out)
        return [torch.zeros_like(o) if g is None else g for g, o in zip(grads, out)]
    return torch.zeros_like(out) if grad is None else grad


def _define(spec: OpSpec, registry: Any) -> TorchOp:
    namespace = spec.namespace  # ops of two workspaces never collide in torch
    qualified = f"{namespace}::{spec.name}"
    library = _library(namespace)
    with _lock:
        made = _defined.get(qualified)
        if made is not None:
            return made
        text, attr_names = schema(spec)
        library.define(f"{spec.name}{text}")

        def impl(*args: Any, **kwargs: Any) -> Any:
            inputs, attrs = _split(spec, args, kwargs)
            return _run_kernel(spec, registry, inputs, attrs)

        def fake(*args: Any, **kwargs: Any) -> Any:
            inputs, attrs = _split(spec, args, kwargs)
            return _fake(spec, inputs, attrs)

        library.impl(spec.name, impl, "CPU")
        library.impl(spec.name, impl, "CUDA")
        torch.library.register_fake(qualified, fake, lib=library)
        made = TorchOp(spec, attr_names, getattr(getattr(torch.ops, namespace), spec.name))
        _defined[qualified] = made
        setup_context, backward = (_autograd(spec, registry, attr_names) if spec.gradient_op
                                   else _no_autograd(spec, registry))
        torch.library.register_autograd(qualified, backward, setup_context=setup_context,
                                        lib=library)
        return made


def op(name: str, workspace: Optional[str | Path] = None) -> TorchOp:
    """The torch operator `torch.ops.<namespace>.<name>` of a builtin or workspace op (made once;
    builtin ops are in `torch.ops.opsdk`, a workspace's in its namespace).

    >>> pm = op("pairwise_manhattan")                          # doctest: +SKIP
    >>> pm(torch.rand(5, 3), torch.rand(4, 3)).shape           # doctest: +SKIP
    torch.Size([5, 4])
    """
    registry = load_registry(None if workspace is None else Path(workspace))
    return _define(registry.get(name), registry)


class TorchOps:
    """Every op of a registry as a torch operator, as plain attributes: `ops.pairwise_manhattan`.

    All are made at once, when this object is, so code under torch.compile finds them by a
    plain attribute lookup (nothing to trace, no graph break).
    """

    def __init__(self, workspace: Optional[str | Path] = None):
        registry = load_registry(None if workspace is None else Path(workspace))
        self._refused: dict[str, str] = {}
        for name in registry.names():
            try:
                setattr(self, name, _define(registry.get(name), registry))
            except OpsdkError as exc:
                self._refused[name] = str(exc)

    def __getattr__(self, name: str) -> TorchOp:
        if name.startswith("_"):
            raise AttributeError(name)
        reason = self.__dict__.get("_refused", {}).get(name, f"no op named '{name}'")
        raise AttributeError(f"opsdk.torch: {reason}")


def load_ops(workspace: Optional[str | Path] = None) -> TorchOps:
    """The builtin ops and those of `workspace`, as torch operators (see TorchOps)."""
    return TorchOps(workspace)


# The builtin ops (about 0.4 s to register, once per process). Type checkers read their signatures
# from opsdk/_torch_ops.pyi, which an installed opsdk carries (generated/python/torch_ops.pyi).
if TYPE_CHECKING:
    from opsdk import _torch_ops as ops  # type: ignore[attr-defined, unused-ignore]
else:
    ops = TorchOps()
