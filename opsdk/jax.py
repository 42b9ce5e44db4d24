"""Any declared op as a JAX function, from its declaration alone.

    import jax, jax.numpy as jnp
    from opsdk.jax import ops                             # builtin ops; load_ops(dir) for a workspace
    x, y = jnp.ones((5, 3)), jnp.zeros((4, 3))
    z = jax.jit(ops.pairwise_manhattan)(x, y)            # shape (5, 4), inferred from the declaration
    g = jax.grad(lambda x: ops.pairwise_manhattan(x, y).sum())(x)   # the declared gradient op

The op runs its built kernel through `jax.pure_callback` on the host (CPU kernels; arrays on a
GPU are copied to the host and back), so it works under `jax.jit`. Its output shapes and dtypes
come from the declaration; its reverse-mode derivative (`jax.grad`, `jax.vjp`) from the declared
gradient op, itself such a function. Forward-mode (`jax.jvp`) is not available: opsdk declares
reverse-mode gradients only. Under `jax.vmap` the op is called once per batch element (a loop,
`vmap_method="sequential"`): the kernels take no extra batch dimension. A list input (`list: N`)
is a Python list of arrays (N implied), a list output a list. Attrs are keyword arguments and must
be Python values (static under jit).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Optional

import jax
import numpy as np

from opsdk.registry import OpsdkError, load_registry
from opsdk.registry.attrs import normalize_attrs
from opsdk.registry.infer import infer_outputs
from opsdk.registry.spec import OpSpec


def _flat(values: Any) -> list:
    """Arrays of inputs or outputs with list ones spread out."""
    return [v for value in values
            for v in (value if isinstance(value, (list, tuple)) else [value])]


def _grouped(flat: Any, sizes: list) -> list:
    """The inverse of `_flat`: `sizes` has None for one array, N for a list of N."""
    out, at = [], 0
    for size in sizes:
        out.append(flat[at] if size is None else list(flat[at:at + size]))
        at += 1 if size is None else size
    return out


def _frozen(value: Any) -> Any:
    """Attrs as a hashable key (lists become tuples) for the per-attrs function cache."""
    return tuple(value) if isinstance(value, list) else value


class JaxOp:
    """One declared op as a JAX function: `op(*inputs, **attrs)`."""

    def __init__(self, spec: OpSpec, registry: Any):
        self.spec = spec
        self._registry = registry
        self.__name__ = spec.name
        self.__doc__ = spec.summary

    def __call__(self, *inputs: Any, **attrs: Any) -> Any:
        if len(inputs) != len(self.spec.inputs):
            raise OpsdkError(f"op '{self.spec.name}': takes {len(self.spec.inputs)} input(s) "
                             f"({', '.join(t.name for t in self.spec.inputs)}), got {len(inputs)}")
        key = tuple(sorted((k, _frozen(v)) for k, v in attrs.items()))
        return self._function(key)(*inputs)

    @functools.lru_cache(maxsize=None)
    def _function(self, key: tuple) -> Callable:
        """The custom-VJP function of this op for one set of attrs."""
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in key}
        forward = functools.partial(_host_call, self.spec, self._registry, attrs)
        if not self.spec.gradient_op:
            return forward
        grad_op = _make(self._registry, self.spec.gradient_op)
        grad_attrs = {k: v for k, v in key if k in {a.name for a in grad_op.spec.attrs}}
        return _with_vjp(self.spec, forward, grad_op, grad_attrs)


def _host_call(spec: OpSpec, registry: Any, attrs: dict, *inputs: Any) -> Any:
    """The kernel through pure_callback, with result shapes and dtypes from the declaration."""
    def each(value: Any, fn: Callable) -> Any:
        return [fn(v) for v in value] if isinstance(value, (list, tuple)) else fn(value)
    shapes = [each(x, lambda a: tuple(np.shape(a))) for x in inputs]
    dtypes = [each(x, lambda a: np.dtype(jax.numpy.result_type(a)).name) for x in inputs]
    attrs = normalize_attrs(spec, attrs, list(inputs))
    inferred = infer_outputs(spec, shapes, dtypes, attrs)
    in_sizes = [len(x) if t.is_list else None for t, x in zip(spec.inputs, inputs)]
    out_sizes, results = [], []
    for tensor, (shape, dtype) in zip(spec.outputs, inferred):
        pieces = shape if tensor.is_list else [shape]
        if not isinstance(pieces, list) or any(
                s is None or any(d is None for d in s) for s in pieces):
            raise OpsdkError(f"op '{spec.name}': output '{tensor.name}' has no static shape "
                             "from its declaration; JAX needs one")
        out_sizes.append(len(pieces) if tensor.is_list else None)
        results += [jax.ShapeDtypeStruct(tuple(s), np.dtype(dtype)) for s in pieces]

    def run(*arrays: Any) -> Any:
        from opsdk.runtime.frontend.api import apply_op

        grouped = _grouped([np.asarray(a) for a in arrays], in_sizes)
        out = apply_op(registry, spec.name, grouped, attrs, device="cpu"
                       if spec.kernel("cpu") else None)
        outs = _flat(out if len(spec.outputs) > 1 else (out,))
        return tuple(np.asarray(o, dtype=r.dtype).reshape(r.shape) for o, r in zip(outs, results))

    flat = jax.pure_callback(run, tuple(results), *_flat(inputs), vmap_method="sequential")
    outs = _grouped(list(flat), out_sizes)
    return tuple(outs) if len(outs) > 1 else outs[0]


def _with_vjp(spec: OpSpec, forward: Callable, grad_op: JaxOp, grad_attrs: dict) -> Callable:
    """`forward` with its reverse-mode derivative from the declared gradient op."""
    input_names = [t.name for t in spec.inputs]
    output_names = [t.name for t in spec.outputs]

    @jax.custom_vjp
    def function(*inputs: Any) -> Any:
        return forward(*inputs)

    def fwd(*inputs: Any) -> tuple:
        out = forward(*inputs)
        return out, (inputs, out if len(spec.outputs) > 1 else (out,))

    def bwd(residuals: tuple, grads: Any) -> tuple:
        inputs, outs = residuals
        grads = grads if len(spec.outputs) > 1 else (grads,)
        known = dict(zip(input_names, inputs)) | dict(zip(output_names, outs))
        known |= {f"grad_{n}": g for n, g in zip(output_names, grads)}
        result = grad_op(*[known[t.name] for t in grad_op.spec.inputs], **grad_attrs)
        results = result if len(grad_op.spec.outputs) > 1 else (result,)
        by_input = {t.name[len("grad_"):]: r for t, r in zip(grad_op.spec.outputs, results)}
        return tuple(by_input.get(n) for n in input_names)

    function.defvjp(fwd, bwd)
    return function


_made: dict[tuple[int, str], JaxOp] = {}


def _make(registry: Any, name: str) -> JaxOp:
    key = (id(registry), name)
    if key not in _made:
        _made[key] = JaxOp(registry.get(name), registry)
    return _made[key]


def op(name: str, workspace: Optional[str | Path] = None) -> JaxOp:
    """The JAX function of a builtin or workspace op.

    >>> op("pairwise_manhattan")(jnp.ones((5, 3)), jnp.zeros((4, 3))).shape   # doctest: +SKIP
    (5, 4)
    """
    return _make(load_registry(None if workspace is None else Path(workspace)), name)


class JaxOps:
    """Every op of a registry as a JAX function, as attributes: `ops.pairwise_manhattan`."""

    def __init__(self, workspace: Optional[str | Path] = None):
        self._registry = load_registry(None if workspace is None else Path(workspace))

    def __getattr__(self, name: str) -> JaxOp:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            made = _make(self._registry, name)
        except (KeyError, OpsdkError) as exc:
            raise AttributeError(f"opsdk.jax: {exc}") from None
        setattr(self, name, made)
        return made


def load_ops(workspace: Optional[str | Path] = None) -> JaxOps:
    """The builtin ops and those of `workspace`, as JAX functions."""
    return JaxOps(workspace)


ops = JaxOps()
