"""Any declared op as a JAX function, from its declaration alone.

    import jax, jax.numpy as jnp
    from opsdk.jax import ops                             # builtin ops; load_ops(dir) for a workspace
    x, y = jnp.ones((5, 3)), jnp.zeros((4, 3))
    z = jax.jit(ops.pairwise_manhattan)(x, y)            # shape (5, 4), inferred from the declaration
    g = jax.grad(lambda x: ops.pairwise_manhattan(x, y).sum())(x)   # the declared gradient op

Under `jax.jit` an op with a compiled cpu kernel calls it through an XLA FFI handler that
`opsdk build` links where jaxlib is installed (`build/jax_ffi/<op>/`, opsdk/_jax_ffi.py): no Python
on the call path. Other ops (python kernels, list tensors, shape functions, or no handler built)
run their kernel through `jax.pure_callback` on the host (arrays on a GPU are copied to the host
and back). Called outside jit an op runs a jitted form cached per attrs, so a repeated call of the
same shapes is not traced again. Output shapes and dtypes come from the declaration; the
reverse-mode derivative (`jax.grad`, `jax.vjp`) from the declared gradient op, itself such a
function. Forward-mode (`jax.jvp`) is not available: opsdk declares reverse-mode gradients only.
Under `jax.vmap` a callback op whose outputs all lead with `...` (elementwise ops, matmul, softmax:
the dims of `...` are a batch) runs once over the whole batch; other callback ops (or a batched
input without `...`) run once per batch element, in one callback; XLA loops over an FFI op. A list
input (`list: N`) is a Python list of arrays (N implied), a list output a list. An optional input
takes None (trailing ones may be left out): the kernel gets None, the traced function takes the
given inputs only, and the derivative has no entry for an absent one; such an op runs through
pure_callback (an FFI call has a fixed list of buffers). Attrs are keyword
arguments and must be Python values (static under jit: `static_argnames` for a jitted function's
argument); a traced attr is an error naming it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import jax
import numpy as np

from opsdk.registry import OpsdkError, load_registry
from opsdk.registry.attrs import normalize_attrs
from opsdk.registry.infer import infer_call
from opsdk.registry.shapes import EllipsisDim
from opsdk.registry.spec import ABSENT, OpSpec

from opsdk import _jax_ffi

# Whether ops with a built FFI handler run it (True) or go through pure_callback like the others
# (False: for comparison, bench/bench_jax_ffi.py). Read when a call is traced.
FFI = True


def _flat(values: Any) -> list:
    """Arrays of inputs or outputs with list ones spread out (an absent input's None left out)."""
    return [v for value in values
            for v in (value if isinstance(value, (list, tuple)) else [value]) if v is not None]


ABSENT_SIZE = -1  # in `sizes`: an absent optional input, None, which takes no array


def _grouped(flat: Any, sizes: list) -> list:
    """The inverse of `_flat`: `sizes` has None for one array, N for a list of N, ABSENT_SIZE for
    an absent optional input (None)."""
    out, at = [], 0
    for size in sizes:
        if size == ABSENT_SIZE:
            out.append(None)
            continue
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
        spec = self.spec
        # Trailing optional inputs may be left out: they are None.
        inputs = inputs + (None,) * sum(1 for t in spec.inputs[len(inputs):] if t.optional)
        if len(inputs) != len(spec.inputs):
            raise OpsdkError(f"op '{spec.name}': takes {len(spec.inputs)} input(s) "
                             f"({', '.join(t.name for t in spec.inputs)}), got {len(inputs)}")
        key = tuple(sorted((k, _static_attr(spec, k, v)) for k, v in attrs.items()))
        return self._apply(key, FFI, inputs)

    def _apply(self, key: tuple, ffi: bool, inputs: tuple) -> Any:
        """The function of these attrs and absent optional inputs, on the given inputs."""
        absent = tuple(t.name for t, v in zip(self.spec.inputs, inputs) if v is None and t.optional)
        return self._function(key, ffi, absent)(*[v for t, v in zip(self.spec.inputs, inputs)
                                                   if t.name not in absent])

    @functools.lru_cache(maxsize=None)
    def _function(self, key: tuple, ffi: bool, absent: tuple = ()) -> Callable:
        """The custom-VJP function of this op for one set of attrs, jitted: an un-jitted call
        of a signature seen before reuses its compiled form (under an outer jit it is inlined).
        It takes the inputs not `absent` (those are None to the kernel)."""
        attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in key}
        forward = functools.partial(_host_call, self.spec, self._registry, attrs, ffi, absent)
        if not self.spec.gradient_op:
            return jax.jit(forward)
        grad_op = _make(self._registry, self.spec.gradient_op)
        grad_key = tuple((k, v) for k, v in key if k in {a.name for a in grad_op.spec.attrs})
        # The gradient op runs the way this function was traced (FFI or callback), whenever
        # its backward is traced.
        return jax.jit(_with_vjp(self.spec, forward,
                                 lambda *args: grad_op._apply(grad_key, ffi, args),
                                 grad_op.spec, absent))


def _static_attr(spec: OpSpec, name: str, value: Any) -> Any:
    """An attr as a hashable Python value; a traced one (an attr that is an argument of a jitted
    function) is refused: attrs choose the kernel's output shapes, so they must be static."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(item, jax.core.Tracer) for item in items):
        raise OpsdkError(
            f"op '{spec.name}': attr '{name}' is a traced JAX value; attrs must be static under "
            f"jax.jit (they fix the output shapes): pass a Python value, e.g. mark it static with "
            f"jax.jit(f, static_argnames=['{name}']) or functools.partial")
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        value = np.asarray(value).tolist()  # a concrete array: its Python value
    elif isinstance(value, (list, tuple)):
        value = [np.asarray(v).tolist() if isinstance(v, (jax.Array, np.generic)) else v
                 for v in value]
    return _frozen(value)


def _host_call(spec: OpSpec, registry: Any, attrs: dict, ffi: bool, absent: tuple,
               *given: Any) -> Any:
    """The kernel through its FFI handler where one is built (and `ffi`), else pure_callback;
    result shapes and dtypes from the declaration. `given`: the inputs not `absent`."""
    rest = iter(given)
    inputs = tuple(None if t.name in absent else next(rest) for t in spec.inputs)

    def each(value: Any, fn: Callable) -> Any:
        if value is None:
            return ABSENT
        return [fn(v) for v in value] if isinstance(value, (list, tuple)) else fn(value)
    shapes = [each(x, lambda a: tuple(np.shape(a))) for x in inputs]
    dtypes = [each(x, lambda a: np.dtype(jax.numpy.result_type(a)).name) for x in inputs]
    attrs = normalize_attrs(spec, attrs, list(inputs))
    info = infer_call(spec, shapes, dtypes, attrs)
    out_sizes, results = _declared_results(spec, info.outputs)
    # An FFI call has a fixed buffer list: an op with optional inputs has no handler (a stale
    # one of an earlier declaration is not used either).
    target = _jax_ffi.target(spec) if ffi and not any(t.optional for t in spec.inputs) else None
    flat = None if target is None else _jax_ffi.call(
        spec, target, _flat(inputs), shapes, info.sizes, info.types, attrs, results)
    if flat is None:
        flat = _callback(spec, registry, attrs, inputs, shapes, results)
    outs = _grouped(list(flat), out_sizes)
    return tuple(outs) if len(outs) > 1 else outs[0]


def _declared_results(spec: OpSpec, inferred: list) -> tuple[list, tuple]:
    """Per output None (one array) or N (a list output), and every result array's shape and
    dtype; an error naming the op when the declaration leaves a shape unknown."""
    out_sizes, results = [], []
    for tensor, (shape, dtype) in zip(spec.outputs, inferred):
        pieces = shape if tensor.is_list else [shape]
        if not isinstance(pieces, list) or any(
                s is None or any(d is None for d in s) for s in pieces):
            raise OpsdkError(f"op '{spec.name}': output '{tensor.name}' has no static shape "
                             "from its declaration; JAX needs one")
        out_sizes.append(len(pieces) if tensor.is_list else None)
        results += [jax.ShapeDtypeStruct(tuple(s), np.dtype(dtype)) for s in pieces]
    return out_sizes, tuple(results)


def _callback(spec: OpSpec, registry: Any, attrs: dict, inputs: tuple, shapes: list,
              results: tuple) -> Any:
    """The kernel through jax.pure_callback (Python runs it on host arrays)."""
    in_sizes = [ABSENT_SIZE if x is None else len(x) if t.is_list else None
                 for t, x in zip(spec.inputs, inputs)]
    flat_shapes = [s for shape, size in zip(shapes, in_sizes) if size != ABSENT_SIZE
                   for s in (shape if size is not None else [shape])]
    call = _HostKernel(spec, registry, attrs, in_sizes, flat_shapes, results)
    # An op whose outputs all lead with `...` computes each batch element apart (the dims of
    # `...` are a batch, docs/opdefs.md): vmap hands the callback the whole batch at once.
    method = "expand_dims" if _batches(spec) else "sequential"
    return jax.pure_callback(call, results, *_flat(inputs), vmap_method=method)


def _leads_with_batch(tensor: Any) -> bool:
    return (isinstance(tensor.shape, (list, tuple)) and len(tensor.shape) > 0
            and isinstance(tensor.shape[0], EllipsisDim))


def _batches(spec: OpSpec) -> bool:
    return bool(spec.outputs) and all(_leads_with_batch(t) for t in spec.outputs)


class _HostKernel:
    """The callback: the built kernel on NumPy arrays. Under vmap (`expand_dims`) every array
    comes with the same number of leading batch dims (1 where it is not batched)."""

    def __init__(self, spec: OpSpec, registry: Any, attrs: dict, in_sizes: list,
                 in_shapes: list, results: tuple):
        self.spec, self.registry, self.attrs = spec, registry, attrs
        self.in_sizes, self.in_shapes, self.results = in_sizes, in_shapes, results
        tensors = [t for t, size in zip(spec.inputs, in_sizes) for _ in range(size or 1)]
        self.in_batch = [_leads_with_batch(t) for t in tensors]
        self.device = "cpu" if spec.kernel("cpu") else None

    def __call__(self, *arrays: Any) -> tuple:
        arrays = [np.asarray(a) for a in arrays]
        lead = arrays[0].ndim - len(self.in_shapes[0]) if arrays else 0
        if lead == 0:
            return self._run(arrays, ())
        batch = np.broadcast_shapes(*(a.shape[:lead] for a in arrays))
        if all(b or all(d == 1 for d in a.shape[:lead]) for a, b in zip(arrays, self.in_batch)):
            ready = [np.ascontiguousarray(np.broadcast_to(a, batch + a.shape[lead:])) if b
                     else a.reshape(a.shape[lead:]) for a, b in zip(arrays, self.in_batch)]
            return self._run(ready, batch)  # one kernel call for the whole batch
        per_element = [self._run([np.broadcast_to(a, batch + a.shape[lead:])[i] for a in arrays],
                                 ()) for i in np.ndindex(*batch)]
        return tuple(np.stack([p[k] for p in per_element]).reshape(batch + r.shape)
                     for k, r in enumerate(self.results))

    def _run(self, arrays: list, batch: tuple) -> tuple:
        from opsdk.runtime.frontend.api import apply_op

        out = apply_op(self.registry, self.spec.name, _grouped(arrays, self.in_sizes),
                       self.attrs, device=self.device)
        outs = _flat(out if len(self.spec.outputs) > 1 else (out,))
        return tuple(np.asarray(o, dtype=r.dtype).reshape(batch + r.shape)
                     for o, r in zip(outs, self.results))


def _with_vjp(spec: OpSpec, forward: Callable, grad_fn: Callable, grad_spec: OpSpec,
              absent: tuple = ()) -> Callable:
    """`forward` with its reverse-mode derivative from the declared gradient op; the function
    takes the inputs not `absent`, which the gradient op gets as None."""
    input_names = [t.name for t in spec.inputs if t.name not in absent]
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
        known = dict.fromkeys(absent) | dict(zip(input_names, inputs)) | dict(zip(output_names, outs))
        known |= {f"grad_{n}": g for n, g in zip(output_names, grads)}
        result = grad_fn(*[known[t.name] for t in grad_spec.inputs])
        results = result if len(grad_spec.outputs) > 1 else (result,)
        by_input = {t.name[len("grad_"):]: r for t, r in zip(grad_spec.outputs, results)}
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


# The builtin ops. Type checkers read their signatures from opsdk/_jax_ops.pyi, which an
# installed opsdk carries (generated/python/jax_ops.pyi).
if TYPE_CHECKING:
    from opsdk import _jax_ops as ops  # type: ignore[attr-defined, unused-ignore]
else:
    ops = JaxOps()
