"""Choosing an op's kernel and binding its attrs once, so a call is `fn(inputs) -> tuple`.

Both interpreters (eager `apply_op` and the session's executor) call kernels through here, so the
calling conventions of docs/internals.md live in one place:

* python kernel: `fn(xp, *inputs, **attrs, **unbound type attrs as NumPy dtypes)`;
* built kernel:  `fn(*inputs, *attrs in declaration order, *unbound type attr names)`;
* a list input is passed as one Python list; a single output may come back bare;
* a bound kernel returns one value per *graph* output: a list output (`list: N`) is flattened
  into its N arrays, as the graph holds one output tensor per element (`group_outputs` regroups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.spec import OpSpec

BoundKernel = Callable[[Sequence[Any]], tuple]


@dataclass(frozen=True)
class KernelChoice:
    """The kernel picked for one op: its device ('python', 'cpu', 'cuda') and raw callable."""

    device: str
    fn: Callable


def choose_kernel(spec: OpSpec, device: Optional[str] = None) -> KernelChoice:
    """`device` None: the python kernel when declared, else the built cpu kernel."""
    if device is None:
        device = "python" if spec.kernel("python") else "cpu"
    if device not in ("python", "cpu", "cuda"):
        raise OpsdkError(f"op '{spec.name}': unknown device '{device}' (python, cpu or cuda)")
    if device == "python":
        if spec.kernel("python") is None:
            raise OpsdkError(f"op '{spec.name}': no python kernel declared "
                             f"(kernels: {', '.join(spec.devices) or 'none'})")
        return KernelChoice("python", load_python_kernel(spec))
    if spec.kernel(device) is None:
        raise OpsdkError(f"op '{spec.name}': no {device} kernel declared "
                         f"(kernels: {', '.join(spec.devices) or 'none'})")
    from opsdk.runtime.kernels.loader import load_kernel  # the loader imports built modules; only needed here
    return KernelChoice(device, load_kernel(spec, device))


def load_python_kernel(spec: OpSpec) -> Callable:
    """The python kernel's function (imported lazily, once, by the registry's resolver)."""
    from opsdk.registry import load_callable
    return load_callable(spec, spec.kernel("python").source, "python kernel")


def bind_kernel(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
                type_attrs: Mapping[str, str], xp: Any = np) -> BoundKernel:
    """A function of the flat input values that calls the kernel and returns a tuple of outputs.

    Attrs are bound here, once per node, because the executor calls the result on every step.
    """
    n_out = len(spec.outputs)
    call = kernel_call(spec, choice, attrs, type_attrs, xp)
    if any(t.is_list for t in spec.outputs):
        sizes = output_sizes(spec, attrs)
        if n_out == 1:
            return lambda values: _flatten(spec, (call(values),), sizes)
        return lambda values: _flatten(spec, _as_tuple(spec, call(values), n_out), sizes)
    if n_out == 1:
        return lambda values: (call(values),)
    return lambda values: _as_tuple(spec, call(values), n_out)


def kernel_call(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
                type_attrs: Mapping[str, str], xp: Any = np) -> Callable[[Sequence[Any]], Any]:
    """The kernel as a function of the flat input values, returning what the kernel returns
    (bare for one output). `bind_kernel` builds on it; a step whose node has one plain output
    calls it directly and saves a tuple per call."""
    pack = _packer(spec, attrs)
    fn = choice.fn
    if choice.device != "python":
        return _compiled_call(spec, fn, pack, attrs, type_attrs, choice.device == "cpu")
    kwargs = dict(attrs)
    kwargs.update({k: np.dtype(v) for k, v in type_attrs.items()})
    if not kwargs and pack is None:
        return lambda values: fn(xp, *values)  # the hot path: no packing, no kwargs
    if pack is None:
        return lambda values: fn(xp, *values, **kwargs)
    return lambda values: fn(xp, *pack(values), **kwargs)


def _compiled_call(spec: OpSpec, fn: Callable, pack: Optional[Callable],
                   attrs: Mapping[str, Any], type_attrs: Mapping[str, str],
                   host: bool) -> Callable:
    """A built kernel's call: inputs, then attrs in declaration order, then the unbound type
    attrs' dtype names. (The registry refuses a shape_fn on ops with cpu/cuda kernels, so no
    output shapes are ever appended.)

    The generated glue refuses strided inputs (a ValueError, before any work) rather than
    copying them behind the caller's back; the runtime, which made those views itself
    (transpose, slice), copies them for a host kernel. Only after such a refusal: checking
    every input's flags on every call would cost more than the kernel on small inputs.
    """
    tail = tuple(attrs[a.name] for a in spec.attrs) + tuple(
        type_attrs[t.name] for t in spec.unbound_type_attrs)
    if not host:
        return lambda values: fn(*(pack(values) if pack else values), *tail)

    def call(values: Sequence[Any]) -> Any:
        args = pack(values) if pack else values
        try:
            return fn(*args, *tail)
        except ValueError:
            copies = _contiguous(args)
            if copies is args:  # nothing was strided: the kernel's own error
                raise
        return fn(*copies, *tail)
    return call


def _contiguous(values: Sequence[Any]) -> Sequence[Any]:
    """Each array C-contiguous (a copy only where it is not); list inputs element by element.
    `values` itself when nothing needed a copy."""
    out = []
    for v in values:
        if isinstance(v, list):
            out.append(_contiguous(v))
        elif isinstance(v, np.ndarray) and not v.flags.c_contiguous:
            out.append(np.ascontiguousarray(v))
        else:
            out.append(v)
    return values if all(a is b for a, b in zip(out, values)) else out


def output_sizes(spec: OpSpec, attrs: Mapping[str, Any]) -> list[Optional[int]]:
    """Per declared output: N for a list output (from its length attr), else None."""
    return [int(attrs[t.list_len]) if t.is_list else None for t in spec.outputs]


def _flatten(spec: OpSpec, results: tuple, sizes: Sequence[Optional[int]]) -> tuple:
    """One value per graph output: each list output's N arrays in place of the list."""
    flat: list = []
    for tspec, value, n in zip(spec.outputs, results, sizes):
        if n is None:
            flat.append(value)
        elif isinstance(value, (list, tuple)) and len(value) == n:
            flat.extend(value)
        else:
            got = (f"{len(value)} arrays" if isinstance(value, (list, tuple))
                   else f"a {type(value).__name__}")
            raise OpError(f"{spec.name}: kernel returned {got} for list output '{tspec.name}', "
                          f"expected a list of {n} ({tspec.list_len})")
    return tuple(flat)


def group_outputs(spec: OpSpec, flat: Sequence[Any], attrs: Mapping[str, Any]) -> list:
    """The inverse of the flattening: per declared output a value, a list for a list output."""
    grouped, at = [], 0
    for n in output_sizes(spec, attrs):
        grouped.append(flat[at] if n is None else list(flat[at:at + n]))
        at += 1 if n is None else n
    return grouped


def direct_python_kernel(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
                         type_attrs: Mapping[str, str]) -> Optional[Callable]:
    """The raw python kernel when it needs nothing bound (one output, no attrs, no list inputs),
    so the executor can call `fn(np, a, b)` with no wrapper in between; else None."""
    if (choice.device != "python" or len(spec.outputs) != 1 or attrs or type_attrs
            or any(t.is_list for t in spec.inputs)):
        return None
    return choice.fn


_SCALAR_FLOATS = frozenset(("float16", "float32", "float64"))


def scalar_form(op: Any, choice: Optional[KernelChoice]) -> Optional[Callable]:
    """The python kernel's `scalar_form` (e.g. `operator.add` for add) when node `op` may use it:
    every input and its one output statically 0-d floats, no attrs. A kernel declares it only
    when it is the same IEEE operation as the kernel (correctly rounded: + - * / and negation),
    so the result is bit-identical, computed on NumPy scalars without a ufunc call."""
    if choice is None or choice.device != "python" or op.attrs or op.type_attrs:
        return None
    form = getattr(choice.fn, "scalar_form", None)
    if form is None or len(op.outputs) != 1:
        return None
    for t in (*op.inputs, *op.outputs):
        if t.shape != () or t.dtype not in _SCALAR_FLOATS:
            return None
    return form


def _as_tuple(spec: OpSpec, result: Any, n_out: int) -> tuple:
    if not isinstance(result, (tuple, list)) or len(result) != n_out:
        raise OpError(f"{spec.name}: kernel returned {type(result).__name__}, expected a tuple of "
                      f"{n_out} outputs ({', '.join(o.name for o in spec.outputs)})")
    return tuple(result)


def _packer(spec: OpSpec, attrs: Mapping[str, Any]) -> Optional[Callable[[Sequence], list]]:
    """Regroup flat inputs into the declared inputs (list inputs become lists); None if flat."""
    if not any(t.is_list for t in spec.inputs):
        return None
    sizes = [int(attrs[t.list_len]) if t.is_list else None for t in spec.inputs]

    def pack(values: Sequence) -> list:
        out, i = [], 0
        for size in sizes:
            if size is None:
                out.append(values[i])
                i += 1
            else:
                out.append(list(values[i:i + size]))
                i += size
        return out
    return pack


def kernel_failure(who: str, exc: BaseException) -> OpsdkError:
    """The error a failing kernel becomes: `who` (e.g. "add (node 'a')") and what it said."""
    op = who.split(" ", 1)[0]
    if isinstance(exc, OpsdkError) or str(exc).startswith(f"{op}: "):
        text = str(exc)  # a message the runtime or the generated glue phrased for the user
    else:
        text = f"{type(exc).__name__}: {exc}"
    # Built kernels already begin their messages with "<op>: "; do not say it twice.
    if text.startswith(f"{op}: "):
        text = text[len(op) + 2:]
    elif text.startswith(f"op '{op}': "):
        text = text[len(op) + 6:]
    if isinstance(exc, NotImplementedError):
        # An unwritten kernel body: keep the exact words the glue gave when called eagerly.
        return KernelNotWrittenError(str(exc) if who == op else f"{who}: {text}")
    return OpError(f"{who}: {text}")


class KernelNotWrittenError(OpsdkError, NotImplementedError):
    """A kernel body that `opsdk new` scaffolded and nobody has written yet."""
