"""gradcheck reaches the flagship's fast paths: every SIMD loop and scalar tail, negated, is caught.

The flagship's two C++ kernels and their shared header are copied into a temporary workspace
(renamed `pmm`, so they do not clash with the builtin op), built once as they are (gradcheck must
pass), then once per mutation, each negating the arithmetic of one loop. gradcheck, or its forward-
vs-reference check, must fail on every mutant. gradcheck draws float64 (the widest allowed type),
so the copies are built for float64 alone and the header's mutations are those of its float64
constants; the kernels are templates, the same code for both dtypes. The exact path (taken only for
NaN or infinite inputs, which finite differences cannot check) is held to the reference by a
NaN/inf comparison instead. Mutants build two at a time.
"""

from __future__ import annotations

import platform
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.gradcheck import check_op
from opsdk.registry import BUILTIN_ROOT, load_registry

pytestmark = pytest.mark.slow

FILES = ("pairwise_manhattan.yaml", "pairwise_manhattan_grad.yaml", "pairwise_manhattan_cpu.cc",
         "pairwise_manhattan_grad_cpu.cc", "pairwise_manhattan_simd.h")
FWD, GRAD, SIMD = "pmm_cpu.cc", "pmm_grad_cpu.cc", "pmm_simd.h"

# (id, file, the text as written, the text negated): each text occurs exactly once in its file.
CHECKED_BY_GRADCHECK = [
    ("forward-simd-accumulate", FWD, "return acc + (typename S::V)", "return acc - (typename S::V)"),
    ("forward-lane-tree", FWD, "Lanes{}) +\n", "Lanes{}) -\n"),
    ("forward-lane-fold", FWD, "return v + __builtin_shufflevector", "return v - __builtin_shufflevector"),
    ("forward-tail", FWD, "s += d < 0 ? -d : d;", "s -= d < 0 ? -d : d;"),
    ("grad-simd-sign", GRAD, "const M lt = a < b;", "const M lt = a > b;"),
    ("grad-simd-sign-avx512", GRAD, "_mm512_sub_pd((__m512d)a, (__m512d)b)",
     "_mm512_sub_pd((__m512d)b, (__m512d)a)"),
    ("grad-simd-grad-x", GRAD, "gxv[r] += t;", "gxv[r] -= t;"),
    ("grad-simd-grad-y", GRAD, "gyv[c] -= t;", "gyv[c] += t;"),
    ("grad-tail-sign", GRAD, "return a > b ? g : (a < b ? -g : T(0));", "return a > b ? -g : (a < b ? g : T(0));"),
    ("grad-tail-grad-x", GRAD, "gx[(i0 + r) * p + k] += t;", "gx[(i0 + r) * p + k] -= t;"),
    ("grad-tail-grad-y", GRAD, "gy[(j0 + c) * p + k] -= t;", "gy[(j0 + c) * p + k] += t;"),
    ("simd-abs-mask-f64", SIMD, "kAbsMask = 0x7fffffffffffffffLL;", "kAbsMask = -1LL;"),
    ("simd-sign-bit-f64", SIMD, "kSignBit = INT64_MIN;", "kSignBit = 0;"),
]
CHECKED_BY_NONFINITE = [
    ("grad-exact-simd-sign", GRAD, "((M)d & Simd<T>::kSignBit)", "(~(M)d & Simd<T>::kSignBit)"),
    ("grad-exact-tail-sign", GRAD, "(d > 0 ? T(1) : (d < 0 ? T(-1)", "(d > 0 ? T(-1) : (d < 0 ? T(1)"),
]
MUTANTS = CHECKED_BY_GRADCHECK + CHECKED_BY_NONFINITE


def _avx512() -> bool:
    """Whether this machine's native build (-march=native) has AVX-512 (/proc/cpuinfo's flags)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not Path("/proc/cpuinfo").exists():
        return False
    return " avx512f" in Path("/proc/cpuinfo").read_text()


# The gradient's vector sign has two forms, and a native build compiles one: AVX-512's (a
# difference's sign bit) or the comparisons of every other width.
NOT_BUILT = {"grad-simd-sign": "AVX-512 builds take the difference's sign bit instead",
             "grad-simd-sign-avx512": "no AVX-512 on this machine"}


def _built_here(mutant: str) -> bool:
    return mutant not in NOT_BUILT or (mutant == "grad-simd-sign-avx512") == _avx512()


def _copy_flagship(root: Path) -> Path:
    opdefs = root / "opdefs"
    opdefs.mkdir(parents=True)
    for name in FILES:
        text = (BUILTIN_ROOT / "opdefs" / name).read_text().replace("pairwise_manhattan", "pmm")
        # No GPU needed: CPU kernels only (the cuda entry and its indented launch block go).
        text = re.sub(r"\n  cuda:.*(?:\n {4,}.*)*", "", text)
        # gradcheck draws float64 only: instantiating float32 too would double every build.
        text = text.replace("T: [float32, float64]", "T: [float64]")
        (opdefs / name.replace("pairwise_manhattan", "pmm")).write_text(text)
    return root


def _mutant(base: Path, root: Path, file: str, old: str, new: str) -> Path:
    """A copy of the built base workspace (its objects reused) with one text negated."""
    shutil.copytree(base, root)
    path = root / "opdefs" / file
    text = path.read_text()
    assert text.count(old) == 1, f"{file}: '{old}' occurs {text.count(old)} times; update the mutation"
    path.write_text(text.replace(old, new))
    return root


def _gradcheck_fails(root: Path) -> bool:
    registry = load_registry(root)
    outcome = check_op(registry, registry.get("pmm"), max_examples=10)
    assert outcome.results and all(r.status != "error" for r in outcome.results), outcome
    return not outcome.ok


def _nonfinite_agrees(root: Path) -> bool:
    """The gradient kernel on inputs with NaN and infinities against np.sign, at p = 19 and 40."""
    registry = load_registry(root)
    from opsdk.runtime.frontend.ops_module import load_ops

    ops = load_ops(root)
    rng = np.random.default_rng(0)
    for p in (19, 40):
        x, y, g = rng.random((4, p)), rng.random((5, p)), rng.random((4, 5))
        x[1] = np.nan
        x[2, 3], y[3, 3], y[0, p - 1] = np.inf, np.inf, -np.inf
        gx, gy = ops.pmm_grad(x, y, g)
        s = np.sign(x[:, None, :] - y[None, :, :])
        want_x, want_y = (g[:, :, None] * s).sum(1), -(g[:, :, None] * s).sum(0)
        if not (np.allclose(gx, want_x, equal_nan=True) and np.allclose(gy, want_y, equal_nan=True)):
            return False
    assert registry.get("pmm_grad")
    return True


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The base workspace and every mutant, built (two builds at a time)."""
    top = tmp_path_factory.mktemp("mutants")
    base = _copy_flagship(top / "base")
    build_workspace(base, jobs=2, progress=False)
    roots = {m[0]: _mutant(base, top / m[0], *m[1:]) for m in MUTANTS if _built_here(m[0])}
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda root: build_workspace(root, jobs=1, progress=False), roots.values()))
    return {"base": base, **roots}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_unmutated_kernels_pass(built):
    assert not _gradcheck_fails(built["base"])
    assert _nonfinite_agrees(built["base"])


@pytest.mark.parametrize("mutant", [m[0] for m in CHECKED_BY_GRADCHECK])
def test_gradcheck_catches_the_negated_loop(built, mutant):
    if not _built_here(mutant):
        pytest.skip(f"{mutant}: this machine's build does not compile it ({NOT_BUILT[mutant]})")
    assert _gradcheck_fails(built[mutant]), f"gradcheck passed the mutant {mutant}"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("mutant", [m[0] for m in CHECKED_BY_NONFINITE])
def test_the_nonfinite_check_catches_the_negated_exact_path(built, mutant):
    assert not _nonfinite_agrees(built[mutant]), f"the exact path's mutant {mutant} agreed with np.sign"
