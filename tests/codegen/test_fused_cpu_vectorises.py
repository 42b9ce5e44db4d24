"""The fused CPU kernel's loops vectorise for every function of the elementwise language
(opsdk/registry/elementwise.py FUNCTIONS), in float32 and float64: GCC's report
(-fopt-info-vec-missed) on the generated source, compiled with the fusion compiler's own flags
(opsdk/build/fusion.py FLAGS), names no loop of the kernel it could not vectorise. Without
-fno-trapping-math, the range checks of opsdk_exp stayed branches and a region holding exp or
sigmoid ran one element at a time. Needs g++ (the report's wording is GCC's); skipped otherwise."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from opsdk.build.fusion import FLAGS
from opsdk.codegen.fused import render_fused_cpu
from opsdk.registry.elementwise import FUNCTIONS, FusedKernel, Var, parse_expression, substitute

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="no g++ on PATH: the report is GCC's")

CALLS = {1: "{f}(x * 0.5 + y)", 2: "{f}(x, y)", 3: "{f}(x > y, x, y)"}


def _kernel(text: str, dtype: str) -> FusedKernel:
    expr = substitute(parse_expression(text, frozenset(("x", "y"))), {"x": Var("in0"), "y": Var("in1")})
    return FusedKernel(dtype, ("array", "array"), (("t0", expr),), ("t0",))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_every_function_vectorises(tmp_path, function, dtype):
    source = tmp_path / "k.cc"
    source.write_text(render_fused_cpu(_kernel(CALLS[FUNCTIONS[function]].format(f=function), dtype)))
    out = subprocess.run([GXX, *FLAGS, "-fopt-info-vec-missed", str(source), "-o",
                          str(tmp_path / "k.so")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    kernel_start = source.read_text().splitlines().index(
        next(l for l in source.read_text().splitlines() if l.startswith('extern "C"'))) + 1
    missed = [l for l in out.stderr.splitlines()
              if "couldn't vectorize loop" in l
              and int(re.match(r"[^:]+:(\d+):", l).group(1)) > kernel_start]
    lines = source.read_text().splitlines()
    # The tail loop after the blocks may go element by element; every block loop must not.
    block_loops = [l for l in missed
                   if "for (int j = 0; j < B; ++j)" in lines[int(re.match(r"[^:]+:(\d+):", l).group(1)) - 1]]
    assert block_loops == [], "\n".join(block_loops)
