"""Compiled kernels run with subnormal floats flushed to zero (opsdk/include/opsdk/kernel.h:
float_mode): results and inputs, on the calling thread and on parallel_for's threads alike; the
caller's own mode comes back after the call (NumPy beside it keeps its subnormals); and
OPSDK_FLUSH_DENORMALS=0 keeps them in the kernels too. Each case runs in a process of its own,
the environment read once there. (OpenMP's threads, made during a flushed call, start in its mode;
parallel_for sets it on them anyway, for threads another library made before.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CODE = textwrap.dedent("""
    import json, numpy as np
    from opsdk import ops
    tiny = np.float32(1e-39)  # a float32 subnormal (the smallest normal is 1.2e-38)
    one = ops.gemm(np.array([[tiny]], np.float32), np.array([[1.0]], np.float32))
    # 64 x 4096 @ 4096 x 256: split between two threads (the load ignored)
    a = np.full((64, 4096), tiny, np.float32)
    b = np.ones((4096, 256), np.float32)
    many = ops.gemm(a, b)
    after = np.float32(tiny) * np.float32(1.0)  # NumPy on the calling thread, after the calls
    print(json.dumps({"one": float(one[0, 0]), "nonzero": int(np.count_nonzero(many)),
                      "numpy_after": float(after)}))
""")


def _run(**env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, cwd=ROOT,
                         timeout=120,
                         env={**os.environ, "OPSDK_THREADS_IGNORE_LOAD": "1", **env})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "AMD64", "aarch64", "arm64"),
                    reason="the flush mode is set on x86 and ARM64 only")
def test_kernels_flush_subnormals_and_leave_the_callers_mode_alone():
    got = _run()
    assert got["one"] == 0.0  # the input taken as zero
    assert got["nonzero"] == 0  # on every thread of the parallel loop
    assert got["numpy_after"] > 0.0  # the calling thread's own mode came back


def test_opsdk_flush_denormals_0_keeps_them():
    got = _run(OPSDK_FLUSH_DENORMALS="0")
    assert got["one"] == pytest.approx(1e-39, rel=1e-3)
    assert got["nonzero"] == 64 * 256
    assert got["numpy_after"] > 0.0
