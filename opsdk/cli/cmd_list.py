"""`opsdk list [--all]`: the ops of the workspace, their dtypes, devices and gradients."""

from __future__ import annotations

import argparse
import sys

from .common import error_text, print_table, workspace_root

EXAMPLES = """\
opsdk list                       # the workspace's ops
opsdk list --all                 # with the builtin ops (works outside a workspace too)
opsdk -C ~/my_ops list           # another workspace's ops"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `list` parser."""
    p = subparsers.add_parser("list", help="list the ops of the workspace",
                              description="List the workspace's ops (and with --all the builtins).")
    p.add_argument("--all", action="store_true", help="include the builtin ops")
    return p


def run(args: argparse.Namespace) -> int:
    """Print one row per op (`namespace::name`); builtins only as a count unless --all. Ops the
    workspace's ops shadow are noted. Declaration errors come first, one `FILE:LINE: error: ...`
    line each (exit 1), the good files' ops listed all the same."""
    from ..registry import OpDefErrors, load_registry

    root = _root_for_all(args) if args.all else workspace_root(args)
    registry = load_registry(root, strict=False)
    if registry.errors:
        print(error_text("list", OpDefErrors(list(registry.errors))), file=sys.stderr)
    own = registry.ops_in_workspace(root) if root is not None else []
    shown = list(registry) if args.all else own
    rows = [(s.qualified_name, dtype_summary(s), ", ".join(s.devices) or "-", s.gradient or "-")
            for s in shown]
    where = f" in {root}" if not args.all else ""
    print_table(f"{len(shown)} op(s){where}, namespace '{registry.namespace}'",
                ("op", "dtypes", "devices", "gradient"), rows)
    builtins = len(registry) - len(own)
    if not args.all and builtins:
        print(f"(+ {builtins} builtin ops in 'opsdk::'; `opsdk list --all` shows them)")
    for note in shadow_notes(registry, own):
        print(note)
    if registry.errors:
        print(f"opsdk list: {len(registry.errors)} declaration error(s) (above); their ops are "
              "not listed", file=sys.stderr)
        return 1
    return 0


def _root_for_all(args: argparse.Namespace):
    """--all outside any workspace lists the builtin ops alone (error messages send users to
    `opsdk list` for them); -C DIR must still be a workspace."""
    from ..registry import OpsdkError

    try:
        return workspace_root(args)
    except OpsdkError:
        if args.workspace is not None:
            raise
        return None


def shadow_notes(registry, own) -> list[str]:
    """One line per workspace op that has a builtin op's name: which one a bare name means."""
    notes = []
    for spec in own:
        builtin = f"opsdk::{spec.name}"
        if spec.namespace != "opsdk" and builtin in registry.qualified_names():
            notes.append(f"note: in this workspace '{spec.name}' means {spec.qualified_name}; "
                         f"the builtin op is '{builtin}'")
    return notes


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
