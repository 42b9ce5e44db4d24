"""`opsdk new NAME`: scaffold a declaration and kernel bodies for a new op."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..registry.errors import OpsdkError
from .common import workspace_root

EXAMPLES = """\
opsdk new scaled_square          # opdefs/scaled_square.yaml and its kernel files
opsdk -C ~/my_ops new box_sum    # in another folder (made a workspace)"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `new` parser."""
    p = subparsers.add_parser("new", help="start a new op",
                              description="Write opdefs/NAME.yaml and opdefs/NAME_cpu.cc to edit.")
    p.add_argument("name", help="the op's name: lowercase letters, digits and _")
    return p


def run(args: argparse.Namespace) -> int:
    """Scaffold the op, then say what to do next."""
    from ..codegen.scaffold import scaffold_op

    root = _target_root(args)
    created = scaffold_op(root, args.name)
    for path in created:
        print(f"created {_show(Path(path), root)}")
    print("\nnext steps:")
    print(f"  1. declare inputs, outputs and shapes in opdefs/{args.name}.yaml")
    print(f"  2. write the kernel body in opdefs/{args.name}_cpu.cc")
    print("  3. run `opsdk build`, then call it from generated/python/ops.py")
    return 0


def _target_root(args: argparse.Namespace) -> Path:
    # A first op may be the one that makes a folder a workspace: then use the current folder.
    if args.workspace is not None:
        root = Path(args.workspace).resolve()
        root.mkdir(parents=True, exist_ok=True)
        return root
    try:
        return workspace_root(args)
    except OpsdkError:
        return Path.cwd()


def _show(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)
