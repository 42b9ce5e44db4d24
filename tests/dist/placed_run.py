"""Run by test_task_placement.py in a process of its own (a process joins one Ray cluster),
against the two-node cluster at argv[1] (node a has the custom resource a_host, node b b_host):
the one-variable model of steady_model.py trained by worker 0 of a ps and two workers, the ps
placed on b by node id, the workers on a by their job's entry, worker 1 on b by its own entry;
until 12 runs went through the steady step's compiled graph, which crosses the nodes. Prints a
JSON line: each node's id, each task's node, the losses, how many runs were compiled.
With `addresses` after the cluster's address: the tasks placed by the addresses of a cluster in
TF1's form instead (by_address)."""

from __future__ import annotations

import json
import sys
import time

import ray

from opsdk.dist import ClusterSession, engine
from opsdk.registry.errors import OpsdkError
from steady_model import PS, WORKER, feeds, model

TASKS = (PS, WORKER, "/job:worker/replica:0/task:1")


def node_of(sess: ClusterSession, task: str) -> str:
    return ray.get(sess.actor(task).info.remote())["ray_node"]


def train(address: str, placement: dict, deadline: float) -> dict:
    cluster = {"ps": 1, "worker": 2}
    g, _, x, i, fetches, init = model(cluster)
    with ClusterSession(g, cluster, address=address, placement=placement,
                        compile_after_s=0, graph_idle_s=3600) as sess:
        sess.run(init)
        losses, on_graph = [], 0
        while on_graph < 12:
            losses.append(float(sess.run(fetches, feeds(x, i), timeout=60)[1]))
            on_graph += any(s.graph is not None for s in sess._steps.values())
            assert time.monotonic() < deadline, "no compiled graph within the time limit"
        return {"tasks": {t: node_of(sess, t) for t in TASKS}, "losses": losses,
                "on_graph": on_graph}


def by_address(address: str) -> dict:
    """A cluster in TF1's form: the ps at node b's address, worker 0 at node a's, worker 1 at
    a placeholder host that names no node. Runs two steps; returns each task's node, the
    warnings, and the error of a second client whose placement names another node for the
    running ps."""
    import warnings

    at = {("a" if n["Resources"].get("a_host") else "b"): n["NodeManagerAddress"]
          for n in ray.nodes() if n["Alive"]}
    cluster = {"ps": [f"{at['b']}:2222"], "worker": [f"{at['a']}:2222", "nowhere:2222"]}
    g, _, x, i, fetches, init = model(cluster)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ClusterSession(g, cluster, address=address, compiled_steps=False) as sess:
            sess.run(init)
            losses = [float(sess.run(fetches, feeds(x, i), timeout=60)[1]) for _ in range(2)]
            tasks = {t: node_of(sess, t) for t in TASKS}
            # a second client asks for the ps on node a, where the running ps is not
            other = ClusterSession(g, cluster, address=address,
                                   placement={"ps": {"node": at["a"]}})
            try:
                other.run(init)
                refused = None
            except OpsdkError as exc:
                refused = str(exc)
            other.close()
    return {"addresses": at, "tasks": tasks, "losses": losses, "refused": refused,
            "warnings": [str(w.message) for w in caught]}


def main(address: str, mode: str = "placement") -> None:
    engine.connect(address)
    deadline = time.monotonic() + 120
    while len([n for n in ray.nodes() if n["Alive"]]) < 2:
        assert time.monotonic() < deadline, "the second node did not join"
        time.sleep(0.5)
    nodes = {name: next(n["NodeID"] for n in ray.nodes()
                        if n["Alive"] and n["Resources"].get(f"{name}_host"))
             for name in ("a", "b")}
    if mode == "addresses":
        print(json.dumps({"nodes": nodes, **by_address(address)}))
        return
    placement = {"ps": {"node": nodes["b"]}, "worker": {"resources": {"a_host": 0.01}},
                 "/job:worker/task:1": {"resources": {"b_host": 0.01}}}
    out = {"nodes": nodes, **train(address, placement, time.monotonic() + 180)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
