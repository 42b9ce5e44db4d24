"""`opsdk list [--all]`: the ops of the workspace, their dtypes, devices and gradients."""

from __future__ import annotations

import argparse
from .common import print_table, workspace_root


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `list` parser."""
    p = subparsers.add_parser("list", help="list the ops of the workspace",
                              description="List the workspace's ops (and with --all the builtins).")
    p.add_argument("--all", action="store_true", help="include the builtin ops")
    return p


def run(args: argparse.Namespace) -> int:
    """Print one row per op; builtins only as a count unless --all."""
    from ..registry import load_registry

    root = workspace_root(args)
    registry = load_registry(root)
    specs = [registry.get(name) for name in sorted(registry.names())]
    own = sorted(registry.ops_in_workspace(root), key=lambda s: s.name)
    shown = specs if args.all else own
    rows = [(s.name, dtype_summary(s), ", ".join(s.devices) or "-", s.gradient or "-")
            for s in shown]
    title = f"{len(shown)} op(s)" + ("" if args.all else f" in {root}")
    print_table(title, ("op", "dtypes", "devices", "gradient"), rows)
    builtins = len(specs) - len(own)
    if not args.all and builtins:
        print(f"(+ {builtins} builtin ops; `opsdk list --all` shows them)")
    return 0


def dtype_summary(spec) -> str:
    """`T: float32, float64` per type attr (a dtype group's name when the list is one), else the
    fixed dtypes of the inputs."""
    if spec.type_attrs:
        return "; ".join(f"{ta.name}: {_allowed_text(ta.allowed)}" for ta in spec.type_attrs)
    fixed = dict.fromkeys(t.dtype for t in (*spec.inputs, *spec.outputs))
    return ", ".join(fixed) or "-"


def _allowed_text(allowed: tuple[str, ...]) -> str:
    from ..registry.dtypes import DTYPE_GROUPS

    for group, members in DTYPE_GROUPS.items():
        if set(allowed) == set(members):
            return group
    return ", ".join(allowed)
