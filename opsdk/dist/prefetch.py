"""Values pushed ahead, and steady steps that pass values between tasks as Ray arguments.

A step of replicated training starts with the ps sending each worker the variables it reads
and ends with the worker's gradient reaching the ps: with every task started at once, that is
the client's call, the value's message (ps -> worker), the gradient's (worker -> ps) and the
ps's reply in a row, and on Ray a message from inside an actor costs about as much as a round
trip from the client (docs/distributed.md, Speed).

A value is *pushed* when it cannot differ from what the next step would read at its start: the
ps partition writes the variable in the step (a dense `_dist_apply`, an optimizer's
`apply_updates`, an `assign`, `assign_add` or `assign_sub`), and the `variable` node has no
control inputs and no reader on the ps but `_send`s to other tasks. Once every partition of the
ps has succeeded, the ps reads those variables, a replicated one with its round under the
round's lock (so the two agree), and returns them with the step's result, with the rounds.

A *steady* step is the next run of the same step by the same client, with nothing else run
in between: the master passes the pushed values to the workers as arguments of their calls.
The ps runs a variant of its partition without the pushed `_send`s, with the rounds fed where
`_dist_round` stood. What is left of the values between tasks then flows one way (worker ->
ps), so the master starts the tasks in that order, each call taking the values of the calls
before as Ray arguments (`SteadyRendezvous`): Ray hands a value from one call to the next
without waking the client, and nothing waits in a rendezvous. Where values would still go both
ways, or anything else happened (a failed step, another step of the session, a restarted
task, a restore), the step runs in full: every task started at once, values delivered by the
tasks.

A worker thus computes with the value after its previous step's round: the value it would
have read, since the next round needs its gradient. With backup workers a pushed round may be
over when the gradient arrives, which drops it as for any late worker; in asynchronous training
the updates of other workers between a worker's two steps reach it one step later.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from opsdk.runtime.compile.sendrecv import SEND, key_of

from opsdk.dist.cluster import task_of


def pushed_sends(part: Any, task: str) -> tuple[list, list]:
    """The `_send`s of runtime partition `part` (on `task`) whose values may be pushed, and the
    `_dist_round` nodes of their variables (fed with the kept rounds in a steady step)."""
    updated = written(part)
    readers: Counter = Counter()
    for op in part.ops:
        readers.update(part.inputs_of(op))
    sends, sent = [], Counter()
    for op in part.ops:
        inputs = part.inputs_of(op)
        if (op.type != SEND or len(inputs) != 1 or part.controls_of(op)
                or task_of(op.attrs["recv_location"]) == task):
            continue
        source = inputs[0].op
        if (source.type == "variable" and source.name in updated and source in part.ops
                and not part.controls_of(source)):
            sends.append(op)
            sent[inputs[0]] += 1
    # A variable some other node here reads is read at the step's start: not pushed.
    sends = [s for s in sends if readers[part.inputs_of(s)[0]] == sent[part.inputs_of(s)[0]]]
    variables = {part.inputs_of(s)[0].op.name for s in sends}
    rounds = [op for op in part.ops
              if op.type == "_dist_round" and op.attrs["variable"] in variables]
    return sends, rounds


def written(part: Any) -> set[str]:
    """The variables the nodes of `part` write with a new array (values that may be pushed).
    Not a sparse `_dist_apply`: it writes rows in place, which another client's step on the ps
    could do while Ray serialises the returned value (and a table is not worth sending whole
    each step). An optimizer's update writes in place only an array nothing else holds
    (runtime/exec/variable_store.py), so never one being returned."""
    names: set[str] = set()
    for op in part.ops:
        if op.type == "_dist_apply" and not op.attrs["sparse"]:
            names.add(op.attrs["variable"])
        elif op.type in ("assign", "assign_add", "assign_sub"):
            names.add(op.attrs["variable"])
        elif op.type == "apply_updates":
            names.update(n for owned in op.attrs["variables"] for n in owned)
            names.update(op.attrs["scale_variables"])
    return names


def steady_partition(part: Any, sends: list, rounds: list) -> Any:
    """`part` without the pushed `_send`s, its rounds fed (placeholders after its own feeds)."""
    return dataclasses.replace(part, ops=[op for op in part.ops if op not in sends],
                               feeds=[*part.feeds, *(r.outputs[0] for r in rounds)])


def rest_of(op: Any) -> tuple:
    """A `_send`/`_recv`'s rendezvous key without the step id."""
    return key_of(op, 0)[1:]


@dataclasses.dataclass(frozen=True)
class PushPlan:
    """What a partition (of `location`) pushes: (variable, key without step id, receiving task)
    per pushed value, the pushed variables that have rounds (replicated training's), and in its
    steady variant the round fed per placeholder (placeholder name, variable)."""

    location: str = ""
    pushes: tuple = ()
    rounds: tuple = ()
    rounded: tuple = ()


@dataclasses.dataclass(frozen=True)
class StepMode:
    """How a task runs its part of one step (the master's choice, see the module docstring).
    `steady`: values for other tasks are returned (one return per task of `outboxes`), values
    from them arrive as arguments; `pushes`: one return per task of the values pushed to it;
    `rounds`: a last return with the rounds read with them."""

    steady: bool = False
    outboxes: tuple = ()
    pushes: tuple = ()
    rounds: bool = False

    @property
    def returns(self) -> int:
        return 1 + len(self.outboxes) + len(self.pushes) + int(self.rounds)

    def fields(self) -> tuple:
        """The fields in order, as the task's call takes them (`StepMode(*fields)`): a plain
        tuple, where dataclasses.astuple deep-copied every field on every step."""
        return (self.steady, self.outboxes, self.pushes, self.rounds)


class SteadyRendezvous:
    """A steady step's view of its task's rendezvous: values from other tasks come from
    `inbox` (they were the call's arguments), values for other tasks go to `outbox` (by task;
    returned by the call), values within the task meet in its rendezvous as usual."""

    def __init__(self, rendezvous: Any, inbox: dict, outbox: dict):
        self.rendezvous, self.inbox, self.outbox = rendezvous, inbox, outbox

    def send(self, key: tuple, value: Any) -> None:
        task = task_of(key[3])
        if task not in self.outbox:
            self.rendezvous.send(key, value)
            return
        self.rendezvous.count(value)
        self.outbox[task].append((key[1:], value))

    def recv(self, key: tuple, token: Any) -> Any:
        value = self.inbox.get(key[1:], _MISSING)
        return self.rendezvous.recv(key, token) if value is _MISSING else value

    def abort(self, step_id: int, error: BaseException) -> None:
        self.rendezvous.abort(step_id, error)

    def end_step(self, step_id: int) -> None:
        self.rendezvous.end_step(step_id)


_MISSING = object()


def task_order(sends_to: dict[str, tuple]) -> Any:
    """The tasks in an order where each sends only to later ones (`sends_to`: task -> the
    tasks it sends to), or None when they send both ways."""
    order, placed = [], set()
    while len(order) < len(sends_to):
        ready = [t for t in sends_to if t not in placed
                 and not any(t in sends_to[s] for s in sends_to if s not in placed)]
        if not ready:
            return None
        order += ready
        placed.update(ready)
    return order


def read_pushed(variables: Any, plan: PushPlan) -> tuple[dict, dict]:
    """The values to push, by receiving task (lists of (key, value)), and the rounds to keep
    (by variable), each variable with a round read with it under the round's lock."""
    from opsdk.dist.primitives import read_with_round
    from opsdk.dist.task import _host

    read = {v: read_with_round(variables, v) if v in plan.rounded else (None, variables.read(v))
            for v in dict.fromkeys(v for v, _, _ in plan.pushes)}
    by_task: dict[str, list] = {}
    for variable, rest, task in plan.pushes:
        by_task.setdefault(task, []).append((rest, _host(read[variable][1])))
    return by_task, {v: r for v, (r, _) in read.items() if r is not None}
