"""Replicated training: variables on ps tasks, each worker's client with its graph of the model.

    opt = ReplicatedOptimizer(AdagradOptimizer(0.1), replicas_to_aggregate=2)  # synchronous
    train = opt.minimize(loss, global_step=gs)
    # or, changing the gradients in between (clipping, say):
    train = opt.apply_gradients(opt.compute_gradients(loss), global_step=gs)

Between-graph replication: every worker's client builds the model (variables placed on the ps
tasks by `replica_device_setter`), and `minimize` sends each gradient to its variable's ps as a
`_dist_apply` node (opsdk/dist/primitives.py says what it does there):

- `replicas_to_aggregate=0`: asynchronous: each gradient is applied on arrival, atomically per
  variable (the optimizer's update op runs under the variable's lock), none lost.
- `replicas_to_aggregate=N`: synchronous: per round the mean of the first N gradients is applied
  once; with more workers than N (backup workers) the late gradients of a finished round are
  dropped and counted (`accumulator_counts`). A worker's step returns once its round is applied.

A `ShardedEmbedding` splits a table across ps tasks (`mod`: row id % shards); its lookup's
gradient travels as (ids, rows) and is applied on the ps as a sparse update of those rows only.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.frontend.variables import Variable, trainable_variables
from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.train.optimizers import AdamOptimizer, MomentumOptimizer, Optimizer

import opsdk.dist.primitives  # noqa: F401 - registers _dist_apply and friends


class ShardedEmbedding:
    """A [vocab, dim] table split row-wise across `devices` (ps tasks), `mod` strategy."""

    def __init__(self, vocab: int, dim: int, devices: Sequence[str], name: str = "embedding",
                 dtype: str = "float32", scale: float = 0.05, seed: int = 0,
                 graph: Optional[Graph] = None):
        from opsdk.runtime.ir.graph import get_default_graph

        if vocab < len(devices) or not devices:
            raise OpsdkError(f"ShardedEmbedding '{name}': {vocab} rows cannot be split across "
                             f"{len(devices)} device(s)")
        self.graph = graph or get_default_graph()
        self.num_shards = len(devices)
        self.shards: list[Variable] = []
        for i, device in enumerate(devices):
            rows = len(range(i, vocab, self.num_shards))
            # The initial values are drawn on the ps itself: a constant would travel in the
            # exported graph (a million rows of JSON).
            with self.graph.as_default(), self.graph.device(device):
                init = apply_op(builtin_registry(), "random_normal", [],
                                {"shape": [rows, dim], "seed": seed * 1000 + i + 1,
                                 "stddev": scale, "dtype": dtype}, name=f"{name}/init_{i}")
                self.shards.append(Variable(init, name=f"{name}/shard_{i}"))
        self.lookups: list[tuple[Variable, Tensor, Tensor]] = []  # (shard, ids there, rows)

    def lookup(self, ids: Tensor) -> Tensor:
        """Rows at `ids` (int tensor of shape [k]): each shard receives only its ids."""
        g = self.graph
        positions, rows = [], []
        with g.as_default():
            for i, shard in enumerate(self.shards):
                split = g.create_op("_dist_partition_ids", [ids],
                                    {"num_shards": self.num_shards, "shard": i},
                                    [((None,), "int64"), ((None,), "int64")],
                                    name=f"{shard.name}/ids")
                local, where = split.outputs
                with g.device(shard.op.device):
                    got = apply_op(builtin_registry(), "gather", [shard.value(), local],
                                   {"axis": 0}, name=f"{shard.name}/lookup")
                positions.append(where)
                rows.append(got)
                self.lookups.append((shard, local, got))
            dim = self.shards[0].shape[1]
            out = g.create_op("_dist_stitch", [*positions, *rows], {"num_shards": self.num_shards},
                              [((None, dim), self.shards[0].dtype)], name="embedding_stitch")
        return out.outputs[0]


class ReplicatedOptimizer:
    """An optimizer's updates applied on the ps tasks for replicated training (see above)."""

    def __init__(self, optimizer: Optimizer, replicas_to_aggregate: int = 0,
                 total_num_replicas: Optional[int] = None):
        kind = type(optimizer)
        plain = (kind._reads is Optimizer._reads and kind._scalings is Optimizer._scalings
                 and kind._update is Optimizer._update and not optimizer._attrs())
        if not plain and kind not in (MomentumOptimizer, AdamOptimizer):
            raise OpsdkError(f"ReplicatedOptimizer: {type(optimizer).__name__} is not supported "
                             "(use GradientDescentOptimizer, MomentumOptimizer, "
                             "AdagradOptimizer, RMSPropOptimizer or AdamOptimizer)")
        if replicas_to_aggregate < 0:
            raise OpsdkError("ReplicatedOptimizer: replicas_to_aggregate must be >= 0 (0: "
                             "asynchronous)")
        self.optimizer = optimizer
        self.replicas = replicas_to_aggregate
        self.total = total_num_replicas or replicas_to_aggregate
        self._powers: dict[str, list[str]] = {}  # Adam: variable -> its beta powers

    def compute_gradients(self, loss: Tensor, var_list: Optional[Sequence[Variable]] = None,
                          **options: Any) -> list[tuple[Optional[Tensor], Variable]]:
        """(gradient or None, variable) for each variable of `var_list` (default: the loss
        graph's trainable variables): the wrapped optimizer's compute_gradients, with its
        options."""
        return self.optimizer.compute_gradients(loss, var_list, **options)

    def apply_gradients(self, grads_and_vars: Sequence[tuple[Optional[Tensor], Variable]],
                        global_step: Optional[Variable] = None,
                        name: str = "replicated_train") -> Operation:
        """The train op of one worker: each gradient sent to its variable's ps task, applied
        there as the module docstring says (a None gradient is skipped)."""
        pairs = [(grad, var) for grad, var in grads_and_vars if grad is not None]
        if not pairs:
            raise OpsdkError(f"{name}: no gradient reaches any variable")
        return self._train_op(pairs[0][1].graph, pairs, [], global_step, name)

    def minimize(self, loss: Tensor, global_step: Optional[Variable] = None,
                 var_list: Optional[Sequence[Variable]] = None,
                 embeddings: Sequence[ShardedEmbedding] = (), name: str = "replicated_train"
                 ) -> Operation:
        """The train op of one worker: its gradients sent to their variables' ps tasks; the
        lookups of `embeddings` sent as (ids, rows) to the shards they read."""
        g = loss.graph
        sparse = [entry for e in embeddings for entry in e.lookups]
        shards = {id(s) for s, _, _ in sparse}
        dense = [v for v in (var_list if var_list is not None else trainable_variables(g))
                 if id(v) not in shards]
        grads = gradients(loss, [*dense, *(rows for _, _, rows in sparse)])
        return self._train_op(
            g, [(grad, var) for grad, var in zip(grads, dense) if grad is not None],
            [(shard, ids, grad) for (shard, ids, _), grad in zip(sparse, grads[len(dense):])
             if grad is not None], global_step, name)

    def _train_op(self, g: Graph, dense: list, sparse: list,
                  global_step: Optional[Variable], name: str) -> Operation:
        updates = []
        with g.as_default(), g.name_scope(name):
            for grad, var in dense:
                updates.append(self._update(g, var, [grad], sparse=False))
            for shard, ids, grad in sparse:
                updates.append(self._update(g, shard, [ids, grad], sparse=True))
            if not updates:
                raise OpsdkError(f"{name}: no gradient reaches any variable")
            if global_step is not None:
                # counted once the step's gradients have reached their variables, as
                # TensorFlow's apply_gradients does: a worker that dies before they all did
                # leaves no count behind that its variables' rounds lack
                applies = [wait.inputs[0].op for wait in updates]
                updates.append(self._update(g, global_step, [], sparse=False, counter=True,
                                            after=applies))
            return g.create_op("no_op", [], {}, [], name=name, control_inputs=updates)

    def _update(self, g: Graph, var: Variable, grad: list, sparse: bool,
                counter: bool = False, after: Sequence[Operation] = ()) -> Operation:
        opt = self.optimizer
        if not counter:
            with g.device(var.op.device or None):  # slots live beside their variable
                opt._create_slots(var)
        slots = [] if counter else [opt._slot_vars[(var.op.name, s)].name for s, _ in opt._slots]
        recipe = {} if counter else self._recipe(g, var)
        base = var.op.name.replace("/", "_")
        with g.device(var.op.device or None):
            round_op = g.create_op("_dist_round", [], {"variable": var.op.name},
                                   [((), "int64")], name=f"{base}/round")
            # The round and the value are read at the start of the same step on the ps; a
            # round finishing between the two reads (only possible with backup workers) credits
            # one gradient to the newer round. (A control edge round -> variable would close
            # that window, but a graph file must hold a variable before its initializer, which
            # a control input on the variable node can reorder.)
            attrs = {"variable": var.op.name, "slots": slots,
                     "update_op": "" if counter else opt._op, "hypers": [],
                     "replicas": self.replicas, "sparse": sparse, **recipe}
            apply = g.create_op("_dist_apply", [round_op.outputs[0], *grad], attrs,
                                [((2,), "int64")], name=f"{base}/apply", control_inputs=after)
            # The wait for the round runs apart, after every contribution of the step on the
            # task (opsdk/dist/partitions.py orders them; primitives.py says why).
            return g.create_op("_dist_wait", [apply.outputs[0]], {"variable": var.op.name}, [],
                               name=f"{base}/wait")

    def _recipe(self, g: Graph, var: Variable) -> dict:
        """How the ps calls the update op for `var`: its numeric hyperparameters with the
        gradient's place among them, the op's attrs, the variables it reads after the slots
        and the ones scaled after each update (Adam's powers, kept per variable on its ps)."""
        opt = self.optimizer
        hypers = [_float(h, opt) for h in opt._hypers()]
        recipe = {"hypers": hypers, "grad_at": len(hypers), "op_attrs": [], "reads": [],
                  "scalings": []}
        if isinstance(opt, MomentumOptimizer):  # apply_momentum(var, accum, lr, grad, momentum)
            recipe.update(hypers=[hypers[0], _float(opt.momentum, opt)], grad_at=1,
                          op_attrs=[["use_nesterov", bool(opt.use_nesterov)]])
        elif isinstance(opt, AdamOptimizer):
            if var.op.name not in self._powers:
                self._powers[var.op.name] = _powers(g, var, opt)
            powers = self._powers[var.op.name]
            recipe.update(reads=powers, scalings=[[powers[0], float(opt.beta1)],
                                                  [powers[1], float(opt.beta2)]])
        return recipe


def _powers(g: Graph, var: Variable, opt: AdamOptimizer) -> list[str]:
    """Adam's beta1 ** t and beta2 ** t of one variable, beside it on its ps."""
    made = []
    with g.as_default(), g.device(var.op.device or None):
        for label, beta in (("beta1_power", opt.beta1), ("beta2_power", opt.beta2)):
            made.append(Variable(np.asarray(beta, var.dtype), name=f"{var.op.name}/{opt._name}/{label}",
                                 trainable=False).name)
    return made


def _float(value: Any, opt: Optimizer) -> float:
    if isinstance(value, (int, float, np.floating, np.integer)):
        return float(value)
    raise OpsdkError(f"ReplicatedOptimizer: {type(opt).__name__}'s hyperparameters must be "
                     f"numbers, got {value!r}")
