"""`opsdk build` writes, replaces and deletes only inside the workspace's build/ folder.

A link planted inside build/ (the unit's folder, its obj/ folder, its log, the manifest, the
lock, the generation record) must never make the build write or delete through it: a folder
linked out is refused with an error naming it, a file linked out is replaced as a link. A compiler
that exits 0 without writing its output is a build error of that op, not a traceback.

The compiler here is a script that writes pretend objects in milliseconds (the build never loads
what it links); the tests need no g++.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from opsdk.build import confine
from opsdk.build.diagnostics import BuildError
from opsdk.build.driver import build_workspace
from opsdk.registry import OpsdkError

OP = "cf_copy"
YAML = f"""\
op: {OP}
summary: y = x.
inputs:
  x: {{dtype: float64, shape: [n]}}
outputs:
  y: {{dtype: float64, shape: [n]}}
kernels:
  cpu: {OP}_cpu.cc
reference: "x"
"""
FAKE_COMPILER = """\
#!/bin/sh
[ "$1" = "--version" ] && { echo "fake-g++ 1.0"; exit 0; }
out=""; dep=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift;;
    -MF) dep="$2"; shift;;
  esac
  shift
done
if [ -n "$CF_FAIL" ]; then echo "opdefs/cf_copy_cpu.cc:1:1: error: boom"; exit 1; fi
[ -n "$dep" ] && printf 'x.o: \\n' > "$dep"
if [ -n "$CF_DIR_OUTPUT" ]; then mkdir -p "$out"; exit 0; fi
[ -n "$out" ] && [ -z "$CF_NO_OUTPUT" ] && printf 'built %s' "$out" > "$out"
exit 0
"""


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    """A built one-op workspace (fake compiler), and an `outside` folder holding a victim file."""
    compiler = tmp_path / "fake-g++"
    compiler.write_text(FAKE_COMPILER)
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("OPSDK_CXX", str(compiler))
    for name in ("CF_FAIL", "CF_NO_OUTPUT", "CF_DIR_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "ws"
    (root / "opdefs").mkdir(parents=True)
    (root / "opdefs" / f"{OP}.yaml").write_text(YAML)
    (root / "opdefs" / f"{OP}_cpu.cc").write_text("// v1\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text("keep me")
    assert [r.op for r in build(root).compiled] == [OP]
    return root


def build(root: Path):
    return build_workspace(root, cuda="off", progress=False)


def outside_of(root: Path) -> Path:
    return root.parent / "outside"


def listing(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def edit_kernel(root: Path, text: str) -> None:
    (root / "opdefs" / f"{OP}_cpu.cc").write_text(text)


def test_a_no_op_build_with_obj_linked_out_deletes_nothing_there(ws):
    obj, outside = ws / "build" / "cpu" / OP / "obj", outside_of(ws)
    for path in obj.iterdir():  # the objects moved out, the link in their place
        path.rename(outside / path.name)
    obj.rmdir()
    obj.symlink_to(outside)
    before = listing(outside)
    with pytest.raises(OpsdkError, match=rf"obj is a link to .*outside, outside .*build; opsdk "
                                         rf"build writes and deletes only inside build/: remove "
                                         rf"the link \(rm .*obj\) and build again"):
        build(ws)
    assert listing(outside) == before
    edit_kernel(ws, "// v2\n")  # a build that compiles is refused the same way, writing nothing
    with pytest.raises(OpsdkError, match=r"obj is a link to"):
        build(ws)
    assert listing(outside) == before


def test_a_unit_folder_linked_out_is_refused_before_anything_is_written(ws):
    unit, outside = ws / "build" / "cpu" / OP, outside_of(ws)
    (outside / f"_opsdk_{OP}_000000000000.so").write_text("not the build's")
    before = listing(outside)
    unit.rename(ws / "moved")
    unit.symlink_to(outside)
    for _ in range(2):
        with pytest.raises(OpsdkError, match=rf"{OP} is a link to .*outside, outside .*build"):
            build(ws)
        assert listing(outside) == before
        edit_kernel(ws, "// v2\n")


def test_a_failing_build_replaces_a_linked_log_instead_of_writing_through_it(ws, monkeypatch):
    log, victim = ws / "build" / "cpu" / OP / "last_error.log", outside_of(ws) / "victim.txt"
    log.symlink_to(victim)
    monkeypatch.setenv("CF_FAIL", "1")
    edit_kernel(ws, "// v2\n")
    with pytest.raises(BuildError, match=r"opdefs/cf_copy_cpu.cc:1:1: error: boom \[op 'cf_copy', "
                                         r"cpu\]"):
        build(ws)
    assert victim.read_text() == "keep me"
    assert not log.is_symlink() and log.read_text().startswith("$ ")


def test_the_manifest_record_and_lock_linked_out_are_replaced_as_links(ws):
    outside, build_dir = outside_of(ws), ws / "build"
    planted = {build_dir / "cpu" / OP / "manifest.json": "manifest.json",
               build_dir / ".generate-state.json": "state.json", build_dir / ".lock": "lock"}
    for path, name in planted.items():
        (outside / name).write_text(f"outside {name}")
        path.unlink(missing_ok=True)
        path.symlink_to(outside / name)
    (ws / "opdefs" / f"{OP}.yaml").write_text(YAML + "\n")  # regenerates: the record is rewritten
    edit_kernel(ws, "// v2\n")
    assert [r.op for r in build(ws).compiled] == [OP]
    for path, name in planted.items():
        assert (outside / name).read_text() == f"outside {name}"
        assert not path.is_symlink(), path
    assert [r.op for r in build(ws).up_to_date] == [OP]


def test_a_stale_object_linked_to_an_outside_file_is_removed_as_a_link(ws):
    obj, victim = ws / "build" / "cpu" / OP / "obj", outside_of(ws) / "victim.txt"
    (obj / "kernel-0000000000000000.o").symlink_to(victim)
    assert [r.op for r in build(ws).up_to_date] == [OP]
    assert not (obj / "kernel-0000000000000000.o").exists() and victim.read_text() == "keep me"


def test_a_compiler_that_exits_0_without_its_output_is_a_build_error_of_the_op(ws, monkeypatch):
    monkeypatch.setenv("CF_NO_OUTPUT", "1")
    edit_kernel(ws, "// v2\n")
    with pytest.raises(BuildError) as info:
        build(ws)
    message = str(info.value)
    assert "fake-g++ exited with status 0 but wrote no .o file" in message, message
    assert f"[op '{OP}', cpu]" in message
    assert [r.op for r in info.value.report.failed] == [OP]


def test_a_file_or_folder_where_the_build_expects_the_other_is_a_clear_error(ws, monkeypatch):
    unit = ws / "build" / "cpu" / OP
    shutil.rmtree(unit / "obj")
    (unit / "obj").write_text("not a folder")
    edit_kernel(ws, "// v2\n")
    with pytest.raises(OpsdkError, match=r"obj is a file where opsdk build keeps a folder; "
                                         r"remove it \(rm .*obj\) and build again"):
        build(ws)
    (unit / "obj").unlink()
    (unit / "manifest.json").unlink()
    (unit / "manifest.json").mkdir()
    with pytest.raises(OpsdkError, match=r"manifest.json is a folder where opsdk build writes a "
                                         r"file; remove it"):
        build(ws)
    shutil.rmtree(unit / "manifest.json")
    monkeypatch.setenv("CF_DIR_OUTPUT", "1")  # the compiler makes a folder at its output's name
    edit_kernel(ws, "// v3\n")
    with pytest.raises(BuildError, match=r"exited with status 0 but wrote no .o file"):
        build(ws)
    shutil.rmtree(ws / "build")
    (ws / "build").write_text("not a folder")
    with pytest.raises(OpsdkError, match=r"build is a file where opsdk build keeps a folder"):
        build(ws)


# ------------------------------------------------------------------ the mechanism, on its own
def test_confined_writes_never_follow_a_link_out(tmp_path):
    top, outside = tmp_path / "build", tmp_path / "outside"
    top.mkdir()
    outside.mkdir()
    (outside / "f").write_text("outside")
    (top / "f").symlink_to(outside / "f")
    confine.write_file(top, top / "f", "inside")
    assert (outside / "f").read_text() == "outside" and (top / "f").read_text() == "inside"
    (top / "g").symlink_to(outside / "f")
    confine.remove_file(top, top / "g")
    assert (outside / "f").exists() and not os.path.lexists(top / "g")
    (top / "d").symlink_to(outside)
    for action in (lambda: confine.confined_dir(top, top / "d" / "sub"),
                   lambda: confine.write_file(top, top / "d" / "x", "x"),
                   lambda: confine.remove_file(top, top / "d" / "f"),
                   lambda: confine.check_inside(top, tmp_path / "elsewhere"),
                   lambda: confine.check_inside(top, top / ".." / "outside")):
        with pytest.raises(confine.ConfinementError):
            action()
    assert listing(outside) == {"f": "outside"}
    (top / "inner").mkdir()
    (top / "alias").symlink_to(top / "inner")  # a link that stays inside is fine
    confine.write_file(top, top / "alias" / "x", "x")
    assert (top / "inner" / "x").read_text() == "x"
    (top / "folder").mkdir()  # a folder where a file goes (an NVRTC cache entry, say)
    with pytest.raises(confine.ConfinementError, match=r"folder is a folder where opsdk build "
                                                       r"writes a file; remove it"):
        confine.write_file(top, top / "folder", "x")
