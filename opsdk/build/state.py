"""What `opsdk build` remembers between runs so that a no-op build skips regeneration.

Rendering every template and parsing every declaration costs most of a second; a no-op build
must take less than that in all. So a build records a stamp (path, mtime, size) of everything
generation reads (declarations, templates, the generator's own code) and of what it wrote
(generated/), together with the ops and kernels it found. The next build regenerates only when
that stamp differs; otherwise it takes the op list from the record.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from opsdk.build.confine import write_file

STATE_FILE = ".generate-state.json"
_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_REPO_DIR = _PACKAGE_DIR.parent  # the builtin workspace: its opdefs/ and templates/
_SKIP_PARTS = {"__pycache__", ".pytest_cache", ".hypothesis"}


@dataclass(frozen=True)
class OpKernels:
    """What the build needs of one op: its name and its compiled kernels' sources."""
    name: str
    kernels: tuple[tuple[str, str], ...]  # (device, workspace-relative source), sorted

    def kernel(self, device: str) -> Optional[str]:
        return next((source for d, source in self.kernels if d == device), None)


@dataclass(frozen=True)
class GenerateState:
    """One build's record: the stamps of generation's inputs and outputs, and the ops found."""
    inputs: str
    outputs: str
    ops: tuple[OpKernels, ...]


def inputs_stamp(root: Path) -> str:
    """Stamp of what generation reads: both workspaces' opdefs, templates, opsdk's own code."""
    return _stamp([root / "opdefs", _REPO_DIR / "opdefs", _REPO_DIR / "templates",
                   _PACKAGE_DIR / "codegen", _PACKAGE_DIR / "registry"])


def outputs_stamp(root: Path) -> str:
    """Stamp of generated/ (a hand edit or a deleted file means: regenerate)."""
    return _stamp([root / "generated"])


def _stamp(folders: Iterable[Path]) -> str:
    entries = []
    for folder in dict.fromkeys(folders):
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_PARTS)
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                entries.append((path, st.st_mtime_ns, st.st_size))
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def ops_of(specs: Iterable) -> tuple[OpKernels, ...]:
    """The compiled kernels of the given OpSpecs, in name order."""
    out = []
    for spec in sorted(specs, key=lambda s: s.name):
        kernels = tuple(sorted((k.device, k.source) for k in spec.kernels
                               if k.device in ("cpu", "cuda")))
        out.append(OpKernels(spec.name, kernels))
    return tuple(out)


def read_state(build_dir: Path) -> Optional[GenerateState]:
    """The last record, or None when absent or unreadable (then: regenerate)."""
    try:
        data = json.loads((build_dir / STATE_FILE).read_text())
        ops = tuple(OpKernels(o["name"], tuple((d, s) for d, s in o["kernels"]))
                    for o in data["ops"])
        return GenerateState(str(data["inputs"]), str(data["outputs"]), ops)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(build_dir: Path, state: GenerateState) -> None:
    """Replace the record atomically (a link at its name is replaced, never written through)."""
    data = {"inputs": state.inputs, "outputs": state.outputs,
            "ops": [{"name": o.name, "kernels": [list(k) for k in o.kernels]} for o in state.ops]}
    write_file(build_dir, build_dir / STATE_FILE, json.dumps(data, indent=1, sort_keys=True) + "\n")
