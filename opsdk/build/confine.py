"""Every file the build writes, replaces or deletes stays inside the folder it owns.

`opsdk build` owns the workspace's `build/` folder (and the user's NVRTC cache folder where the
workspace is read-only); nothing else. A symbolic link planted inside it (`build/cpu/<op>/obj`
pointing at a home folder, `last_error.log` pointing at a dotfile) must not make the build write
or delete through it. So every write, replace and delete of the build goes through this module:

- a folder the build writes in must resolve inside the owned folder; a link on the way that
  leads out is refused with an error naming it and saying how to fix it (`ConfinementError`);
- a file is written under a fresh temp name (created exclusively) and renamed over its target:
  a rename replaces a link as a link, never writing through it;
- a file is deleted with unlink, which removes a link, never its target;
- a temp name handed to a compiler is cleared first, so a planted link at that name is gone.

The owned folder itself may be a link (a build folder on a scratch disk): it is where the build
writes. These rules hold against files found in place, not against a process racing the build
while it runs (the build folder is the user's; see docs/trust.md).

    top = owned(root / "build")
    folder = confined_dir(top, top / "cpu" / "my_op" / "obj")   # created, or ConfinementError
    write_file(top, folder / "record.json", b"...")
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Union

from opsdk.registry.errors import OpsdkError

TEMP_PREFIX = ".tmp-"


class ConfinementError(OpsdkError):
    """A path the build would write or delete resolves outside the folder the build owns."""


def owned(folder: Path) -> Path:
    """The owned folder, created when absent (its parent must exist)."""
    folder = Path(folder)
    _not_a_file(folder)
    folder.mkdir(exist_ok=True)
    return folder


def _not_a_file(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise ConfinementError(f"{folder} is a file where opsdk build keeps a folder; remove it "
                               f"(rm {folder}) and build again")


def _not_a_folder(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        raise ConfinementError(f"{path} is a folder where opsdk build writes a file; remove it "
                               f"(rm -r {path}) and build again")


def _is_inside(path: str, top_real: str) -> bool:
    return path == top_real or path.startswith(top_real.rstrip(os.sep) + os.sep)


def check_inside(top: Path, path: Path) -> Path:
    """`path` when it lies (lexically) under `top` and no existing part of it below `top` is a
    link resolving outside `top`; else ConfinementError naming the first such link."""
    top, path = Path(top), Path(path)
    try:
        parts = path.relative_to(top).parts
    except ValueError:
        raise ConfinementError(f"{path}: not inside {top}, the only folder opsdk build writes "
                               "in") from None
    if ".." in parts:
        raise ConfinementError(f"{path}: climbs out of {top}")
    top_real = os.path.realpath(top)
    current = top
    for part in parts:
        current = current / part
        if os.path.islink(current) and not _is_inside(os.path.realpath(current), top_real):
            raise ConfinementError(
                f"{current} is a link to {os.path.realpath(current)}, outside {top}; opsdk build "
                f"writes and deletes only inside {top.name}/: remove the link "
                f"(rm {current}) and build again")
    return path


def confined_dir(top: Path, folder: Path) -> Path:
    """`folder`, created with its parents, after check_inside (a link leading out is refused)."""
    check_inside(top, folder)
    for part in (folder, *folder.parents):
        _not_a_file(part)
        if part == top:
            break
    folder.mkdir(parents=True, exist_ok=True)
    check_inside(top, folder)  # mkdir follows links; check what exists now as well
    return folder


def write_file(top: Path, path: Path, data: Union[bytes, str]) -> Path:
    """Write `data` to `path` under a fresh temp name, then rename it over `path` (a link there is
    replaced as a link, never written through)."""
    folder = confined_dir(top, path.parent)
    _not_a_folder(path)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f"{TEMP_PREFIX}{path.name}-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def replace_file(top: Path, source: Path, target: Path) -> Path:
    """Rename `source` (a file the build made) over `target`, both in confined folders."""
    check_inside(top, source.parent)
    check_inside(top, target.parent)
    _not_a_folder(target)
    os.replace(source, target)
    return target


def remove_file(top: Path, path: Path) -> None:
    """Delete `path` (a link itself, not what it points to; a folder the build's own name holds,
    with what is in it, links removed as links); nothing when absent."""
    check_inside(top, path.parent)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def clear_name(top: Path, path: Path) -> Path:
    """Make sure nothing (a planted link above all) sits at `path` before a compiler writes it."""
    remove_file(top, path)
    return path


def is_plain_file(path: Path) -> bool:
    """A regular file, not a link (to a file or anything else)."""
    return path.is_file() and not path.is_symlink()
