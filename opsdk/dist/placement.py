"""Where a cluster's tasks run: Ray's resources and nodes per job or task.

    ClusterSession(graph, {"ps": 1, "worker": 2}, address="10.0.0.1:6379",
                   placement={"ps": {"node": "10.0.0.1"},
                              "worker": {"num_gpus": 1},
                              "/job:worker/task:1": {"resources": {"big_memory": 1}}})

Without placement Ray puts each task actor where it likes (they ask for no CPU: a task mostly
waits). A job's entry applies to each of its tasks; a task's entry is laid over its job's, key by
key. The keys are Ray's actor options `num_cpus`, `num_gpus`, `memory` (bytes), `resources`
(custom resources of `ray start --resources`) and `accelerator_type`, and opsdk's `node`: the
node that must run the task, by node id or by IP address.

What Ray would leave waiting for ever is refused here, before any actor starts: a node that is
not alive (or an IP address two nodes share), a request no node of the cluster has the
resources for. The declaration is checked when the session is made, the nodes when its tasks
start.

A cluster given in TF1's form (`{"ps": ["10.0.0.1:2222"], "worker": [...]}`) places each task
by its address as well: on the alive Ray node whose IP address or host name is the address's
host (any of them where several nodes share it), else on the node of an IP address the host
name resolves to (DNS, /etc/hosts: at most RESOLVE_S seconds, once per host and process), a
loopback host (`localhost`, `127.0.0.1`, a name resolving to loopback) on the client's own node.
An address that names no alive node places nothing: Ray places the task, and a warning names
the address and the nodes there are (TF1 scripts often carry placeholder hosts). A `node` in
`placement` wins over the address.
"""

from __future__ import annotations

import ipaddress
import math
import numbers
import socket
import threading
from typing import Any, Mapping, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.device_names import DeviceSpec

from opsdk.dist.cluster import ClusterSpec

KEYS = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "node")
# what each key's amount is in a node's resources (ray.nodes()), to say which node could take it
_AMOUNTS = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}


def task_placement(cluster: ClusterSpec, placement: Optional[Mapping]) -> dict[str, dict]:
    """Each task's entry (`placement` checked against `cluster`): task name -> options."""
    if placement is None:
        return {}
    if not isinstance(placement, Mapping):
        raise OpsdkError("placement: expected a dict of job name or task -> Ray options, e.g. "
                         f"{{'worker': {{'num_gpus': 1}}}}; got {placement!r}")
    by_job: dict[str, dict] = {}
    by_task: dict[str, dict] = {}
    for key, options in placement.items():
        if not isinstance(key, str):
            raise OpsdkError(f"placement: key {key!r} must be a job name ('worker') or a task "
                             "('/job:worker/task:1')")
        checked = _options(key, options)
        try:
            if key.startswith("/"):
                by_task[cluster.check_location(key)] = checked
            else:
                cluster.num_tasks(key)  # an error naming the jobs where there is no such job
                by_job[key] = checked
        except OpsdkError as exc:
            raise OpsdkError(f"placement['{key}']: {exc}") from None
    out: dict[str, dict] = {}
    for task in cluster.task_names():
        merged = {**by_job.get(DeviceSpec.parse(task).job, {}), **by_task.get(task, {})}
        if merged:
            out[task] = merged
    return out


def _options(key: str, options: Any) -> dict:
    where = f"placement['{key}']"
    if not isinstance(options, Mapping):
        raise OpsdkError(f"{where}: expected a dict of Ray options ({', '.join(KEYS)}), got "
                         f"{options!r}")
    unknown = sorted(str(k) for k in options if k not in KEYS)
    if unknown:
        raise OpsdkError(f"{where}: unknown option(s) {', '.join(unknown)}; the options are "
                         f"{', '.join(KEYS)}")
    for name in ("num_cpus", "num_gpus", "memory"):
        if name in options:
            _amount(f"{where}['{name}']", options[name], whole=name == "memory")
    if "resources" in options:
        resources = options["resources"]
        if not isinstance(resources, Mapping) or not resources:
            raise OpsdkError(f"{where}['resources']: expected a dict of resource name -> "
                             f"amount, e.g. {{'ps_host': 1}}; got {resources!r}")
        for name, amount in resources.items():
            if not isinstance(name, str) or not name or name in ("CPU", "GPU", "memory"):
                raise OpsdkError(f"{where}['resources']: {name!r} is not a custom resource's "
                                 "name (CPUs, GPUs and memory have options of their own)")
            _amount(f"{where}['resources']['{name}']", amount)
    for name in ("accelerator_type", "node"):
        if name in options and (not isinstance(options[name], str) or not options[name]):
            raise OpsdkError(f"{where}['{name}']: expected a non-empty string, got "
                             f"{options[name]!r}")
    return dict(options)


def _amount(where: str, value: Any, whole: bool = False) -> None:
    kind = numbers.Integral if whole else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not (
            0 <= value < math.inf):
        raise OpsdkError(f"{where}: expected a {'whole ' if whole else ''}number of 0 or more, "
                         f"got {value!r}")


def ray_options(task: str, options: Mapping, nodes: list) -> dict:
    """Ray actor options of `task` from its placement entry, against the cluster's `nodes`
    (ray.nodes()): a `node` becomes a hard node affinity; a request no alive node could take
    is an error naming the nodes there are."""
    alive = [n for n in nodes if n.get("Alive")]
    out = {k: v for k, v in options.items() if k != "node"}
    candidates = alive
    if "node" in options:
        wanted = options["node"]
        candidates = [n for n in alive if wanted in (n.get("NodeID"), n.get("NodeManagerAddress"))]
        if not candidates:
            raise OpsdkError(f"task {task}: placement names node '{wanted}', which is not an "
                             f"alive node of the Ray cluster (nodes: {_describe(alive)})")
        if len(candidates) > 1:
            raise OpsdkError(f"task {task}: placement names node '{wanted}', the address of "
                             f"{len(candidates)} nodes; name one by its id "
                             f"({', '.join(n['NodeID'] for n in candidates)})")
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        out["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
            candidates[0]["NodeID"], soft=False)
    wants = {_AMOUNTS[k]: options[k] for k in _AMOUNTS if options.get(k)}
    wants.update({k: v for k, v in options.get("resources", {}).items() if v})
    if "accelerator_type" in options:
        wants[f"accelerator_type:{options['accelerator_type']}"] = 0.001  # as Ray asks for it
    if not any(all(n.get("Resources", {}).get(r, 0) >= amount for r, amount in wants.items())
               for n in candidates):
        which = (f"node '{options['node']}' does not have" if "node" in options
                 else "no alive node of the Ray cluster has")
        raise OpsdkError(f"task {task}: placement asks for {_wants(wants)}, which {which} "
                         f"(nodes: {_describe(alive)}); Ray would leave the task waiting")
    return out


def actor_options(task: str, options: Optional[Mapping], address: Optional[str], nodes: list,
                  own_node: str) -> tuple[dict, Optional[str]]:
    """(Ray actor options, problem) of `task`: its placement entry laid over what its TF1
    `address` names (address_options), checked by ray_options; the problem, a warning's text,
    where the address names no node."""
    options = dict(options or {})
    problem = None
    if address is not None and "node" not in options:
        placed, problem = address_options(task, address, nodes, own_node)
        resources = {**placed.get("resources", {}), **options.get("resources", {})}
        options = {**placed, **options, **({"resources": resources} if resources else {})}
    return (ray_options(task, options, nodes) if options else {}), problem


def misplaced(task: str, options: Mapping, node_id: str, nodes: list,
              reserved: Optional[Mapping] = None) -> Optional[str]:
    """Why `task`'s actor, found running on node `node_id` with the Ray resources `reserved`
    (what the actor holds; None: not known), does not sit where its Ray actor `options`
    (ray_options) would have put it, or None. A task another client started (the same actor
    name) keeps the place and the reservation that client gave it."""
    node = next((n for n in nodes if n.get("NodeID") == node_id), {})
    where = f"node {node_id[:12]} at {node.get('NodeManagerAddress', '?')}"
    strategy = options.get("scheduling_strategy")
    wanted = getattr(strategy, "node_id", None)
    if wanted is not None and wanted != node_id:
        return f"task {task} runs on {where}, not on node {wanted[:12]} that its placement names"
    wants = {_AMOUNTS[k]: options[k] for k in _AMOUNTS if options.get(k)}
    wants.update({k: v for k, v in options.get("resources", {}).items() if v})
    lacks = {r: a for r, a in wants.items() if node.get("Resources", {}).get(r, 0) < a}
    if lacks:
        return f"task {task} runs on {where}, which lacks {_wants(lacks)} that its placement asks for"
    if reserved is not None:
        short = {r: a for r, a in wants.items() if reserved.get(r, 0) < a - 1e-9}
        if short:
            held = _wants({r: a for r, a in reserved.items() if a}) or "nothing"
            return (f"task {task} runs on {where} holding {held}, not the {_wants(short)} that "
                    "its placement asks for")
    return None


def address_options(task: str, address: str, nodes: list, own_node: str
                    ) -> tuple[dict, Optional[str]]:
    """(placement entry, problem) of `task` from its TF1 address `host:port` against the
    cluster's `nodes` (ray.nodes()); `own_node`: the client's node id. The entry is empty, and
    the problem says why, where the host names no alive node."""
    host = _host(address)
    alive = [n for n in nodes if n.get("Alive")]
    named = [n for n in alive if host in (n.get("NodeManagerAddress"),
                                          str(n.get("NodeManagerHostname", "")).lower())]
    how, resolved = "", frozenset()
    if not named and not _loopback(host) and not _ip(host):  # a name no node reports: DNS's IPs
        answer = resolve(host)
        resolved = answer or frozenset()
        how = (f" (the resolver did not answer within {RESOLVE_S:g} s)" if answer is None
               else f" (it resolves to {', '.join(sorted(answer))})" if answer
               else " (the name does not resolve)")
        named = [n for n in alive if n.get("NodeManagerAddress") in resolved]
    if not named and (_loopback(host) or any(_loopback(ip) for ip in resolved)):
        named = [n for n in alive if n.get("NodeID") == own_node]
    if not named:
        return {}, (f"task {task}: its address '{address}'{how} names no alive node of the Ray "
                    f"cluster (nodes: {_describe(alive)}); Ray places the task")
    if len(named) == 1:
        return {"node": named[0]["NodeID"]}, None
    ips = {n.get("NodeManagerAddress") for n in named}
    if len(ips) == 1:  # nodes sharing the address: any of them, by Ray's resource of that IP
        return {"resources": {f"node:{ips.pop()}": 0.001}}, None
    return {"node": named[0]["NodeID"]}, None  # a host name of several IPs: the first node


def _host(address: str) -> str:
    """The host of `host:port`, `[v6]:port` or a bare host, lower-cased."""
    address = address.strip()
    if address.startswith("["):
        return address[1:].split("]", 1)[0].lower()
    if address.count(":") == 1:
        return address.rsplit(":", 1)[0].lower()
    return address.lower()  # a bare host, or a bare IPv6 address


# The longest wait for a host name's IP addresses: a resolver that does not answer (no network)
# leaves the task to Ray after it.
RESOLVE_S = 2.0
_resolved: dict[str, Optional[frozenset]] = {}
_resolve_lock = threading.Lock()


def resolve(host: str) -> Optional[frozenset]:
    """The IP addresses `host` resolves to (empty: none; None: no answer within RESOLVE_S),
    asked once per process: the lookup runs in a thread of its own, so a hung resolver costs
    the wait and no more."""
    with _resolve_lock:
        if host in _resolved:
            return _resolved[host]
    answer: list = []

    def lookup() -> None:
        try:
            answer.append(frozenset(str(info[4][0]).split("%", 1)[0]
                                    for info in socket.getaddrinfo(host, None)))
        except (OSError, UnicodeError):
            answer.append(frozenset())

    thread = threading.Thread(target=lookup, name=f"opsdk-resolve-{host}", daemon=True)
    thread.start()
    thread.join(RESOLVE_S)
    ips = answer[0] if answer else None
    with _resolve_lock:
        _resolved[host] = ips
    return ips


def _ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _wants(wants: dict) -> str:
    return ", ".join(f"an accelerator of type {name.split(':', 1)[1]}"
                     if name.startswith("accelerator_type:") else f"{amount:g} {name}"
                     for name, amount in wants.items())


def _describe(nodes: list) -> str:
    if not nodes:
        return "none alive"
    return "; ".join(f"{n.get('NodeID', '?')[:12]} at {n.get('NodeManagerAddress', '?')} with "
                     + ", ".join(f"{v:g} {k}" for k, v in sorted(n.get("Resources", {}).items())
                                 if not k.startswith("node:") and k != "object_store_memory")
                     for n in nodes)
