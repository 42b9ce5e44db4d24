"""Does a compiler really work: compile, link and load a tiny unit, as `opsdk doctor` asks.

A compiler that answers `--version` may still fail the build (a wrapper that exits 0 writing
nothing, a cross compiler, a broken install). `probe_toolchain` compiles a one-function shared
library with the toolchain's command (launcher and options included) and the build's base flags,
loads it with ctypes and calls the function. CUDA needs no GPU: the library's function is host
code (nvcc still compiles a kernel beside it, for its default arch).

    problem = probe_toolchain(find_toolchain("cpu"))   # None, or what went wrong, in words
"""

from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path
from typing import Optional

from opsdk.build.compiler import extra_flags, run_compiler
from opsdk.build.toolchain import Toolchain

_SOURCE = {
    "cpu": ('extern "C" int opsdk_probe(int x) { return x + 1; }\n', "probe.cc",
            ("-O1", "-std=c++17", "-fPIC", "-shared", "-fopenmp")),
    "cuda": ('__global__ void opsdk_probe_kernel(int* x) { *x += 1; }\n'
             'extern "C" int opsdk_probe(int x) { return x + 1; }\n', "probe.cu",
             ("-std=c++17", "-Xcompiler", "-fPIC", "-shared")),
}


def probe_toolchain(toolchain: Toolchain) -> Optional[str]:
    """None when `toolchain` compiles, links and loads a tiny library; else why not, in words."""
    source, name, flags = _SOURCE[toolchain.device]
    with tempfile.TemporaryDirectory(prefix="opsdk-probe-") as temp:
        folder = Path(temp)
        (folder / name).write_text(source)
        library = folder / "probe.so"
        command = (*toolchain.command, *flags, *extra_flags(toolchain.device), name,
                   "-o", str(library))
        outcome = run_compiler(command, folder, expect=library)
        if not outcome.ok:
            last = [line for line in outcome.output.splitlines() if line.strip()][-3:]
            return (f"{toolchain.describe()} cannot compile a one-line {toolchain.device} library "
                    f"(exit {outcome.returncode}): " + (" / ".join(last) or "no output"))
        try:
            function = ctypes.CDLL(str(library)).opsdk_probe
            function.restype, function.argtypes = ctypes.c_int, [ctypes.c_int]
            answer = function(41)
        except (OSError, AttributeError) as exc:
            return f"{toolchain.describe()} wrote a library that does not load ({exc})"
        if answer != 42:
            return f"{toolchain.describe()} wrote a library that computes 41 + 1 = {answer}"
    return None
