"""`scaffold_op`: the files `opsdk new NAME` starts an op with, from templates/new/."""

from __future__ import annotations

from pathlib import Path

from opsdk.registry import OpsdkError, load_registry
from opsdk.registry.spec import STOP_GRADIENT

from . import names
from .render import render_template

# template under templates/new/ -> path in the workspace
SCAFFOLD_FILES = (
    ("op.yaml.j2", "opdefs/{name}.yaml"),
    ("kernel_cpu.cc.j2", "opdefs/{name}_cpu.cc"),
    ("kernel_cuda.cu.j2", "opdefs/{name}_cuda.cu"),
    ("test_op.py.j2", "tests/test_{name}.py"),
)


GRAD_SUFFIX = "_grad"
_NOT_FOR_GRAD = ("kernel_cuda.cu.j2", "test_op.py.j2")


def _existing_ops(root: Path) -> tuple[str, ...]:
    """Names the workspace's own ops already take. Builtin names are free: the workspace's op
    lives in its own namespace (`myws::add` next to `opsdk::add`) and wins in its workspace."""
    if not (root / "opdefs").is_dir():
        return ()
    registry = load_registry(root, strict=False)  # a broken declaration must not stop a new op
    return tuple(spec.name for spec in registry.ops_in_workspace(root))


def check_new_op_name(root: Path, name: str) -> None:
    """Raise OpsdkError when `name` cannot name a new op in the workspace at `root`."""
    problem = names.check_op_name(name)
    if problem:
        raise OpsdkError(f"cannot create op '{name}': {problem}")
    if name == STOP_GRADIENT:
        raise OpsdkError(f"cannot create op '{name}': '{STOP_GRADIENT}' is reserved "
                         "(`gradient: stop` means no gradient flows)")
    taken = _existing_ops(root)
    if name in taken:
        raise OpsdkError(f"cannot create op '{name}': an op of that name already exists in this "
                         f"workspace; choose another name")


CUDA_STUB_SUFFIX = "_cuda.cu"


def untouched_stub(root: Path, source: str) -> bool:
    """Whether the workspace file `source` (`opdefs/<name>_cuda.cu`) is still byte for byte the
    CUDA stub `opsdk new <name>` wrote: a kernel nobody wrote, which the build need not compile
    and a wheel must not ship."""
    path = Path(root) / source
    if not path.name.endswith(CUDA_STUB_SUFFIX):
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    name = path.name[:-len(CUDA_STUB_SUFFIX)]
    return text == render_template("new/kernel_cuda.cu.j2", **_template_values(name))


def _template_values(name: str) -> dict:
    is_grad = name.endswith(GRAD_SUFFIX)
    return {"name": name, "namespace": f"opsdk_op_{name}", "header": f"{name}_op.h",
            "is_grad": is_grad, "forward": name[:-len(GRAD_SUFFIX)] if is_grad else None}


def scaffold_op(root: Path, name: str) -> list[Path]:
    """Write the declaration, both kernel bodies and a test of a new op; return the paths written.

    Refuses (OpsdkError) a bad name, a name already used by an op of the workspace, and any file
    that already exists: nothing is overwritten. After it, `opsdk build` succeeds at once and the
    op raises NotImplementedError naming opdefs/NAME_cpu.cc until its body is written.

    >>> scaffold_op(Path("."), "scale")                    # doctest: +SKIP
    [PosixPath('opdefs/scale.yaml'), PosixPath('opdefs/scale_cpu.cc'), ...]
    """
    root = Path(root).resolve()
    check_new_op_name(root, name)
    is_grad = name.endswith(GRAD_SUFFIX)
    # A gradient op is checked through its forward op (gradcheck), and the scaffold gives it no
    # CUDA body: no test file, no .cu file, no `cuda:` line.
    targets = [(template, root / pattern.format(name=name)) for template, pattern in SCAFFOLD_FILES
               if not (is_grad and template in _NOT_FOR_GRAD)]
    existing = [str(path.relative_to(root)) for _, path in targets if path.exists()]
    if existing:
        raise OpsdkError(f"cannot create op '{name}': {', '.join(existing)} already exist(s); "
                         f"remove or rename it first")
    values = _template_values(name)
    written = []
    for template, path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_template(f"new/{template}", **values), encoding="utf-8")
        written.append(path)
    return written

