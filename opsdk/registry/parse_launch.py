"""Reading `launch:` of a cuda kernel: the `__global__` functions to launch, their grid, block,
dynamic shared memory and arguments (docs/opdefs.md, "CUDA kernels without host code").

    kernels:
      cuda:
        source: pairwise_manhattan_cuda.cu
        launch:
          - kernel: detail::forward<T>          # in the op's namespace; T is a type attr
            grid: ["(m + 63) // 64", "(n + 63) // 64"]
            block: [16, 16]
            args: [x, y, z, n, m, p]            # inputs, outputs, dim expressions, attrs

The kernel name is pasted into generated C++ and handed to NVRTC, so it is held to names,
`::`, and one level of template arguments that are names, integers, true or false.
"""

from __future__ import annotations

import re
from typing import Optional

from .diagnostics import Diagnostics, clip, describe, did_you_mean, is_identifier
from .located_yaml import YNode, YScalar
from .parse_shape import _check_expr_names
from .parse_signature import Signature
from .shapes import Expr, ExprDim, ExprSyntaxError, Num, parse_expr
from .spec import LaunchArg, LaunchSpec

LAUNCH_KEYS = ("kernel", "grid", "block", "shared", "args")
MAX_LAUNCHES = 16
MAX_ARGS = 64
MAX_BLOCK_THREADS = 1024  # every CUDA GPU since compute capability 2.0
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_QUALIFIED = rf"{_NAME}(?:::{_NAME})*"
_TEMPLATE_ARG = re.compile(rf"\s*(?:{_QUALIFIED}|-?[0-9]+)\s*\Z")
_KERNEL = re.compile(rf"({_QUALIFIED})(?:<([^<>]*)>)?\Z")


def parse_launches(node: YNode, d: Diagnostics, sig: Signature) -> tuple[LaunchSpec, ...]:
    """The `launch:` list of a cuda kernel (one mapping per `__global__` launch, run in order)."""
    seq = d.sequence(node, "launch")
    if seq is None:
        return ()
    if not seq.items:
        d.error(seq.line, "launch is empty; list at least one {kernel, grid, block, args}")
    if len(seq.items) > MAX_LAUNCHES:
        d.error(seq.line, f"launch lists {len(seq.items)} launches; at most {MAX_LAUNCHES} are "
                          "allowed (write the host side in the .cu file instead)")
        return ()
    launches = []
    for i, item in enumerate(seq.items):
        launch = _launch(item, d, sig, f"launch {i + 1}")
        if launch is not None:
            launches.append(launch)
    return tuple(launches)


def _launch(node: YNode, d: Diagnostics, sig: Signature, where: str) -> Optional[LaunchSpec]:
    mapping = d.mapping(node, where)
    if mapping is None:
        return None
    keys = d.known_keys(mapping, LAUNCH_KEYS, where)
    errors = d.count()
    for required in ("kernel", "grid", "block", "args"):
        if required not in keys:
            d.error(mapping.line, f"{where} misses '{required}' (a launch needs kernel, grid, block "
                                  "and args; shared is optional)")
    if d.count() != errors:
        return None
    kernel = _kernel_name(keys["kernel"].value, d, sig, where)
    grid = _dims3(keys["grid"].value, d, sig, f"{where} grid")
    block = _dims3(keys["block"].value, d, sig, f"{where} block")
    shared = (_size(keys["shared"].value, d, sig, f"{where} shared") if "shared" in keys
              else Num(0))
    args = _args(keys["args"].value, d, sig, f"{where} args")
    if block is not None:
        _check_block(block, keys["block"].value.line, d, where)
    if None in (kernel, grid, block, shared, args) or d.count() != errors:
        return None
    return LaunchSpec(kernel, grid, block, shared, args, d.location(mapping.line))


def _kernel_name(node: YNode, d: Diagnostics, sig: Signature, where: str) -> Optional[str]:
    text = d.string(node, f"{where} kernel")
    if text is None:
        return None
    text = text.strip()
    match = _KERNEL.match(text)
    template_args = match.group(2) if match else None
    if match is None or (template_args is not None
                         and not all(_TEMPLATE_ARG.match(a) for a in template_args.split(","))):
        d.error(node.line, f"{where} kernel '{clip(text)}' must name a __global__ function of the "
                           "op's namespace, like 'forward' or 'detail::forward<T, true>' (names, ::, "
                           "and one <...> of type attrs, names, integers, true or false)")
        return None
    return text


def _dims3(node: YNode, d: Diagnostics, sig: Signature, what: str) -> Optional[tuple[Expr, ...]]:
    """One to three sizes (x, y, z); a scalar is a list of one."""
    items = node.items if hasattr(node, "items") else (node,)
    if not 1 <= len(items) <= 3:
        d.error(node.line, f"{what} must list 1 to 3 sizes (x, y, z), got {len(items)}")
        return None
    sizes = [_size(item, d, sig, what) for item in items]
    return None if None in sizes else tuple(sizes)


def _size(node: YNode, d: Diagnostics, sig: Signature, what: str, arg: bool = False) -> Optional[Expr]:
    """An integer, or a dim expression over dims the inputs bind and int attrs. A size (grid,
    block, shared) may not be a negative literal; an argument (`arg`) may."""
    fix = "; an argument is an input, an output, an attr, or an int dim expression" if arg else ""
    if isinstance(node, YScalar) and type(node.value) is int:
        if node.value < 0 and not arg:
            d.error(node.line, f"{what} must not be negative, got {node.value}")
            return None
        return Num(node.value)
    if not (isinstance(node, YScalar) and isinstance(node.value, str) and node.value.strip()):
        d.error(node.line, f"{what} must be an integer or a dim expression like '(n + 255) // 256', "
                           f"got {describe(node)}{fix}")
        return None
    try:
        expr = parse_expr(node.value)
    except ExprSyntaxError as exc:
        d.error(node.line, f"{what}: {exc}{fix}")
        return None
    if not _check_expr_names(ExprDim(expr, node.value), d, sig, what, node.line, fix):
        return None
    return expr


def _check_block(block: tuple[Expr, ...], line: int, d: Diagnostics, where: str) -> None:
    if not all(isinstance(e, Num) for e in block):
        return  # computed at launch time, checked there
    threads = 1
    for e in block:
        threads *= e.value
    if threads == 0 or threads > MAX_BLOCK_THREADS:
        d.error(line, f"{where} block has {threads} threads; a block holds 1 to {MAX_BLOCK_THREADS}")


def _args(node: YNode, d: Diagnostics, sig: Signature, what: str) -> Optional[tuple[LaunchArg, ...]]:
    seq = d.sequence(node, what)
    if seq is None:
        return None
    if len(seq.items) > MAX_ARGS:
        d.error(seq.line, f"{what} lists {len(seq.items)} arguments; at most {MAX_ARGS} are allowed")
        return None
    args = [_arg(item, d, sig, what) for item in seq.items]
    return None if None in args else tuple(args)


def _arg(node: YNode, d: Diagnostics, sig: Signature, what: str) -> Optional[LaunchArg]:
    if isinstance(node, YScalar) and isinstance(node.value, str):
        name = node.value.strip()
        for kind, tensors in (("input", sig.inputs), ("output", sig.outputs)):
            tensor = next((t for t in tensors if t.name == name), None)
            if tensor is None:
                continue
            if tensor.is_list:
                d.error(node.line, f"{what}: {kind} '{name}' is a list of tensors, which a launch "
                                   "cannot pass; write the host side in the .cu file instead")
                return None
            return LaunchArg(kind, name, optional=tensor.optional)
        attr = sig.attr(name)
        if attr is not None and attr.type in ("float", "bool"):
            return LaunchArg("attr", name)
        if attr is not None and attr.type != "int":
            d.error(node.line, f"{what}: attr '{name}' is a {attr.type}; a launch passes int, float "
                               "and bool attrs only")
            return None
        if is_identifier(name) and attr is None and name not in sig.bound_dims:
            known = ([t.name for t in sig.inputs + sig.outputs] + [a.name for a in sig.attrs]
                     + list(sig.bound_dims))
            d.error(node.line, f"{what}: '{clip(name)}' is no input, output, attr or dim"
                               f"{did_you_mean(name, known)}")
            return None
    expr = _size(node, d, sig, what, arg=True)
    if expr is None:
        return None
    return LaunchArg("int", node.value.strip() if isinstance(node.value, str) else str(node.value), expr)
