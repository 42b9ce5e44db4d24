"""Choosing an op's kernel for a device and binding its attrs once, so a call is `fn(inputs)`.

Eager calls, the executor and constant folding all call kernels through here; the calling
convention of each kernel kind is the device's (`Device.call`). What is generic lives here:

* a device runs the first kernel kind of its `kernel_kinds` the op declares, skipping a built
  kind that has not been built when another kind is declared (the host prefers its built cpu
  kernel, else the python one; a GPU its built cuda kernel, else the python one);
* a list input is passed as one Python list; a single output may come back bare;
* a bound kernel returns one value per *graph* output: a list output (`list: N`) is flattened
  into its N arrays, as the graph holds one output tensor per element (`group_outputs` regroups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping, Optional, Sequence

from opsdk.registry.errors import KernelNotBuiltError, OpError, OpsdkError
from opsdk.registry.spec import OpSpec
from opsdk.runtime.devices import Device, host

BoundKernel = Callable[[Sequence[Any]], tuple]


@dataclass(frozen=True)
class KernelChoice:
    """The kernel picked for one op on one device: its kind ('python', 'cpu', 'cuda'), its raw
    callable, and the device that calls it."""

    kind: str
    fn: Callable
    device: Device


def kernel_kinds(spec: OpSpec, device: Device) -> list[str]:
    """The kinds of kernel of `spec` that `device` can run, preferred first."""
    return [k for k in device.kernel_kinds if spec.kernel(k) is not None]


def choose_kernel(spec: OpSpec, device: Optional[Device] = None,
                  kind: Optional[str] = None) -> KernelChoice:
    """The kernel of `spec` for `device` (the host by default): `kind` when given, else the
    device's preferred kind among those declared."""
    device = device or host()
    if kind is None:
        kinds = kernel_kinds(spec, device)
        built = [k for k in kinds if k == "python" or _is_built(spec, k)]
        kinds = built or kinds  # nothing built: the error names the kernel to build
        if not kinds:
            raise OpsdkError(f"op '{spec.name}': no {' or '.join(device.kernel_kinds)} kernel "
                             f"declared, so it cannot run on {device.name} "
                             f"(kernels: {', '.join(spec.devices) or 'none'})")
        kind = kinds[0]
    elif spec.kernel(kind) is None:
        raise OpsdkError(f"op '{spec.name}': no {kind} kernel declared "
                         f"(kernels: {', '.join(spec.devices) or 'none'})")
    if kind == "python":
        return KernelChoice(kind, load_python_kernel(spec), device)
    if kind == "cuda" and _uses_nvrtc(spec):
        from opsdk.runtime.devices.cuda_jit import jit_kernel
        return KernelChoice(kind, jit_kernel(spec), device)
    from opsdk.runtime.kernels.loader import load_kernel  # imports built modules: only here
    try:
        return KernelChoice(kind, load_kernel(spec, kind), device)
    except KernelNotBuiltError as exc:
        if kind != "cuda":
            raise
        from opsdk.runtime.devices.cuda_jit import jit_problem
        raise KernelNotBuiltError(f"{exc}; nor can it compile at first use: "
                                  f"{jit_problem(spec)}") from None


def _is_built(spec: OpSpec, kind: str) -> bool:
    """Built by `opsdk build`, or (cuda) compiled through NVRTC at first use."""
    from opsdk.runtime.kernels.loader import manifest_path
    return manifest_path(spec, kind).is_file() or (kind == "cuda" and _uses_nvrtc(spec))


def _uses_nvrtc(spec: OpSpec) -> bool:
    """Whether the cuda kernel compiles through NVRTC: it declares its launches, NVRTC is there,
    and nvcc built none (or OPSDK_CUDA_JIT=always)."""
    from opsdk.runtime.devices.cuda_jit import jit_mode, jit_problem
    from opsdk.runtime.kernels.loader import manifest_path
    mode = jit_mode()
    if mode == "never" or (mode == "auto" and manifest_path(spec, "cuda").is_file()):
        return False  # checked first: where nvcc built the kernel this is one stat
    return jit_problem(spec) is None


def devices_text(spec: OpSpec) -> str:
    """For a placement error: the devices this process can use, and for each device type that
    could run one of `spec`'s kernels but is unusable here, why ("GPU:0 unusable: needs a CUDA
    GPU; CuPy sees no GPU on this machine")."""
    from opsdk.runtime.devices import DEVICE_TYPES, get_device

    usable, unusable = [], []
    for name, device_type in DEVICE_TYPES.items():
        device = get_device(f"/device:{name}:0")
        why = device.unavailable()
        if why is None:
            usable.append(device.name)
        elif set(spec.devices) & set(device_type.kernel_kinds):
            unusable.append(f"{device.name} unusable: {why}")
    return "; ".join([f"devices here: {', '.join(usable) or 'none'}", *unusable])


def runnable_somewhere(spec: OpSpec, devices: Sequence[Device]) -> bool:
    """Whether one of the (available) `devices` has a kernel kind `spec` declares."""
    return any(kernel_kinds(spec, d) for d in devices)


def load_python_kernel(spec: OpSpec) -> Callable:
    """The python kernel's function (imported lazily, once, by the registry's resolver)."""
    from opsdk.registry import load_callable
    return load_callable(spec, spec.kernel("python").source, "python kernel")


def kernel_call(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
                type_attrs: Mapping[str, str],
                absent: Collection[str] = ()) -> Callable[[Sequence[Any]], Any]:
    """The kernel as a function of the flat input values, returning what the kernel returns
    (bare for one output): the device's calling convention with the attrs bound. `absent`: the
    node's optional inputs left out, which the values lack and the kernel gets as None."""
    return with_absent(spec, attrs, absent,
                       choice.device.call(spec, choice.kind, choice.fn, attrs, type_attrs))


def star_call(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
              type_attrs: Mapping[str, str],
              absent: Collection[str] = ()) -> Optional[tuple[Callable, bool]]:
    """The kernel as `f(*inputs)`, returning what `kernel_call`'s function returns, with no
    Python frame in between (the device's `star_call`): (f, retry), or None where the
    convention does more (absent optional inputs among them)."""
    if absent:
        return None
    return choice.device.star_call(spec, choice.kind, choice.fn, attrs, type_attrs)


def with_absent(spec: OpSpec, attrs: Mapping[str, Any], absent: Collection[str],
                call: Callable[[Sequence[Any]], Any]) -> Callable[[Sequence[Any]], Any]:
    """`call` as a function of a node's edge values: None put where each absent optional input
    stands (a graph node has no edge for it; the kernel's convention takes None)."""
    if not absent:
        return call
    slots: list[Optional[int]] = []
    for tspec in spec.inputs:
        if tspec.name in absent:
            slots.append(None)
            continue
        start = sum(1 for s in slots if s is not None)
        slots.extend(range(start, start + (int(attrs[tspec.list_len]) if tspec.is_list else 1)))
    return lambda values: call([None if k is None else values[k] for k in slots])


def bind_kernel(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
                type_attrs: Mapping[str, str], absent: Collection[str] = ()) -> BoundKernel:
    """A function of the flat input values that calls the kernel and returns a tuple of outputs,
    one per graph output. Attrs are bound here, once per node, because the executor calls the
    result on every step."""
    n_out = len(spec.outputs)
    call = kernel_call(spec, choice, attrs, type_attrs, absent)
    if any(t.is_list for t in spec.outputs):
        sizes = output_sizes(spec, attrs)
        if n_out == 1:
            return lambda values: _flatten(spec, (call(values),), sizes)
        return lambda values: _flatten(spec, _as_tuple(spec, call(values), n_out), sizes)
    if n_out == 1:
        return lambda values: (call(values),)
    if choice.kind == "cpu":  # the glue, generated from the declaration, returns that tuple
        return call
    return lambda values: _as_tuple(spec, call(values), n_out)


def given_output_call(spec: OpSpec, choice: KernelChoice, attrs: Mapping[str, Any],
                      type_attrs: Mapping[str, str]) -> Optional[Callable[[Sequence[Any], tuple], Any]]:
    """The kernel as a function of (input values, given outputs), where it can write into
    buffers the caller gives (a pooled or donated one): a python kernel whose op declares
    `inplace`, a built kernel whose glue takes outputs. None otherwise."""
    if choice.kind != "python":
        from opsdk.runtime.kernels.loader import takes_given_outputs
        if not takes_given_outputs(choice.fn):
            return None
    return choice.device.call_into(spec, choice.kind, choice.fn, attrs, type_attrs)


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
    so the executor can call `fn(xp, a, b)` with no wrapper in between; else None."""
    if (choice.kind != "python" or len(spec.outputs) != 1 or attrs or type_attrs
            or any(t.is_list for t in spec.inputs)):
        return None
    return choice.fn


_SCALAR_FLOATS = frozenset(("float16", "float32", "float64"))


def scalar_form(op: Any, choice: Optional[KernelChoice]) -> Optional[Callable]:
    """The python kernel's `scalar_form` (e.g. `operator.add` for add) when node `op` may use it:
    on the host, every input and its one output statically 0-d floats, no attrs. A kernel
    declares it only when it is the same IEEE operation as the kernel (correctly rounded:
    + - * / and negation), so the result is bit-identical, computed on NumPy scalars without a
    ufunc call."""
    if (choice is None or choice.kind != "python" or not choice.device.is_host or op.attrs
            or op.type_attrs):
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
