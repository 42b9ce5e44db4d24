"""No user mistake ends in a traceback: garbage declarations raise OpDefErrors, nothing else."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsdk.registry import OpDefErrors, parse_opdef
from opsdk.registry.parse import TOP_KEYS

KEYS = list(TOP_KEYS) + ["dtype", "shape", "list", "type", "default", "min", "max", "choices", "allowed",
                         "cpu", "cuda", "python", "x", "y", "T", "N", "rtol", "domain", "..."]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
                    st.sampled_from(["float32", "T", "n", "...", "any", "n + 1", "kernels.py:foo", "stop",
                                     "foo_cpu.cc", "int", "list(int)", "a:b", "", "**", "floats"]),
                    st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)), max_leaves=12)
DECLS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8).map(lambda d: {"op": "foo", **d})

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _parse_or_report(ws, text: str) -> None:
    path = ws.write("fuzz.yaml", text)
    try:
        specs = parse_opdef(path, ws.root)
    except OpDefErrors as exc:
        assert exc.errors and all(str(e).startswith("opdefs/fuzz.yaml:") for e in exc.errors)
    else:
        assert all(spec.name for spec in specs)


@FUZZ
@given(DECLS)
def test_structured_garbage_is_reported(ws, declaration):
    _parse_or_report(ws, yaml.safe_dump(declaration, sort_keys=False))


@FUZZ
@given(st.text(alphabet=" \n\t:-[]{},'\"&*!|>#%@`?abcT0123.", max_size=60))
def test_raw_garbage_is_reported(ws, text):
    _parse_or_report(ws, text)


def test_alias_bomb_and_recursive_anchor(ws):
    bomb = "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c]\nop: foo\n"
    _parse_or_report(ws, bomb)
    _parse_or_report(ws, "op: foo\nsummary: &s [*s]\n")
    _parse_or_report(ws, "op: !!python/object:os.system echo\n")
    path = ws.opdefs / "binary.yaml"
    path.write_bytes(b"op: \xff\xfe\n")
    with pytest.raises(OpDefErrors, match=r"^opdefs/binary.yaml:1: byte 0xff is not UTF-8 text"):
        parse_opdef(path, ws.root)


@pytest.mark.parametrize("value", [
    "[" * 20_000 + "]" * 20_000,                                  # 20,000 levels of nesting
    "ALIAS_BOMB",                                                 # 9 ** 8 values through aliases
])
def test_hostile_yaml_is_refused_fast_and_in_bounded_memory(ws, value):
    import time
    import tracemalloc

    if value == "ALIAS_BOMB":
        value = "&a0 [" + ", ".join(["1"] * 9) + "]"
        for i in range(1, 8):
            value = f"&a{i} [{value}" + f", *a{i - 1}" * 8 + "]"
    path = ws.write("hostile.yaml", "op: foo\nsummary: Foo.\ngradcheck: {attrs: {k: " + value + "}}\n")
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, ws.root)
    elapsed, (_, peak) = time.perf_counter() - start, tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert str(info.value).startswith("opdefs/hostile.yaml:3: ") and len(str(info.value)) < 300
    assert elapsed < 2.0 and peak < 50 * 2**20
