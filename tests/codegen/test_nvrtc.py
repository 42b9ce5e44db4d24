"""NVRTC compiles of kernels with declared launches (opsdk.build.nvrtc), with no GPU: what the
cuda device compiles at first use where nvcc built nothing. Needs CuPy with NVRTC (CI installs
both through the gpu extra); skipped with the reason otherwise.
"""

from __future__ import annotations

import itertools
import json

import pytest

from opsdk.build import nvrtc
from opsdk.registry import BUILTIN_ROOT, OpError, OpsdkError, load_registry

NVRTC_MISSING = nvrtc.nvrtc_problem()
pytestmark = pytest.mark.skipif(NVRTC_MISSING is not None, reason=NVRTC_MISSING or "")
if NVRTC_MISSING is None:
    from cupy.cuda import nvrtc as cupy_nvrtc


def test_nvrtc_compiles_the_flagship_for_any_arch_it_knows(flagship, tmp_path):
    forward, grad = flagship
    for spec, launches in ((forward, 1), (grad, 1)):
        for dtype, code in (("float32", "f"), ("float64", "d")):
            program = nvrtc.compile_program(spec, {"T": dtype}, 90, tmp_path)
            assert program.path.suffix == ".cubin" and program.path.stat().st_size > 1000
            assert len(program.lowered) == launches
            assert all(f"I{code}" in name for name in program.lowered), program.lowered
    newest = max(cupy_nvrtc.getSupportedArchs())
    program = nvrtc.compile_program(forward, {"T": "float32"}, newest + 1, tmp_path)
    assert program.path.suffix == ".ptx"  # a GPU newer than NVRTC: PTX, compiled by the driver
    assert program.path.read_bytes().count(b".entry") == 1
    with pytest.raises(OpsdkError, match=r"this NVRTC compiles for sm_\d+ and newer; the GPU is sm_30"):
        nvrtc.compile_program(forward, {"T": "float32"}, 30, tmp_path)


def test_every_declared_launch_of_the_repository_compiles_with_nvrtc(tmp_path):
    """What CI can check of the NVRTC path without a GPU: each op's every dtype, for sm_80."""
    registry = load_registry(BUILTIN_ROOT)
    specs = [registry.get(n) for n in registry.names()]
    launched = [s for s in specs if s.kernel("cuda") and s.kernel("cuda").launches]
    assert {s.name for s in launched} >= {"pairwise_manhattan", "pairwise_manhattan_grad"}
    for spec in launched:
        for types in ({ta.name: d for ta, d in zip(spec.type_attrs, combo)}
                      for combo in itertools.product(*(ta.allowed for ta in spec.type_attrs))):
            program = nvrtc.compile_program(spec, types, 80, tmp_path)
            assert len(program.lowered) == len(spec.kernel("cuda").launches)


def test_the_cache_key_covers_the_source_and_every_included_header(launch_ws, tmp_path, monkeypatch):
    spec, cache = launch_ws.spec(), tmp_path / "cache"
    first = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)

    def no_compile(*args):
        raise AssertionError("recompiled")

    with monkeypatch.context() as m:
        m.setattr(nvrtc, "_nvrtc_compile", no_compile)
        assert nvrtc.compile_program(spec, {"T": "float32"}, 80, cache) == first
        header = launch_ws.root / "opdefs" / "cu_scale_helpers.h"
        header.write_text(header.read_text())  # touched, same bytes: still a hit
        assert nvrtc.compile_program(spec, {"T": "float32"}, 80, cache) == first
    header.write_text(header.read_text().replace("-f * v", "-(f * v)"))
    edited = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
    assert edited.path != first.path and first.path.exists()
    assert nvrtc.compile_program(spec, {"T": "float64"}, 80, cache).path not in (first.path, edited.path)
    assert nvrtc.compile_program(spec, {"T": "float32"}, 86, cache).path != edited.path


def test_a_corrupt_or_crafted_cache_entry_is_recompiled_not_trusted(launch_ws, tmp_path):
    spec, cache = launch_ws.spec(), tmp_path / "cache"
    program = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
    good = program.path.read_bytes()
    program.path.write_bytes(good[: len(good) // 2])  # truncated
    assert nvrtc.compile_program(spec, {"T": "float32"}, 80, cache).path.read_bytes() == good
    entry = program.path.with_suffix(".json")
    data = json.loads(entry.read_text())
    for field, value in (("lowered", ["../../etc/passwd"]), ("kind", "../x"), ("format", 99)):
        entry.write_text(json.dumps({**data, field: value}))
        again = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
        assert again == program and json.loads(entry.read_text()) == data


def test_a_cache_entry_that_is_a_link_is_recompiled_and_the_link_replaced(launch_ws, tmp_path):
    spec, cache = launch_ws.spec(), tmp_path / "cache"
    program = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
    good = program.path.read_bytes()
    outside = tmp_path / "outside.cubin"
    outside.write_bytes(good)  # the same bytes: the sha256 in the JSON matches them
    program.path.unlink()
    program.path.symlink_to(outside)
    again = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
    assert again.fresh and not again.path.is_symlink() and again.path.read_bytes() == good
    assert outside.read_bytes() == good  # written next to, never through, the link
    entry = program.path.with_suffix(".json")
    text = entry.read_text()
    (tmp_path / "outside.json").write_text(text)
    entry.unlink()
    entry.symlink_to(tmp_path / "outside.json")
    assert nvrtc.compile_program(spec, {"T": "float32"}, 80, cache).fresh
    assert not entry.is_symlink() and (tmp_path / "outside.json").read_text() == text


def test_an_edited_lowered_name_or_name_expression_is_not_served(launch_ws, tmp_path):
    spec, cache = launch_ws.spec(), tmp_path / "cache"
    program = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
    entry = program.path.with_suffix(".json")
    data = json.loads(entry.read_text())
    [lowered] = data["lowered"]
    for field, value in (("lowered", [lowered.replace("scale", "scalf")]),
                         ("lowered", ["_Z5otheri"]), ("lowered", [lowered + "x"]),
                         ("names", ["opsdk_op_cu_scale::other<float>"]), ("names", None)):
        entry.write_text(json.dumps({**data, field: value}))
        again = nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
        assert again.fresh and again.lowered == (lowered,), (field, value)


def test_a_cache_folder_linked_out_of_its_home_is_refused(launch_ws, tmp_path):
    spec, cache, outside = launch_ws.spec(), tmp_path / "cache", tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    cache.mkdir()
    (cache / spec.name).symlink_to(outside)
    with pytest.raises(OpsdkError, match=r"cu_scale is a link to .*elsewhere, outside .*cache; "
                                         r"opsdk build writes and deletes only inside cache/"):
        nvrtc.compile_program(spec, {"T": "float32"}, 80, cache)
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]
    build = launch_ws.root / "build"
    build.mkdir(exist_ok=True)
    (build / "cuda-nvrtc").symlink_to(outside)
    with pytest.raises(OpsdkError, match=r"cuda-nvrtc is a link to .*, outside .*build"):
        nvrtc.compile_program(spec, {"T": "float32"}, 80)
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


def test_a_compile_error_names_the_authors_file_and_line(launch_ws, tmp_path):
    source = launch_ws.root / "opdefs" / "cu_scale_cuda.cu"
    source.write_text(launch_ws.source.replace("        y[i] =", "        oops += 1;\n        y[i] ="))
    with pytest.raises(OpError) as info:
        nvrtc.compile_program(launch_ws.spec(), {"T": "float32"}, 80, tmp_path)
    assert str(info.value).startswith("cu_scale: its cuda kernel does not compile with NVRTC:\n"
                                      "opdefs/cu_scale_cuda.cu:8: error: identifier \"oops\" is undefined")
    source.write_text(launch_ws.source)
    (launch_ws.root / "opdefs" / "cu_scale_helpers.h").write_text(launch_ws.header.replace("return", "retrun"))
    with pytest.raises(OpError, match=r"\nopdefs/cu_scale_helpers\.h:3: error: "):
        nvrtc.compile_program(launch_ws.spec(), {"T": "float32"}, 80, tmp_path)


def test_a_kernel_whose_parameters_differ_from_the_launch_fails_at_the_launchs_line(launch_ws, tmp_path):
    source = launch_ws.root / "opdefs" / "cu_scale_cuda.cu"
    source.write_text(launch_ws.source.replace("int64_t size", "int size"))  # would read garbage
    with pytest.raises(OpError) as info:
        nvrtc.compile_program(launch_ws.spec(), {"T": "float64"}, 80, tmp_path)
    assert (f"opdefs/cu_scale.yaml:{launch_ws.launch_line}: error: static assertion failed with \"op "
            "'cu_scale': launch 1 passes (const T*, T*, int64_t, double, bool) to scale<T>; declare "
            "its parameters with exactly these types, in the order of args\"") in str(info.value)




def test_without_nvcc_opsdk_build_compiles_declared_launches_through_nvrtc(launch_ws, monkeypatch):
    from opsdk.build.diagnostics import BuildError
    from opsdk.build.driver import build_workspace

    monkeypatch.setenv("OPSDK_NVCC", "no-such-nvcc")
    monkeypatch.setenv("OPSDK_CUDA_ARCHS", "80,sm_86")
    report = build_workspace(launch_ws.root, progress=False)
    assert [(r.op, r.device, r.status) for r in report.results] == [("cu_scale", "cuda", "compiled")]
    assert "compiled through NVRTC for sm_80, sm_86" in report.notes[-1]
    cached = sorted(p.suffix for p in (launch_ws.root / "build/cuda-nvrtc/cu_scale").iterdir())
    assert cached == [".cubin"] * 4 + [".json"] * 4  # 2 dtypes x 2 archs
    again = build_workspace(launch_ws.root, progress=False)
    assert [r.status for r in again.results] == ["up to date"]
    source = launch_ws.root / "opdefs" / "cu_scale_cuda.cu"
    source.write_text(launch_ws.source.replace("        y[i] =", "        oops += 1;\n        y[i] ="))
    with pytest.raises(BuildError) as err:
        build_workspace(launch_ws.root, progress=False)
    assert str(err.value).startswith("cu_scale: its cuda kernel does not compile with NVRTC:\n"
                                     "opdefs/cu_scale_cuda.cu:8: error: identifier \"oops\" is undefined")
