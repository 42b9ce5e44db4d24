"""`parse_opdef`: one declaration file -> OpSpecs, with every mistake reported as `file:line`.

Torchgen style: each document's keys are popped by the readers that know them and the leftovers
are rejected with a did-you-mean. All mistakes of a file are collected into one OpDefErrors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .diagnostics import Diagnostics, clip, did_you_mean, name_problem
from .dtypes import is_differentiable_dtype
from .elementwise import ElementwiseError, parse_expression
from .errors import OpDefErrors
from .located_yaml import YamlLoadError, YEntry, YMap, YNode, load_documents
from .parse_extras import (Paths, parse_example, parse_gradcheck, parse_kernels, parse_reference,
                           parse_shape_fn)
from .parse_shape import parse_named_dims, parse_requires
from .parse_signature import (Signature, check_output_ellipsis, parse_attrs, parse_tensors,
                              parse_type_attrs)
from .spec import STOP_GRADIENT, DerivedDim, GradCheckSpec, OpSpec, TypeAttr
from .workspace import Workspace

TOP_KEYS = ("op", "summary", "doc", "type_attrs", "attrs", "inputs", "outputs", "shape_fn", "gradient",
            "differentiable", "kernels", "reference", "example", "gradcheck", "stateful",
            "elementwise", "dims", "requires")
OP_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


def parse_opdef(path: Path, workspace_root: Path, namespace: Optional[str] = None) -> list[OpSpec]:
    """Every op declared in one YAML file (documents separated by `---`); raises OpDefErrors.

    Paths in the declaration are relative to its folder; the model stores them relative to
    `workspace_root`, and `OpSpec.file` is the declaration's path relative to it. The ops are in
    `namespace`, by default the workspace's (`Workspace(workspace_root).namespace`).

    >>> [spec.name for spec in parse_opdef(Path("opdefs/pairwise_manhattan.yaml"), Path("."))]
    ['pairwise_manhattan']
    """
    path, root = Path(path), Path(workspace_root)
    namespace = namespace if namespace is not None else Workspace(root).namespace
    shown = _shown_path(path, root)
    try:
        documents = load_documents(path, shown)
    except YamlLoadError as exc:
        raise OpDefErrors(exc.errors) from None
    d = Diagnostics(shown)
    if not documents:
        d.error(1, "no op declared here (a declaration is a mapping starting with 'op: name')")
    paths = Paths(path, root)
    specs: list[OpSpec] = []
    seen: dict[str, int] = {}
    for document in documents:
        spec = _parse_document(document, d, paths, root, namespace)
        if spec is None:
            continue
        if spec.name in seen:
            d.op = spec.name
            d.error(spec.location.line, f"declared twice in this file (first at line {seen[spec.name]}); rename one")
            continue
        seen[spec.name] = spec.location.line
        specs.append(spec)
    if d.errors:
        raise OpDefErrors(d.sorted_errors())
    return specs


def _shown_path(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _parse_document(node: YNode, d: Diagnostics, paths: Paths, root: Path,
                    namespace: str) -> Optional[OpSpec]:
    d.op = None
    if not isinstance(node, YMap):
        d.error(node.line, "a declaration must be a mapping of keys (op: name, summary: ..., inputs: ...)")
        return None
    errors = d.count()
    keys = {e.key: e for e in node.entries if e.key in TOP_KEYS}
    name = _op_name(keys.get("op"), node, d)
    d.op = name
    d.known_keys(node, TOP_KEYS, "the declaration")
    for required in ("summary", "kernels"):
        if required not in keys:
            d.derived(node.line, f"missing key '{required}'")
    if "inputs" not in keys and "outputs" not in keys:
        d.derived(node.line, "missing keys 'inputs' and 'outputs' (an op needs at least one of them)")
    sig = _parse_signature(keys, d, paths)
    gradient, gradient_line = _gradient(keys.get("gradient"), d)
    differentiable = _differentiable(keys.get("differentiable"), gradient, d, sig)
    kernels = parse_kernels(keys["kernels"].value, d, paths, sig) if "kernels" in keys else ()
    _check_kernel_shapes(kernels, sig, d)
    text = {k: d.string(keys[k].value, k) if k in keys else None for k in ("summary", "doc")}
    reference = parse_reference(keys["reference"].value, d) if "reference" in keys else None
    gradcheck = (parse_gradcheck(keys["gradcheck"].value, d, sig.attrs, sig.inputs) if "gradcheck" in keys
                 else GradCheckSpec())
    stateful = d.boolean(keys["stateful"].value, "stateful") if "stateful" in keys else False
    elementwise = _elementwise(keys.get("elementwise"), d, sig)
    requires = parse_requires(keys["requires"].value, d, sig) if "requires" in keys else ()
    example = (parse_example(keys["example"].value, d, sig.inputs, sig.attrs) if "example" in keys
               else ())
    if d.count() != errors or name is None:
        return None
    return OpSpec(
        name=name, summary=text["summary"].strip(), doc=(text["doc"] or "").strip(),
        type_attrs=tuple(sig.type_attrs), attrs=tuple(sig.attrs), inputs=tuple(sig.inputs),
        outputs=tuple(sig.outputs), gradient=gradient, differentiable=differentiable, kernels=kernels,
        reference=reference, shape_fn=sig.shape_fn, gradcheck=gradcheck, location=d.location(node.line),
        workspace=root.resolve(), stateful=bool(stateful), namespace=namespace,
        elementwise=elementwise, example=example,
        gradient_location=d.location(gradient_line) if gradient_line else None,
        derived_dims=tuple(DerivedDim(name, dim.expr, dim.text, d.location(line))
                           for name, (dim, line) in sig.derived.items()),
        requires=requires)


def _elementwise(entry: Optional[YEntry], d: Diagnostics, sig: Signature):
    """The `elementwise:` formula, checked against the op's inputs, attrs and outputs: a string
    for an op of one output, or a mapping of each output's name to its formula (a tuple of
    expressions in output order) for an op of several (a gradient such as mul_grad's)."""
    if entry is None:
        return None
    if any(t.optional for t in sig.inputs):
        d.error(entry.value.line, "elementwise: an op with an optional input has no scalar formula "
                                  "(fusion needs every input)")
        return None
    if any(t.is_list for t in (*sig.inputs, *sig.outputs)):
        d.error(entry.value.line, "elementwise: an op with list inputs or outputs has no scalar "
                                  "formula")
        return None
    names = frozenset([t.name for t in sig.inputs]
                      + [a.name for a in sig.attrs if a.type in ("int", "float")])
    outputs = [t.name for t in sig.outputs]
    if len(outputs) == 1:
        text = d.string(entry.value, "elementwise")
        return None if text is None else _formula(text, entry.value.line, d, names)
    if not isinstance(entry.value, YMap):
        d.error(entry.value.line, "elementwise: an op of several outputs gives a formula per "
                                  f"output, as a mapping ({', '.join(f'{o}: ...' for o in outputs)})")
        return None
    given = entry.value.keys()
    if sorted(given) != sorted(outputs) or len(set(given)) != len(given):
        d.error(entry.value.line, f"elementwise: the mapping names {', '.join(given) or 'nothing'}; "
                                  f"it must name each output once: {', '.join(outputs)}")
        return None
    formulas = {}
    for e in entry.value.entries:
        text = d.string(e.value, f"elementwise: {e.key}")
        formulas[e.key] = None if text is None else _formula(text, e.value.line, d, names,
                                                             f"{e.key}: ")
    if any(f is None for f in formulas.values()):
        return None
    return tuple(formulas[o] for o in outputs)


def _formula(text: str, line: int, d: Diagnostics, names: frozenset[str], label: str = ""):
    try:
        return parse_expression(text, names)
    except ElementwiseError as exc:
        d.error(line, f"elementwise: {label}{exc}")
        return None


def _op_name(entry: Optional[YEntry], node: YMap, d: Diagnostics) -> Optional[str]:
    if entry is None:
        d.derived(node.line, "missing key 'op' (the op's name, like 'op: pairwise_manhattan')")
        return None
    name = d.string(entry.value, "op")
    if name is None:
        return None
    problem = name_problem(name)
    if problem:
        d.error(entry.value.line, f"op name '{clip(name)}' {problem}; choose another")
        return None
    if not OP_NAME.match(name):
        d.error(entry.value.line, f"op name '{clip(name)}' must be lower_snake_case ([a-z][a-z0-9_]*), "
                                  f"like '{_suggest_name(name)}'")
        return None
    if name == STOP_GRADIENT:
        d.error(entry.value.line, "op name 'stop' is reserved ('gradient: stop' means no gradient)")
        return None
    return name


def _suggest_name(name: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    snake = re.sub(r"[^a-z0-9_]+", "_", snake).strip("_")
    return snake if OP_NAME.match(snake) else "my_op"


def _parse_signature(keys: dict[str, YEntry], d: Diagnostics, paths: Paths) -> Signature:
    sig = Signature()
    if "shape_fn" in keys:
        sig.shape_fn = parse_shape_fn(keys["shape_fn"].value, d, paths)
        sig.has_shape_fn = True
    if "type_attrs" in keys:
        parse_type_attrs(keys["type_attrs"].value, d, sig)
    if "attrs" in keys:
        parse_attrs(keys["attrs"].value, d, sig)
    if "dims" in keys:
        parse_named_dims(keys["dims"].value, d, sig)
    if "inputs" in keys:
        parse_tensors(keys["inputs"].value, d, sig, "input")
    if "outputs" in keys:
        parse_tensors(keys["outputs"].value, d, sig, "output")
    check_output_ellipsis(d, sig)
    _check_collisions(d, sig)
    _check_type_attr_use(d, sig)
    if sig.has_shape_fn:
        for out in sig.outputs:
            if out.shape is not None:
                d.error(out.location.line, f"output '{out.name}' declares a shape but the op has a shape_fn, "
                                           f"which gives output shapes; remove one")
    return sig


def _check_collisions(d: Diagnostics, sig: Signature) -> None:
    """Inputs, outputs, attrs and type attrs share one namespace (wrapper arguments, C++ fields)."""
    seen: dict[str, str] = {}
    groups = [("type attr", sig.type_attrs), ("attr", sig.attrs), ("input", sig.inputs), ("output", sig.outputs)]
    for kind, items in groups:
        for item in items:
            first = seen.get(item.name)
            if first is not None:
                d.error(item.location.line, f"{kind} '{item.name}' has the name of {first}; rename one")
            else:
                seen[item.name] = f"{kind} '{item.name}' (line {item.location.line})"


def _check_type_attr_use(d: Diagnostics, sig: Signature) -> None:
    carried = {t.dtype for t in sig.inputs}
    used = carried | {t.dtype for t in sig.outputs}
    required = {t.dtype for t in sig.inputs if not t.optional}
    for ta in sig.type_attrs:
        if ta.name in carried and ta.name not in required:
            owner = next(t.name for t in sig.inputs if t.dtype == ta.name)
            d.error(ta.location.line, f"type attr '{ta.name}' is carried only by optional input "
                                      f"'{owner}', so it has no dtype when '{owner}' is absent; let a "
                                      f"required input carry it too, or give '{owner}' a fixed dtype")
        elif ta.name not in used:
            d.derived(ta.location.line, f"type attr '{ta.name}' is used by no input or output; remove it")
        elif ta.name in carried and ta.default is not None:
            d.error(ta.location.line, f"type attr '{ta.name}' comes from an input's dtype, so its default "
                                      f"is never used; remove the default")


def _gradient(entry: Optional[YEntry], d: Diagnostics) -> tuple[Optional[str], Optional[int]]:
    if entry is None or getattr(entry.value, "value", "") is None:
        return None, entry.key_line if entry else None
    name = d.string(entry.value, "gradient (an op name, 'stop' or null)")
    if name is not None and name != STOP_GRADIENT and not OP_NAME.match(name):
        d.error(entry.value.line, f"gradient '{name}' is not an op name; write an op name, 'stop' "
                                  f"(no gradient flows) or null (not differentiable)")
        return None, None
    return name, entry.key_line


def _differentiable(entry: Optional[YEntry], gradient: Optional[str], d: Diagnostics,
                    sig: Signature) -> tuple[str, ...]:
    """Inputs that receive gradients: given, or every input whose dtype may be a float/complex."""
    has_op = gradient not in (None, STOP_GRADIENT)
    can = {t.name: any(is_differentiable_dtype(x) for x in _dtype_options(t.dtype, sig.type_attrs))
           for t in sig.inputs}
    if entry is None:
        return tuple(name for name, ok in can.items() if ok) if has_op else ()
    if not has_op:
        d.error(entry.key_line, "differentiable is set but the op has no gradient op; remove it or "
                                "name one under 'gradient:'")
        return ()
    seq = d.sequence(entry.value, "differentiable (a list of input names)")
    names = []
    for item in seq.items if seq else ():
        name = d.string(item, "an entry of differentiable")
        if name is None:
            continue
        if name not in can:
            d.error(item.line, f"differentiable names '{name}', which is not an input{did_you_mean(name, can)}")
        elif not can[name]:
            d.error(item.line, f"differentiable names '{name}', whose dtype can only be an integer or bool; "
                               f"no gradient flows into it")
        elif name in names:
            d.error(item.line, f"differentiable names '{name}' twice")
        else:
            names.append(name)
    # Gradient ops return grad_<input> in input order, so keep that order whatever was written.
    return tuple(t.name for t in sig.inputs if t.name in names)


def _dtype_options(dtype: str, type_attrs: list[TypeAttr]) -> tuple[str, ...]:
    return next((t.allowed for t in type_attrs if t.name == dtype), (dtype,))


def _check_kernel_shapes(kernels, sig: Signature, d: Diagnostics) -> None:
    """Compiled kernels get their glue (checks, output allocation) from declared shapes."""
    for kernel in kernels:
        if kernel.device == "python":
            continue
        if sig.has_shape_fn:
            d.error(kernel.location.line, f"a {kernel.device} kernel needs declared shapes, not a shape_fn "
                                          f"(the generated glue checks inputs and allocates outputs from them)")
            continue
        missing = [f"'{t.name}'" for t in sig.inputs + sig.outputs if t.shape is None]
        if missing:
            verb = "has" if len(missing) == 1 else "have"
            d.derived(kernel.location.line, f"a {kernel.device} kernel needs declared shapes, and "
                                          f"{', '.join(missing)} {verb} none; write them as lists like [n, p]")
