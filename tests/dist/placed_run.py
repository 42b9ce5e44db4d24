"""Run by test_task_placement.py in a process of its own (a process joins one Ray cluster), against
the two-node cluster at argv[1] (node a has the custom resource a_host, node b b_host): the
one-variable model of steady_model.py trained by worker 0 of a ps and two workers,

- "split": the ps placed on b by node id, the workers on a by their job's entry, worker 1 on b
  by its own entry; the steady step keeps Ray task calls (its tasks are on two nodes);
- "together": every task on this client's node, by node id; the steady step is compiled.

Prints a JSON line: each node's id, the client's, and per run each task's node, the losses and
whether the steady step was compiled (and whether compiling it was refused)."""

from __future__ import annotations

import json
import math
import sys
import time

import ray

from opsdk.dist import ClusterSession, engine
from steady_model import PS, WORKER, feeds, model

TASKS = (PS, WORKER, "/job:worker/replica:0/task:1")


def node_of(sess: ClusterSession, task: str) -> str:
    return ray.get(sess.actor(task).info.remote())["ray_node"]


def train(address: str, name: str, placement: dict, deadline: float) -> dict:
    cluster = {"ps": 1, "worker": 2}
    g, _, x, i, fetches, init = model(cluster)
    with ClusterSession(g, cluster, address=address, placement=placement, cluster_name=name,
                        compile_after_s=0) as sess:
        sess.run(init)
        losses, since = [], 0
        # 12 steps, and until 3 ran on a compiled graph or compiling the step was refused
        while len(losses) < 12 or (since < 3 and not any(
                s.compile_at == math.inf for s in sess._steps.values())):
            losses.append(float(sess.run(fetches, feeds(x, i), timeout=60)[1]))
            compiled = any(s.graph is not None for s in sess._steps.values())
            since = since + 1 if compiled else 0
            assert time.monotonic() < deadline, f"{name}: neither compiled nor refused in time"
        return {"tasks": {t: node_of(sess, t) for t in TASKS}, "losses": losses,
                "compiled": compiled,
                "refused": any(s.compile_at == math.inf for s in sess._steps.values())}


def main(address: str) -> None:
    engine.connect(address)
    deadline = time.monotonic() + 120
    while len([n for n in ray.nodes() if n["Alive"]]) < 2:
        assert time.monotonic() < deadline, "the second node did not join"
        time.sleep(0.5)
    nodes = {name: next(n["NodeID"] for n in ray.nodes()
                        if n["Alive"] and n["Resources"].get(f"{name}_host"))
             for name in ("a", "b")}
    client = ray.get_runtime_context().get_node_id()
    split = {"ps": {"node": nodes["b"]}, "worker": {"resources": {"a_host": 0.01}},
             "/job:worker/task:1": {"resources": {"b_host": 0.01}}}
    together = {job: {"node": client} for job in ("ps", "worker")}
    out = {"nodes": nodes, "client": client,
           "split": train(address, "split", split, time.monotonic() + 180),
           "together": train(address, "together", together, time.monotonic() + 180)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
