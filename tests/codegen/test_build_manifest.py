"""The manifest of a built artefact (opsdk.registry.manifest): written, read back, validated.

A manifest is data: every field is checked, and no file it names can lie outside its folder.
These tests need no compiler: the artefacts are a few bytes standing for an extension.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from opsdk.registry import KernelNotBuiltError, load_registry
from opsdk.registry.manifest import (MANIFEST_NAME, Manifest, ManifestError, ObjectRecord,
                                     artefact_problem, file_sha256, inside, object_problem,
                                     read_manifest, write_manifest)
from opsdk.runtime.kernels import loader

OP = "mf_op"
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
ARTEFACT = b"\x7fELF pretend extension"


def _built(folder: Path) -> Manifest:
    """A folder holding a pretend artefact and object, and the manifest describing them."""
    (folder / "obj").mkdir(parents=True)
    artefact = folder / f"_opsdk_{OP}_0123456789ab.so"
    artefact.write_bytes(ARTEFACT)
    (folder / "obj/kernel-0123.o").write_bytes(b"object")
    obj = ObjectRecord("kernel", "1" * 64, "kernel-0123.o", file_sha256(folder / "obj/kernel-0123.o"),
                       ("opdefs/header.h", "/usr/include/stdio.h"))
    return Manifest(op=OP, device="cpu", key="a" * 64, module=f"_opsdk_{OP}_0123456789ab",
                    file=artefact.name, sha256=file_sha256(artefact),
                    kernel=f"opdefs/{OP}_cpu.cc", sources=("opdefs/header.h",),
                    digests=((f"opdefs/{OP}_cpu.cc", "b" * 64),), objects=(obj,))


def _edit(folder: Path, change) -> None:
    """Apply `change` to the manifest's JSON in place."""
    path = folder / MANIFEST_NAME
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_written_manifest_reads_back_equal_and_its_files_check_out(tmp_path):
    manifest = _built(tmp_path)
    assert write_manifest(tmp_path, manifest) == tmp_path / MANIFEST_NAME
    assert read_manifest(tmp_path, OP, "cpu") == manifest
    assert artefact_problem(tmp_path, manifest) is None
    assert object_problem(tmp_path / "obj", manifest.objects[0]) is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(file="../../../etc/passwd"),
     r"'file' '\.\./\.\./\.\./etc/passwd' is not a plain file name in the manifest's folder"),
    (lambda d: d.update(file="/etc/passwd"), r"'file' '/etc/passwd' is not a plain file name"),
    (lambda d: d.update(file=".."), r"'file' '\.\.' is not a plain file name"),
    (lambda d: d["objects"][0].update(file="../../victim.o"),
     r"'file' '\.\./\.\./victim\.o' is not a plain file name"),
    (lambda d: d.update(kernel="../outside.cc"), r"kernel '\.\./outside\.cc' is not a path inside "
                                                 r"the workspace"),
    (lambda d: d.update(sources=["../../x.h"]), r"source '\.\./\.\./x\.h' is not a path inside"),
    (lambda d: d.update(digests={"/etc/shadow": "b" * 64}), r"digest of '/etc/shadow' is not a path"),
    (lambda d: d.update(module="os"), r"'module' 'os' is not a module name of op 'mf_op'"),
    (lambda d: d.update(module="_opsdk_mf_op_x; import os"), r"is not a module name of op"),
    (lambda d: d.update(op="other"), r"'op' is 'other', the folder is for 'mf_op'"),
    (lambda d: d.update(device="cuda"), r"'device' is 'cuda', the folder is for 'cpu'"),
    (lambda d: d.pop("sha256"), r"'sha256' is missing or not a non-empty string"),
    (lambda d: d.update(sha256="00"), r"'sha256' is not a sha256 in hex"),
    (lambda d: d.update(format=1), r"format 1, this opsdk reads format 2"),
    (lambda d: d.update(objects={"role": "kernel"}), r"'objects' is not a list"),
    (lambda d: d.update(sources="opdefs/header.h"), r"'sources' is not a list of paths"),
])
def test_a_manifest_naming_what_it_may_not_is_refused(tmp_path, change, message):
    write_manifest(tmp_path, _built(tmp_path))
    _edit(tmp_path, change)
    with pytest.raises(ManifestError, match=message) as err:
        read_manifest(tmp_path, OP, "cpu")
    assert str(err.value).startswith(f"{tmp_path / MANIFEST_NAME}: invalid manifest: ")


@pytest.mark.parametrize("text, message", [
    (None, r"manifest\.json: no manifest$"),
    ("{truncated", r"manifest\.json: unreadable manifest \("),
    ("[1, 2]", r"invalid manifest: not a JSON object"),
    ('{"format": 2, "op": 5}', r"invalid manifest: 'op' is missing or not a non-empty string"),
])
def test_a_missing_or_malformed_manifest_is_refused(tmp_path, text, message):
    if text is not None:
        (tmp_path / MANIFEST_NAME).write_text(text)
    with pytest.raises(ManifestError, match=message):
        read_manifest(tmp_path, OP, "cpu")


def test_damaged_artefacts_are_named_as_such(tmp_path):
    manifest = _built(tmp_path)
    artefact = tmp_path / manifest.file
    artefact.write_bytes(ARTEFACT[:5])
    assert "sha256 mismatch: truncated or modified" in artefact_problem(tmp_path, manifest)
    artefact.write_bytes(b"")
    assert artefact_problem(tmp_path, manifest) == f"{manifest.file} is empty"
    artefact.unlink()
    assert artefact_problem(tmp_path, manifest) == f"{manifest.file} is missing"


def test_a_link_pointing_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "unit"
    manifest = _built(folder)
    outside = tmp_path / "elsewhere.so"
    outside.write_bytes(ARTEFACT)
    (folder / manifest.file).unlink()
    os.symlink(outside, folder / manifest.file)
    with pytest.raises(ManifestError, match=r"links outside .*unit; remove it and run `opsdk build`"):
        inside(folder, manifest.file)
    assert "links outside" in artefact_problem(folder, manifest)


def _workspace(root: Path) -> Path:
    (root / "opdefs").mkdir(parents=True)
    (root / f"opdefs/{OP}.yaml").write_text(YAML)
    (root / f"opdefs/{OP}_cpu.cc").write_text("")
    return root


def test_the_loader_refuses_a_crafted_manifest_before_importing_anything(tmp_path):
    spec = load_registry(_workspace(tmp_path)).get(OP)
    folder = tmp_path / f"build/cpu/{OP}"
    manifest = _built(folder)
    victim = tmp_path / "victim.so"
    victim.write_bytes(ARTEFACT)
    write_manifest(folder, replace(manifest, file="../../../victim.so"))
    with pytest.raises(KernelNotBuiltError, match=rf"op '{OP}': its built cpu kernel is unusable "
                                                  r"\(.*is not a plain file name.*\); run `opsdk "
                                                  r"build` in .* to rebuild it"):
        loader.load_kernel(spec, "cpu")
    (folder / manifest.file).unlink()
    os.symlink(victim, folder / manifest.file)
    write_manifest(folder, manifest)
    with pytest.raises(KernelNotBuiltError, match=r"links outside"):
        loader.load_kernel(spec, "cpu")


def test_the_loader_refuses_an_artefact_whose_bytes_changed(tmp_path):
    spec = load_registry(_workspace(tmp_path)).get(OP)
    folder = tmp_path / f"build/cpu/{OP}"
    manifest = _built(folder)
    write_manifest(folder, manifest)
    (folder / manifest.file).write_bytes(ARTEFACT + b"patched")
    with pytest.raises(KernelNotBuiltError, match=rf"op '{OP}': its built cpu kernel is unusable "
                                                  r"\(.*sha256 mismatch.*\); run `opsdk build`"):
        loader.load_kernel(spec, "cpu")
