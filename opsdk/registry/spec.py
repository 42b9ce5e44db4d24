"""The typed model of an op declaration: frozen dataclasses built once from YAML, read by all.

Codegen, the runtime and the gradient checker read these, never raw YAML. Every piece carries the
`Location` it was declared at, so later checks can still point at `file:line`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .errors import Location
from .shapes import Dim, EllipsisDim, Expr, Shape, SymDim

DEVICES = ("cpu", "cuda", "python")
# `gradient: stop`: the op passes no gradient (its inputs get None), unlike `gradient: null`, which
# means "not differentiable" and makes autodiff raise. "stop" is therefore reserved as an op name.
STOP_GRADIENT = "stop"
# Ops are namespaced by workspace (`myws::foo`); the builtin ops live in this one.
BUILTIN_NAMESPACE = "opsdk"
ATTR_TYPES = ("int", "float", "bool", "str", "list(int)", "list(float)")


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


# What shape inference is given, in place of a shape and a dtype, for an optional input the
# caller left out (None already means an unknown rank or dtype there).
ABSENT: Any = _Absent()


@dataclass(frozen=True)
class TypeAttr:
    """`T: [float32, float64]`: a dtype variable; inputs and outputs with `dtype: T` share it."""
    name: str
    allowed: tuple[str, ...]
    location: Location
    # A type attr that no input binds must be passed by the caller (e.g. zeros(dtype=...)).
    default: Optional[str] = None


@dataclass(frozen=True)
class AttrSpec:
    """A scalar attr: `k: {type: int, default: 1, min: 1, max: 64, doc: ...}`."""
    name: str
    type: str  # one of ATTR_TYPES
    default: Any  # NO_DEFAULT when the caller must give it
    min: Optional[float]
    max: Optional[float]
    choices: Optional[tuple]
    doc: str
    location: Location

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


@dataclass(frozen=True)
class TensorSpec:
    """An input or output. `dtype` is a type attr's name or a fixed dtype name.

    `shape` is None when the op has a Python shape function (no declared shape).
    A list input (`list: N`) is N tensors of one dtype and shape; N is an int attr the wrapper
    fills in from the length of the list.
    """
    name: str
    dtype: str
    shape: Optional[Shape]
    location: Location
    doc: str = ""
    list_len: Optional[str] = None  # the int attr holding N, for list inputs
    # Outputs only: the inputs whose buffer this output may be written into (`inplace: [x]`);
    # the runtime's memory planner hands a dead one to the kernel as `out=` (docs/opdefs.md).
    inplace: tuple[str, ...] = ()
    # Inputs only (`optional: true`, PyTorch's `Tensor?`): the caller may give None. An absent
    # input is no graph edge; kernels get None (C++: an empty std::optional) and the dims only
    # it binds stay unbound.
    optional: bool = False
    # Inputs only (`shape_only: true`): the kernel reads the input's shape and dtype, never its
    # values, so autodiff may hand it a stand-in of that shape that holds no memory (a loop's
    # gradient then records the shapes a variable had, not its values).
    shape_only: bool = False

    @property
    def is_list(self) -> bool:
        return self.list_len is not None

    @property
    def has_ellipsis(self) -> bool:
        return self.shape is not None and any(isinstance(d, EllipsisDim) for d in self.shape)

    @property
    def rank(self) -> Optional[int]:
        """The fixed rank, or None when the shape is open (`...` or undeclared)."""
        if self.shape is None or self.has_ellipsis:
            return None
        return len(self.shape)


@dataclass(frozen=True)
class Requirement:
    """`requires: ["extra_h < stride_h"]`: a condition on attrs every call must meet (checked
    before any kernel runs; gradcheck leaves out the attr combinations that break it)."""
    expr: Expr
    text: str
    location: Location


@dataclass(frozen=True)
class DerivedDim:
    """`dims: {oh: "(h - k) // stride + 1"}`: a dim computed once from the bound dims, int attrs
    and conditions on choice and bool attrs (and named dims before it). Shapes use it by name (an
    output is allocated with it, an input checked against it) and kernels read it as `dims.oh`."""
    name: str
    expr: Expr
    text: str
    location: Location


@dataclass(frozen=True)
class LaunchArg:
    """One argument of a declared CUDA launch, passed by value in declaration order.

    kind "input": the input's device pointer (`const T*`); "output": the output's (`T*`);
    "int": an int64_t expression over dims and int attrs (`expr`); "attr": a float attr as
    double or a bool attr as bool."""
    kind: str
    name: str  # the tensor's or attr's name, or the expression's text
    expr: Optional[Expr] = None
    optional: bool = False  # an optional input: a null pointer where it is absent


@dataclass(frozen=True)
class LaunchSpec:
    """`launch:` of a cuda kernel: one `__global__` function launched with a grid and block
    computed from the dims, so the source needs no host code and compiles with nvcc and NVRTC.

    `kernel` is a C++ name in the op's namespace (`detail::grad<T, true>`), its template
    arguments spelled with the op's type attrs; `grid`, `block` (1 to 3 each) and `shared` (dynamic
    shared memory bytes) are dim expressions."""
    kernel: str
    grid: tuple[Expr, ...]
    block: tuple[Expr, ...]
    shared: Expr
    args: tuple[LaunchArg, ...]
    location: Location


@dataclass(frozen=True)
class KernelSpec:
    """A kernel for one device. `source` is a path relative to the workspace root for cpu/cuda
    (`opdefs/foo_cpu.cc`), and `path/file.py:function` for python, the file path again relative to
    the workspace root (`opdefs/builtin/kernels.py:add`); only files of the workspace.

    A cuda kernel either defines the op's host function `cuda()` itself (nvcc only), or declares
    `launches`, from which opsdk writes the host side (nvcc) or launches it through NVRTC."""
    device: str
    source: str
    location: Location
    launches: tuple[LaunchSpec, ...] = ()


@dataclass(frozen=True)
class GradCheckSpec:
    """How `opsdk gradcheck` draws inputs and judges an op (all in float64)."""
    rtol: float = 1e-4
    atol: float = 1e-6
    domain: tuple[float, float] = (-2.0, 2.0)
    # Keep drawn values at least this far from these points (the kinks of |x|, sign, relu).
    avoid: tuple[float, ...] = ()
    # Keep pairwise differences of same-position elements across inputs this far from 0
    # (the kinks of |x - y|); 0 turns it off.
    min_gap: float = 0.0
    dim_range: tuple[int, int] = (0, 5)
    # Kernels take other code paths at larger sizes (vector loops, their tails, register tiles):
    # besides the cases drawn within dim_range, one case per size here sets one of the stress
    # dims to that size (the other dims kept small). None: every dim of the op is a stress dim.
    stress_dims: Optional[tuple[str, ...]] = None
    stress_sizes: tuple[int, ...] = (15, 16, 17, 31, 32, 33, 64, 65)
    max_examples: int = 25
    # The attr combinations checked one by one (every choice, both bools, the ends of int and
    # float ranges, the ends of list lengths): all of them up to this many, else a sample of this
    # many, which the report calls partial. 0 turns the combination cases off.
    max_combinations: int = 64
    eps: float = 1e-6
    enabled: bool = True
    location: Optional[Location] = None
    # `attrs: {axes: [[], [0]], keepdims: [true, false]}`: per attr, the values cases sample
    # from, in declaration order; list values as tuples, like normalised attrs. Attrs not listed
    # are drawn from their bounds, choices or bool, else kept at their default.
    attr_values: tuple[tuple[str, tuple], ...] = ()

    def values_for(self, attr: str) -> Optional[tuple]:
        """The values listed for `attr` under `gradcheck: {attrs: ...}`, or None."""
        return next((values for name, values in self.attr_values if name == attr), None)


@dataclass(frozen=True)
class OpSpec:
    """One op, as declared. `file` is the declaration's path relative to the workspace root."""
    name: str
    summary: str
    doc: str
    type_attrs: tuple[TypeAttr, ...]
    attrs: tuple[AttrSpec, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # Name of the gradient op; "stop" (STOP_GRADIENT: no gradient flows, inputs get None); or None
    # (not differentiable). Read it through `gradient_op` / `stops_gradient`.
    gradient: Optional[str]
    differentiable: tuple[str, ...]  # inputs that receive gradients
    kernels: tuple[KernelSpec, ...]
    reference: Optional[str]  # a NumPy expression over the input names (np, attrs in scope)
    # `name` of a registry shape function, or `path/file.py:function` with the path relative to
    # the workspace root (resolved lazily by opsdk.registry.callables, inside the workspace only).
    shape_fn: Optional[str]
    gradcheck: GradCheckSpec
    location: Location
    workspace: Path = field(compare=False, default=Path("."))
    stateful: bool = False  # kernels with side effects or randomness: never folded or merged
    # Where `gradient:` was written, so registry-wide checks (the gradient op exists, its
    # signature matches) can point at that line.
    gradient_location: Optional[Location] = field(compare=False, default=None)
    # The workspace's namespace (docs/opdefs.md): `name` is unique within it, not across them.
    namespace: str = BUILTIN_NAMESPACE
    # `elementwise:` the scalar formula of the op's one output (registry.elementwise), a tuple
    # of formulas (one per output, in order) for an op of several, or None.
    elementwise: Any = field(compare=False, default=None)
    # `example:` ((input, value), ...): what the docstring example gives those inputs.
    example: tuple = field(compare=False, default=())
    # `dims:`: named derived dims, in declaration order (each may read the ones before it).
    derived_dims: tuple[DerivedDim, ...] = ()
    # `requires:`: conditions on attrs a call must meet, in declaration order.
    requires: tuple[Requirement, ...] = ()

    @property
    def qualified_name(self) -> str:
        """`namespace::name`, unique in a process (`opsdk::add`, `myws::pairwise_manhattan`)."""
        return f"{self.namespace}::{self.name}"

    @property
    def inplace_output(self) -> Optional[int]:
        """The position of the one output that declares `inplace`, which a python kernel is
        handed as `out=`; None when no output, or several, declare it, or it is a list."""
        found = [i for i, t in enumerate(self.outputs) if t.inplace]
        if len(found) != 1 or self.outputs[found[0]].is_list:
            return None
        return found[0]

    @property
    def stops_gradient(self) -> bool:
        """`gradient: stop`: autodiff gives every input a None gradient, silently."""
        return self.gradient == STOP_GRADIENT

    @property
    def gradient_op(self) -> Optional[str]:
        """The name of the gradient op, or None (for `gradient: stop` and `gradient: null`)."""
        return None if self.gradient in (None, STOP_GRADIENT) else self.gradient

    @property
    def declaration_dir(self) -> Path:
        """The folder of the declaration file (YAML paths are relative to it)."""
        return self.workspace / Path(self.location.file).parent

    @property
    def file(self) -> str:
        return self.location.file

    def input(self, name: str) -> TensorSpec:
        return next(t for t in self.inputs if t.name == name)

    def output(self, name: str) -> TensorSpec:
        return next(t for t in self.outputs if t.name == name)

    def attr(self, name: str) -> AttrSpec:
        return next(a for a in self.attrs if a.name == name)

    def kernel(self, device: str) -> Optional[KernelSpec]:
        return next((k for k in self.kernels if k.device == device), None)

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(k.device for k in self.kernels)

    @property
    def optional_only_dims(self) -> tuple[str, ...]:
        """Dims that only optional inputs bind: unbound when those inputs are absent."""
        required = {d.name for t in self.inputs if not t.optional for d in t.shape or ()
                    if isinstance(d, SymDim)}
        return tuple(n for n in self.dim_names if n not in required)

    @property
    def dim_names(self) -> tuple[str, ...]:
        """Symbolic dims in the order inputs first bind them."""
        seen: list[str] = []
        for t in self.inputs:
            for d in t.shape or ():
                if isinstance(d, SymDim) and d.name not in seen:
                    seen.append(d.name)
        return tuple(seen)

    @property
    def derived_dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.derived_dims)

    @property
    def unbound_type_attrs(self) -> tuple[TypeAttr, ...]:
        """Type attrs no input carries: the caller passes them (`dtype=`)."""
        used = {t.dtype for t in self.inputs}
        return tuple(ta for ta in self.type_attrs if ta.name not in used)

    def dtype_options(self, tensor: TensorSpec) -> tuple[str, ...]:
        """The dtypes a tensor may have: its type attr's list, or its fixed dtype."""
        for ta in self.type_attrs:
            if ta.name == tensor.dtype:
                return ta.allowed
        return (tensor.dtype,)


def first_dim(shape: Shape) -> Optional[Dim]:
    return shape[0] if shape else None
