"""Mutated valid declarations end in a located error or in a workspace that generates, fast.

Hypothesis deletes, duplicates and retypes keys, inserts random bytes, nests values deeply and
adds aliases to real declarations (the flagship's and the representative ones). Every outcome must
be an OpDefErrors whose every line is `opdefs/<file>:<line>: ...`, or specs whose generated Python
compiles; never another exception, never over 2 s. A few valid mutants are also built and imported.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsdk.codegen.generate import render_workspace
from opsdk.registry import BUILTIN_ROOT, OpDefErrors, parse_opdef

from codegen_fixtures import REPRESENTATIVE

FLAGSHIP = (BUILTIN_ROOT / "opdefs" / "pairwise_manhattan.yaml").read_text()
# A python-kernel op: its valid mutants need no compiler to be generated, imported and called.
SCALED = """
    op: scaled
    summary: A scaled copy.
    attrs:
      scale: {type: float, default: 2.0, doc: "the factor"}
      k: {type: int, default: 1, min: 0, max: 3}
    inputs:
      x: {dtype: float64, shape: [n]}
    outputs:
      y: {dtype: float64, shape: [n]}
    gradient: null
    kernels:
      python: kernels.py:scaled
    reference: "scale * x"
"""
SCALED_KERNEL = "def scaled(xp, x, **attrs):\n    return attrs.get('scale', 1.0) * x\n"
BASES = [FLAGSHIP, SCALED, *(text for text in REPRESENTATIVE.values())]
LOCATED = re.compile(r"opdefs/fuzz\.yaml:\d+: ")
RETYPED = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=8),
                    st.lists(st.integers(0, 3), max_size=3), st.dictionaries(st.sampled_from(["a", "x", "T"]),
                                                                             st.integers(), max_size=2))


def _paths(value, prefix=()):
    """Every (path, value) in a nested structure of dicts and lists."""
    yield prefix, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, prefix + (key,))


def _set(doc, path, value):
    for key in path[:-1]:
        doc = doc[key]
    if value is _DELETE:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


_DELETE = object()


@st.composite
def structural_mutant(draw) -> str:
    """A base declaration with keys deleted, retyped or nested deeply, dumped back to YAML."""
    import textwrap

    doc = yaml.safe_load(textwrap.dedent(draw(st.sampled_from(BASES))))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        kind = draw(st.sampled_from(["delete", "retype", "nest"]))
        if kind == "delete":
            _set(doc, path, _DELETE)
        elif kind == "retype":
            _set(doc, path, draw(RETYPED))
        else:
            depth = draw(st.sampled_from([1, 3, 60]))  # deeper: a textual mutant (the dumper recurses)
            value = [p for p_, p in _paths(doc) if p_ == path][0]
            for _ in range(depth):
                value = [value]
            _set(doc, path, value)
    return yaml.safe_dump(doc, sort_keys=False, width=10**6)


@st.composite
def textual_mutant(draw) -> str:
    """A base declaration with a line duplicated, random bytes inserted, a value nested thousands
    deep, or aliases added (a bomb, or an anchor used elsewhere)."""
    import textwrap

    lines = textwrap.dedent(draw(st.sampled_from(BASES))).lstrip().splitlines(keepends=True)
    kind = draw(st.sampled_from(["duplicate", "bytes", "deep", "alias", "anchor"]))
    index = draw(st.integers(0, len(lines) - 1))
    if kind == "duplicate":
        lines.insert(index, lines[index])
    elif kind == "bytes":
        line = lines[index]
        at = draw(st.integers(0, len(line)))
        junk = draw(st.binary(min_size=1, max_size=4)).decode("latin-1")
        lines[index] = line[:at] + junk + line[at:]
    elif kind == "deep":
        depth = draw(st.sampled_from([49, 51, 20000]))
        lines.insert(index, "doc: " + "[" * depth + "]" * depth + "\n")
    elif kind == "alias":
        width = draw(st.integers(2, 10))
        value = "&a0 [" + ", ".join(["1"] * width) + "]"
        for i in range(1, draw(st.integers(2, 8))):
            value = f"&a{i} [{value}" + f", *a{i - 1}" * (width - 1) + "]"
        lines.append(f"gradcheck: {{attrs: {{k: [{value}]}}}}\n")
    else:  # an anchor on one value and an alias of it elsewhere
        lines = [line.replace("summary: ", "summary: &s ", 1) for line in lines]
        lines.insert(index, "doc: *s\n" if index else "op: *s\n")
    return "".join(lines)


def _workspace(root: Path) -> Path:
    opdefs = root / "opdefs"
    opdefs.mkdir(parents=True, exist_ok=True)
    for name in ("pairwise_manhattan", "attrs_op", "list_op", "cast_op", "launch_op", "window_op", "optional_op"):
        (opdefs / f"{name}_cpu.cc").write_text("")
        (opdefs / f"{name}_cuda.cu").write_text("")
    (opdefs / "kernels.py").write_text(SCALED_KERNEL)
    return root


def check_mutant(root: Path, text: str | bytes) -> list:
    """Parse and, when valid, render; return the specs. Fails on anything but a located error."""
    path = root / "opdefs" / "fuzz.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    start = time.perf_counter()
    try:
        specs = parse_opdef(path, root)
    except OpDefErrors as exc:
        specs = []
        assert exc.errors and all(LOCATED.match(str(e)) for e in exc.errors), str(exc)[:2000]
        assert len(str(exc)) < 20_000  # a message never floods the terminal
    else:
        files = render_workspace(root, specs)
        for name, source in files.items():
            if name.endswith((".py", ".pyi")):
                compile(source, name, "exec")
    assert time.perf_counter() - start < 2.0
    return specs


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@FUZZ
@given(text=structural_mutant())
def test_structural_mutants_are_located_errors_or_generate(tmp_path, text):
    check_mutant(_workspace(tmp_path / "ws"), text)


@FUZZ
@given(text=textual_mutant())
def test_textual_mutants_are_located_errors_or_generate(tmp_path, text):
    check_mutant(_workspace(tmp_path / "ws"), text)


def test_the_unmutated_bases_generate(tmp_path):
    root = _workspace(tmp_path / "ws")
    for base in BASES:
        import textwrap

        assert len(check_mutant(root, textwrap.dedent(base).lstrip())) == 1


def test_an_op_without_outputs_generates_stubs_that_compile(tmp_path):
    """A mutant the fuzz found: with `outputs` deleted, the PyTorch and JAX stubs said `tuple[]`."""
    import textwrap

    doc = yaml.safe_load(textwrap.dedent(REPRESENTATIVE["list_op"]))
    del doc["outputs"]
    doc["gradient"] = None
    assert check_mutant(_workspace(tmp_path / "ws"), yaml.safe_dump(doc, sort_keys=False))


@st.composite
def scaled_mutant(draw) -> str:
    """A structural mutant of the python-kernel op alone."""
    import textwrap

    doc = yaml.safe_load(textwrap.dedent(SCALED))
    paths = [p for p, _ in _paths(doc) if p and p[0] not in ("op", "kernels")]
    path = draw(st.sampled_from(paths))
    _set(doc, path, draw(st.one_of(st.just(_DELETE), RETYPED)))
    return yaml.safe_dump(doc, sort_keys=False, width=10**6)


@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=scaled_mutant())
def test_a_sample_of_valid_mutants_generates_imports_and_runs(tmp_path_factory, text):
    """The sample that goes all the way: generated, imported with load_ops, called. (Compiled
    kernels are built in tests/codegen/test_escaping.py, from odd text and odd paths.)"""
    from opsdk.codegen.generate import generate_workspace
    from opsdk.registry import OpsdkError
    from opsdk.runtime.frontend.ops_module import load_ops

    root = _workspace(tmp_path_factory.mktemp("sample") / "ws")
    specs = check_mutant(root, text)
    if not specs:
        return  # a located error: checked above
    generate_workspace(root)
    ops = load_ops(root)
    spec = specs[0]
    required = {a.name: (a.choices[0] if a.choices else a.min if a.min is not None else
                         {"int": 1, "float": 1.0, "bool": False, "str": "s"}.get(a.type, ()))
                for a in spec.attrs if a.required}
    try:
        getattr(ops, spec.name)(np.ones(3), **required)
    except OpsdkError:
        pass  # e.g. a required attr the mutant made: refused with the op's name, not a crash
