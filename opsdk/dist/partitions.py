"""A partition's journey from the master to its task: exported graph, op checks, plan.

The master sends each task its partition as the project's graph format (io/serialize) together
with a digest per declared op it uses and the user workspaces those ops come from, packed
(opsdk/dist/shipping.py). The task resolves the ops in its own builtin registry and in its
unpacked copies of those workspaces, and refuses the partition when its declaration of an op
digests differently (it would compute something else) or when an op's kernel cannot be loaded
there, naming the op, the task and both digests.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable

from opsdk.registry.errors import OpsdkError

from opsdk.dist.shipping import file_sha256, referenced_files

def op_digest(spec: Any) -> str:
    """sha256 over an op's qualified name, its declaration file and the files it names (kernel
    sources, Python kernels, shape functions): what decides its results."""
    digest = hashlib.sha256(spec.qualified_name.encode())
    for rel in [spec.file, *referenced_files(spec)]:
        try:
            part = file_sha256(Path(spec.workspace) / rel)
        except OSError:
            part = "<missing>"
        digest.update(f"{rel}\0{part}\n".encode())
    return digest.hexdigest()


def op_digests(ops: Iterable[Any]) -> dict[str, str]:
    """Qualified op name -> digest for every declared op among `ops`."""
    return {op.spec.qualified_name: op_digest(op.spec) for op in ops if op.spec is not None}


def workspace_roots(ops: Iterable[Any]) -> tuple[str, ...]:
    """The workspaces (other than the builtin one) that declared some of `ops`."""
    from opsdk.registry.workspace import BUILTIN_ROOT

    roots = {str(Path(op.spec.workspace).resolve()) for op in ops if op.spec is not None}
    return tuple(sorted(roots - {str(Path(BUILTIN_ROOT).resolve())}))


def registries(workspaces: tuple) -> list:
    """The registries a task resolves ops in: each workspace's good ops (a broken declaration
    file elsewhere in it does not stop them, as with load_ops) and the builtin ones."""
    from opsdk.registry import load_registry

    return [load_registry(Path(w), strict=False) for w in workspaces] or [load_registry(None)]


def check_ops(task: str, graph: Any, digests: dict[str, str]) -> None:
    """Refuse a partition whose ops this task declares differently (or not at all)."""
    for op in graph.operations:
        if op.spec is None:
            continue
        name = op.spec.qualified_name
        want = digests.get(name)
        have = op_digest(op.spec) if want is not None else None
        if want is not None and have != want:
            raise OpsdkError(
                f"task {task}: op '{name}' (node '{op.name}') is declared differently here "
                f"({op.spec.workspace / op.spec.file}, digest {have[:16]}) than on the master "
                f"(digest {want[:16]}); the partition is refused rather than computing something "
                f"else. {_remedy(op.spec)} (docs/distributed.md, Op libraries)")


def _remedy(spec: Any) -> str:
    from opsdk.registry.spec import BUILTIN_NAMESPACE

    if spec.namespace == BUILTIN_NAMESPACE:
        return "Builtin ops come from the opsdk installed on each node: install the same version"
    return ("The workspace's files changed on the master after the step was compiled: load its "
            "ops again, rebuild the graph and run it from a new ClusterSession")


def waits_after_contributions(graph: Any) -> None:
    """Order every `_dist_wait` of a partition after every `_dist_apply` in it: a step then
    contributes all its gradients on the task before it waits for any round
    (opsdk/dist/primitives.py says why)."""
    applies = [op for op in graph.operations if op.type == "_dist_apply"]
    for op in graph.operations:
        if op.type == "_dist_wait":
            for apply in applies:
                op.add_control_input(apply)


def build_partition(task: str, workspaces: tuple, graph_text: str, feeds: list, fetches: list,
                    targets: list, digests: dict) -> Any:
    """Import, check and lower one partition on its task."""
    from opsdk.runtime.compile.pipeline import plan_for_partition
    from opsdk.runtime.io.serialize import import_graph
    from opsdk.runtime.compile.program import PlanOptions

    import opsdk.dist.primitives  # noqa: F401 - the primitives replicated training adds
    from opsdk.dist.task import Partition

    try:
        graph = import_graph(graph_text, registries(workspaces))
    except OpsdkError as exc:
        raise OpsdkError(f"task {task} cannot load its partition: {exc}") from None
    check_ops(task, graph, digests)
    waits_after_contributions(graph)
    try:
        plan = plan_for_partition(graph, list(feeds), list(fetches), list(targets),
                                  PlanOptions(default_task=task))
    except OpsdkError as exc:
        raise OpsdkError(f"task {task} cannot run its partition: {exc}") from None
    receivers = sum(1 for op in graph.operations if op.type in ("_recv", "_dist_wait"))
    return Partition(plan, [graph.get_tensor(name) for name in feeds], list(fetches), receivers)
