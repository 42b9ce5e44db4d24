"""The layout of a built artefact: `build/<device>/<op>/manifest.json`, its one home.

`opsdk build` writes a manifest after a successful link; the loader reads it before importing the
extension it names. A manifest is data: it is parsed as JSON, validated field by field into the
frozen `Manifest`, never executed, and every file it names for loading (the extension, the
objects) is a plain name inside the manifest's own folder, so a crafted manifest cannot make
opsdk load or delete anything elsewhere. The extension's sha256 is recorded, so a truncated or
patched artefact is found before the dynamic loader maps it (which would crash the process).

    manifest = read_manifest(folder, op="pairwise_manhattan", device="cpu")
    problem = artefact_problem(folder, manifest)      # None when the bytes are the built ones
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Optional

from .errors import OpsdkError

MANIFEST_NAME = "manifest.json"
FORMAT = 2  # 2: the artefact's and every object's sha256 are recorded
TEMP_PREFIX = ".tmp-"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MISSING = "missing"  # a source digest of a file that vanished (still part of the key)


class ManifestError(OpsdkError):
    """A manifest that is absent, unreadable, of another format, or names files it may not."""


@dataclass(frozen=True)
class ObjectRecord:
    """One object file linked into the artefact: its role, key, file (in `obj/`), digest, headers."""
    role: str
    key: str
    file: str
    sha256: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    """What one successful build of (op, device) produced, and from what.

    `file` is the extension (a plain name in the manifest's folder) importable as `module`;
    `sha256` its bytes' digest. `sources` are the headers the objects included; `digests` map
    the workspace files among the inputs to their sha256 when built (so an edit can be told
    from a touch). `objects` name files in the `obj/` subfolder.
    """
    op: str
    device: str
    key: str
    module: str
    file: str
    sha256: str
    kernel: str
    sources: tuple[str, ...]
    digests: tuple[tuple[str, str], ...]
    objects: tuple[ObjectRecord, ...]


def manifest_file(folder: Path) -> Path:
    """`<folder>/manifest.json`."""
    return Path(folder) / MANIFEST_NAME


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, streamed (artefacts run to megabytes; Python 3.10 has no
    hashlib.file_digest)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------------ writing
def manifest_json(manifest: Manifest) -> str:
    """The manifest's text, as `write_manifest` writes it (the build writes it through its own
    confined writer, opsdk.build.confine)."""
    data = {"format": FORMAT, "op": manifest.op, "device": manifest.device, "key": manifest.key,
            "module": manifest.module, "file": manifest.file, "sha256": manifest.sha256,
            "kernel": manifest.kernel, "sources": list(manifest.sources),
            "digests": dict(manifest.digests),
            "objects": [{"role": o.role, "key": o.key, "file": o.file, "sha256": o.sha256,
                         "sources": list(o.sources)} for o in manifest.objects]}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_manifest(folder: Path, manifest: Manifest) -> Path:
    """Replace `<folder>/manifest.json` atomically (temp file + rename); returns its path."""
    target = manifest_file(folder)
    temp = Path(folder) / f"{TEMP_PREFIX}{MANIFEST_NAME}-{os.getpid()}"
    temp.write_text(manifest_json(manifest))
    os.replace(temp, target)
    return target


# ------------------------------------------------------------------------------------ reading
def read_manifest(folder: Path, op: str, device: str) -> Manifest:
    """The validated manifest of `op` on `device` in `folder`; ManifestError saying what is wrong.

    Refused: a missing or non-JSON file, another format, a field of the wrong type, an op or
    device other than the folder's, a module name that is not the op's, a file name that is not
    a plain name in the folder (`..`, `/`, absolute), a source path climbing out of the workspace.
    """
    path = manifest_file(folder)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{path}: no manifest") from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: unreadable manifest ({exc})") from None
    try:
        return _parse(data, op, device)
    except _Invalid as exc:
        raise ManifestError(f"{path}: invalid manifest: {exc}") from None


class _Invalid(Exception):
    """One validation failure; read_manifest adds the file."""


def _parse(data: Any, op: str, device: str) -> Manifest:
    if not isinstance(data, dict):
        raise _Invalid("not a JSON object")
    if data.get("format") != FORMAT:
        raise _Invalid(f"format {data.get('format')!r}, this opsdk reads format {FORMAT}")
    for name, expected in (("op", op), ("device", device)):
        if _text(data, name) != expected:
            raise _Invalid(f"'{name}' is {data[name]!r}, the folder is for {expected!r}")
    module = _text(data, "module")
    if not (module.isidentifier() and module.startswith(f"_opsdk_{op}_")):
        raise _Invalid(f"'module' {module!r} is not a module name of op '{op}'")
    objects = data.get("objects")
    if not isinstance(objects, list):
        raise _Invalid("'objects' is not a list")
    return Manifest(op=op, device=device, key=_hex(data, "key"), module=module,
                    file=_plain_name(data, "file"), sha256=_hex(data, "sha256"),
                    kernel=_inside_path(_text(data, "kernel"), "kernel"),
                    sources=_sources(data), digests=_digests(data),
                    objects=tuple(_object(o) for o in objects))


def _object(data: Any) -> ObjectRecord:
    if not isinstance(data, dict):
        raise _Invalid("an entry of 'objects' is not a JSON object")
    return ObjectRecord(role=_text(data, "role"), key=_hex(data, "key"),
                        file=_plain_name(data, "file"), sha256=_hex(data, "sha256"),
                        sources=_sources(data))


def _text(data: dict, name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value or "\0" in value:
        raise _Invalid(f"'{name}' is missing or not a non-empty string")
    return value


def _hex(data: dict, name: str) -> str:
    value = _text(data, name)
    if not _HEX64.fullmatch(value):
        raise _Invalid(f"'{name}' is not a sha256 in hex")
    return value


def _plain_name(data: dict, name: str) -> str:
    """A file name with no folder part: it can only name a file of the manifest's own folder."""
    value = _text(data, name)
    if value in (".", "..") or "/" in value or "\\" in value:
        raise _Invalid(f"'{name}' {value!r} is not a plain file name in the manifest's folder")
    return value


def _inside_path(value: str, what: str) -> str:
    """A workspace-relative path that stays inside the workspace."""
    parts = PurePosixPath(value).parts
    if PurePosixPath(value).is_absolute() or ".." in parts or "\\" in value:
        raise _Invalid(f"{what} {value!r} is not a path inside the workspace")
    return value


def _sources(data: dict) -> tuple[str, ...]:
    """Headers: workspace-relative (inside it) or absolute (system headers, never opened by the
    loader: only the build hashes them for its key)."""
    listed = data.get("sources")
    if not isinstance(listed, list) or not all(isinstance(s, str) and s for s in listed):
        raise _Invalid("'sources' is not a list of paths")
    return tuple(s if PurePosixPath(s).is_absolute() else _inside_path(s, "source")
                 for s in listed)


def _digests(data: dict) -> tuple[tuple[str, str], ...]:
    listed = data.get("digests")
    if not isinstance(listed, dict):
        raise _Invalid("'digests' is not a JSON object")
    for rel, digest in listed.items():
        _inside_path(rel, "digest of")
        if not (isinstance(digest, str) and (_HEX64.fullmatch(digest) or digest == _MISSING)):
            raise _Invalid(f"the digest of {rel!r} is not a sha256 in hex")
    return tuple(sorted(listed.items()))


# -------------------------------------------------------------------------------- artefacts
def inside(folder: Path, name: str) -> Path:
    """`folder/name` when that file lies in `folder` (a link pointing out is refused)."""
    path = Path(folder) / name
    real, home = os.path.realpath(path), os.path.realpath(folder)
    if os.path.dirname(real) != home:
        raise ManifestError(f"{path}: links outside {folder}; remove it and run `opsdk build`")
    return path


def artefact_problem(folder: Path, manifest: Manifest) -> Optional[str]:
    """None when the artefact is the one built; else what is wrong with it, in words."""
    return file_problem(folder, manifest.file, manifest.sha256)


def object_problem(folder: Path, record: ObjectRecord) -> Optional[str]:
    """The same check for an object file (in the `obj/` subfolder of the unit)."""
    return file_problem(folder, record.file, record.sha256)


def file_problem(folder: Path, name: str, sha256: str) -> Optional[str]:
    """None when `folder/name` is a file inside `folder` whose bytes hash to `sha256`."""
    try:
        path = inside(folder, name)
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size == 0:
            return f"{name} is empty"
        if file_sha256(path) != sha256:
            return f"{name} differs from the built file (sha256 mismatch: truncated or modified)"
    except ManifestError as exc:
        return str(exc)
    except OSError as exc:
        return f"{name} is unreadable ({exc.strerror})"
    return None
