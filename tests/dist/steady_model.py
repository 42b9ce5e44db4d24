"""The one-variable model that tests/dist/test_prefetch.py and test_compiled.py train: small
enough that every step's loss is known in closed form."""

from __future__ import annotations

import numpy as np

from opsdk.dist import ReplicatedOptimizer, replica_device_setter
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, constant, placeholder
from opsdk.runtime.train.optimizers import GradientDescentOptimizer

PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"
LR = 0.1


def worker(w):
    return f"/job:worker/replica:0/task:{w}"


def model(cluster, worker=0, replicas=1, scale=1.0, read_on_ps=False):
    """(graph, v, x, i, fetches, init). v starts at 1; loss = v * v * x * scale (x fed), so each
    round v -= LR * 2 v x (mean scale over the round's workers). `picked` (a gather of a fed
    index on the worker) fails on a bad index, after the gradient has left. `read_on_ps`: the
    ps also reads v for a value of its own."""
    g = Graph()
    with g.as_default():
        with replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{worker}"):
            v = Variable(np.float32(1.0), name="v")
            x = placeholder("float32", [], name="x")
            i = placeholder("int64", [1], name="i")
            loss = v.value() * v.value() * x * np.float32(scale)
            picked = apply_op(builtin_registry(), "gather",
                              [constant(np.arange(3, dtype=np.float32)), i], {"axis": 0})
            extra = []
            if read_on_ps:
                with g.device("/job:ps/task:0"):
                    extra = [v.value() * np.float32(2.0)]
        train = ReplicatedOptimizer(GradientDescentOptimizer(LR), replicas).minimize(
            loss, var_list=[v])
    return g, v, x, i, [train, loss, picked, *extra], global_variables_initializer(g)


def feeds(x, i, bad=False):
    """x = 1 and an index `picked` takes, or one past its end (`bad`)."""
    return {x: np.float32(1.0), i: np.array([7 if bad else 1], np.int64)}
