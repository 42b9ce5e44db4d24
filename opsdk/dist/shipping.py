"""Op libraries for remote tasks: a workspace's declarations, kernel sources and built artefacts
travel through Ray's object store, packed once per content, and each node unpacks them once.

A graph may use ops of a user workspace (`opsdk.load_ops(folder)`). A task on another node has
no such folder, so the master packs what running those ops takes:

- `opsdk.yaml` and everything under `opdefs/` (declarations, Python kernels, kernel sources);
- files outside `opdefs/` that a declaration names (a kernel source, a `shape_fn` file);
- per op and device, the build's `manifest.json` and the artefact it names (what the runtime's
  loader maps; nothing is compiled on the task).

The package is named by the sha256 of its (path, content) list. The master `ray.put`s it once
per content per process; a task unpacks it under `<tmp>/opsdk-workspaces-<uid>/<digest>/<name>`
(the folder keeps the workspace's name, which may be its namespace), checks the digest of what
it unpacked, and reuses it for every later partition and every task of that node.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from opsdk.registry.errors import OpsdkError

# A package larger than this is refused with an error saying what to do: the embedded Ray
# instance's object store holds 80 MB, and a workspace is declarations and a few libraries.
MAX_BYTES = 48 * 1024 * 1024
_DEVICES = ("cpu", "cuda")  # the build folders the runtime's loader reads

_lock = threading.Lock()
_SHAS: dict[tuple, str] = {}  # (path, mtime_ns, size) -> sha256 of the file's bytes


@dataclass(frozen=True)
class Shipment:
    """A packed workspace as a task receives it: its folder's name, the content digest, where
    it came from on the master (for messages), and the package in Ray's object store (inside a
    list, so that Ray hands the task the reference, not the bytes it may already hold)."""

    name: str
    digest: str
    origin: str
    box: list = field(compare=False, hash=False, repr=False)


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, remembered by (path, mtime, size); OSError if unreadable."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    with _lock:
        hit = _SHAS.get(key)
    if hit is None:
        hit = hashlib.sha256(path.read_bytes()).hexdigest()
        with _lock:
            _SHAS[key] = hit
    return hit


def referenced_files(spec: Any) -> list[str]:
    """The workspace-relative files a declaration names: kernel sources, the file part of a
    `path/file.py:function` reference (Python kernels, shape functions)."""
    refs = [k.source for k in spec.kernels if getattr(k, "source", None)]
    if spec.shape_fn and ":" in spec.shape_fn:
        refs.append(spec.shape_fn)
    return [ref.rpartition(":")[0] if ":" in ref else ref for ref in refs]


def workspace_files(root: Path) -> list[str]:
    """What a task needs of the workspace at `root`, as sorted paths relative to it."""
    from opsdk.registry import load_registry
    from opsdk.registry.manifest import ManifestError, read_manifest
    from opsdk.registry.workspace import WORKSPACE_FILE

    found = {WORKSPACE_FILE} if (root / WORKSPACE_FILE).is_file() else set()
    found.update(_tree(root, root / "opdefs"))
    # Its good ops: a broken declaration file elsewhere in it must not stop them (as load_ops).
    for spec in load_registry(root, strict=False).ops_in_workspace(root):
        found.update(f for f in referenced_files(spec) if _inside(root, f))
        for device in _DEVICES:
            folder = root / "build" / device / spec.name
            try:
                manifest = read_manifest(folder, spec.name, device)
            except ManifestError:
                continue  # not built for this device: the task says so if a node needs it
            for name in ("manifest.json", manifest.file):
                if (folder / name).is_file():
                    found.add((folder / name).relative_to(root).as_posix())
    return sorted(found)


def _tree(root: Path, folder: Path) -> list[str]:
    """The files under `folder`, relative to `root`, but hidden ones and Python's caches (which
    importing a Python kernel writes into the task's copy too)."""
    return [rel.as_posix() for rel in (p.relative_to(root) for p in folder.rglob("*"))
            if (root / rel).is_file() and _kept(rel)]


def _kept(rel: Path) -> bool:
    return not any(part.startswith(".") or part == "__pycache__" for part in rel.parts)


def _inside(root: Path, rel: str) -> bool:
    path = (root / rel).resolve()
    return path.is_file() and path.is_relative_to(root.resolve()) and _kept(Path(rel))


def content_digest(root: Path, files: Iterable[str]) -> str:
    """sha256 over the (path, sha256) of each file: the package's name."""
    digest = hashlib.sha256()
    for rel in files:
        digest.update(f"{rel}\0{file_sha256(root / rel)}\n".encode())
    return digest.hexdigest()


def pack(root: Path) -> tuple[str, bytes]:
    """(content digest, gzipped tar) of what a task needs of the workspace at `root`."""
    root = Path(root).resolve()
    files = workspace_files(root)
    size = sum((root / f).stat().st_size for f in files)
    if size > MAX_BYTES:
        raise OpsdkError(f"workspace {root}: the files its ops need on a task come to "
                         f"{size / 2**20:.0f} MB, more than opsdk.dist ships "
                         f"({MAX_BYTES // 2**20} MB); keep large data out of opdefs/")
    buffer = io.BytesIO()
    # dereference: a linked file travels as its content (the digest reads through the link
    # too, and the task refuses links in a package)
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1, dereference=True) as tar:
        for rel in files:
            tar.add(root / rel, arcname=rel, recursive=False)
    return content_digest(root, files), buffer.getvalue()


# ---------------------------------------------------------------------------------- master
_shipped: dict[str, Shipment] = {}  # digest -> the shipment holding its reference
_shipped_on: list = [None]  # the Ray connection those references belong to


def ship(root: str) -> Shipment:
    """The workspace at `root` packed and put in Ray's object store (once per content and
    connection: the reference stays alive here as long as the connection)."""
    from opsdk.dist import engine

    digest, data = pack(Path(root))
    connection = engine.connected()
    with _lock:
        # References of an earlier connection (before engine.shutdown) are void in this one.
        if _shipped_on[0] is not connection:
            _shipped.clear()
            _shipped_on[0] = connection
        hit = _shipped.get(digest)
    if hit is not None:
        return hit
    shipment = Shipment(Path(root).name, digest, str(root), [engine.ray_module().put(data)])
    with _lock:
        return _shipped.setdefault(digest, shipment)


# ---------------------------------------------------------------------------------- task
_unpacked: dict[str, Path] = {}  # digest -> the checked local copy of this process


def cache_folder() -> Path:
    """Where this node keeps unpacked workspaces: a folder of this user's only (the task loads
    libraries from it)."""
    folder = Path(tempfile.gettempdir()) / f"opsdk-workspaces-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    stat = folder.stat()
    if stat.st_uid != os.getuid() or stat.st_mode & 0o022:
        raise OpsdkError(f"{folder} belongs to another user or others may write it; remove it "
                         "(opsdk.dist unpacks op libraries there)")
    return folder


def local_copy(shipment: Shipment) -> Path:
    """The workspace of `shipment` on this node: unpacked once, its digest checked."""
    with _lock:
        hit = _unpacked.get(shipment.digest)
    if hit is not None:
        return hit
    home = cache_folder() / shipment.digest
    root = home / shipment.name
    if not (root.is_dir() and _matches(root, shipment.digest)):
        shutil.rmtree(home, ignore_errors=True)
        _unpack(shipment, home)
        if not _matches(root, shipment.digest):
            raise OpsdkError(f"the workspace {shipment.origin} shipped from the master unpacked "
                             f"to {root} with other contents than packed; the package is damaged")
    with _lock:
        _unpacked[shipment.digest] = root
    return root


def _matches(root: Path, digest: str) -> bool:
    return content_digest(root, sorted(_tree(root, root))) == digest


def _unpack(shipment: Shipment, home: Path) -> None:
    """Unpack next to `home` and rename it into place (another task of this node may be doing
    the same: the first rename wins, the other copy is dropped)."""
    from opsdk.dist import engine

    data = engine.ray_module().get(shipment.box[0])
    staging = Path(tempfile.mkdtemp(prefix=f".{shipment.digest[:16]}-", dir=home.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(staging / shipment.name, filter="data")
        try:
            os.rename(staging, home)
        except OSError:
            if not home.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
