"""The master, in the client: `ClusterSession` runs a graph placed on the tasks of a cluster.

    cluster = ClusterSpec({"ps": 1, "worker": 2})
    with ClusterSession(graph, cluster, task="/job:worker/task:0") as sess:
        sess.run(train_op, {x: batch})

Per (graph version, fetches, feeds) the master runs the runtime's pipeline with the session's
task as the default task, so every node has a location; the partition pass gives one standalone
graph per location, which the master groups by task, exports and registers on that task's actor
once. A step starts every partition at once, with one call per task that also brings back its
values (a steady step, opsdk/dist/prefetch.py, starts them in the order its values flow, each
call taking the earlier calls' values as Ray arguments; after a few such runs as a Ray compiled
graph, opsdk/dist/compiled.py); the first error (a node's, or a task that died) aborts the step
on every task and is raised naming the task. Nodes with no `/job:` device run on the session's
own task; in a steady step that task's part may run in the client's process instead of its
actor (opsdk/dist/inprocess.py), and nothing else runs in the client.

Several clients may share tasks (between-graph replication: each worker's client builds its own
graph): the task actors are named `opsdk:<cluster_name>:<task>` in Ray, so every ClusterSession
of one cluster name, in this process or another joined to the same Ray cluster, finds the same
actors. Step ids carry a random client id, so their steps never mix in a rendezvous.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from opsdk.registry.errors import OpsdkError, warn_user
from opsdk.runtime.exec.executor import CancelledError, RunToken
from opsdk.runtime.exec.fetches import FetchStructure
from opsdk.runtime.exec.profile import check_counts
from opsdk.runtime.exec.session import SessionConfig, check_feed
from opsdk.runtime.ir.graph import Graph, Operation, get_default_graph

from opsdk.dist.cluster import ClusterSpec, task_of
from opsdk.dist import engine
from opsdk.dist.placement import actor_options, misplaced, task_placement
from opsdk.dist import compiled
from opsdk.dist.errors import TaskUnavailable, failure, is_gone
from opsdk.dist.inprocess import ClientTask, runs_in_client
from opsdk.dist.profile import ClusterProfile
from opsdk.dist.steps import Carry, DistributedStep, build_step

_POLL_S = 0.05            # how often a waiting client checks for close() and Ctrl-C
_ABORT_WAIT_S = 5.0       # how long an abort waits for the tasks' acknowledgements
DEFAULT_STEP_TIMEOUT = 600.0  # seconds; no wait of a distributed step is unbounded


class ClusterSession:
    """Session's `run`/`close`/`with` over the tasks of a cluster (see the module docstring).

    `task`: the task of nodes with no `/job:` device (the worker this client drives).
    `address`: a Ray cluster to join (else RAY_ADDRESS, else the embedded local instance).
    `step_timeout`: seconds any step may take (every Recv and aggregation wait honours it).
    `max_restarts`: how often Ray restarts a task that died.
    `push_values`: a ps sends the variables of a training step's next run at the end of this
    one, off that run's critical path (opsdk/dist/prefetch.py); False reads them at each
    step's start.
    `compiled_steps`: a step run again and again with pushed values runs as a Ray compiled
    graph (opsdk/dist/compiled.py) once its steady runs took `compile_after_s` seconds in all
    (compiling costs 0.2-3 s of slower steps on a small machine: a short run is better off
    without); False keeps Ray's task calls. A compiled graph's tasks and client wait for each
    run in a busy loop (Ray's channels), a core each: a graph whose step has not run for
    `graph_idle_s` seconds is torn down, and compiled again once its steady runs took twice
    the time the last one waited for; and where its runs, timed from one start to the next
    (the client's own work between them included), were not faster than the task calls before
    it, it is torn down, and tried again after 1,000 steady runs, twice as many after each
    further graph that did not pay (opsdk/dist/compiled.py: graph_pays, RETRY_AFTER).
    `placement`: the Ray resources or node of each job's or task's actor (opsdk/dist/placement.py),
    e.g. `{"worker": {"num_gpus": 1}, "ps": {"node": "10.0.0.1"}}`; a cluster in TF1's form
    places each task on the node its address names, where there is one. A task another client
    of the same `cluster_name` started keeps its place: where that is not the one asked for, the
    session's first step is an error.
    `in_process_worker`: steady steps run the session's own task's part in the client's
    process, where that part holds no state and runs on the CPU and the task has no placement
    of its own (opsdk/dist/inprocess.py): one hop and, on a small machine, one busy process
    fewer a step; False keeps every part on its task's actor."""

    def __init__(self, graph: Optional[Graph] = None, cluster: Any = None,
                 task: str = "/job:worker/replica:0/task:0", address: Optional[str] = None,
                 config: Optional[SessionConfig] = None, cluster_name: str = "default",
                 step_timeout: Optional[float] = DEFAULT_STEP_TIMEOUT, max_restarts: int = 3,
                 push_values: bool = True, compiled_steps: bool = True,
                 compile_after_s: float = 2.0, placement: Optional[dict] = None,
                 graph_idle_s: float = 2.0, in_process_worker: bool = True):
        if isinstance(graph_idle_s, bool) or not (  # before anything starts
                isinstance(graph_idle_s, (int, float)) and 0 < graph_idle_s < math.inf):
            raise OpsdkError(f"ClusterSession: graph_idle_s must be a number of seconds above "
                             f"0, got {graph_idle_s!r}")
        self.graph = graph if graph is not None else get_default_graph()
        self.cluster = ClusterSpec(cluster if cluster is not None else {"worker": 1})
        self.task = self.cluster.check_location(task)
        self.placement = task_placement(self.cluster, placement)
        self._addresses = self.cluster.addresses()  # TF1's form: tasks placed by their hosts
        self.config = config or SessionConfig()
        self.options = dataclasses.replace(self.config.plan_options(), default_task=self.task)
        self.step_timeout = step_timeout
        self.engine = engine.connect(address)
        self.cluster_name = cluster_name
        self.max_restarts = max_restarts
        self.push_values = push_values
        self.compiled_steps = compiled_steps
        self.compile_after_s = compile_after_s
        self.graph_idle_s = float(graph_idle_s)
        self.in_process_worker = in_process_worker
        self._local: Optional[ClientTask] = None  # this client's task in its process
        self._task_machine: Optional[str] = None  # the host its actor runs on, once asked
        self._last_step: Optional[DistributedStep] = None  # the step of the last run begun
        self._watcher: Optional[threading.Thread] = None  # lets go of idle graphs; the last
        self._watching = False  # it runs (under _lock: it ends where there is no graph to watch)
        self._closing = threading.Event()  # wakes the watcher to end
        self._pending_warnings: list[str] = []  # from the session's threads, for the next run
        self._client = secrets.randbits(30)
        self._steps_run = 0
        self._steps: dict[tuple, DistributedStep] = {}
        self._actors: dict[str, Any] = {}
        self._incarnations: dict[str, int] = {}
        # Per task the incarnation holding this session's variables: the first one seen, and
        # each one a restore put them back in (checkpoint.save refuses a task restarted since).
        self._trusted: dict[str, int] = {}
        # The tasks that held no variables at this session's last checkpoint or restore: a
        # restart loses nothing there, so checkpoint.save does not refuse one's new incarnation.
        self._empty: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._ended = False  # end_tasks() ran: no task is started again
        self._active: set[RunToken] = set()
        self._in_graph: dict[RunToken, tuple] = {}  # compiled runs in flight: (step, step id)
        # (step, what it pushed) when the last run pushed the values of its step's next run
        # and nothing else has run since (opsdk/dist/prefetch.py); None otherwise.
        self._pushed: Optional[tuple[DistributedStep, Carry]] = None
        self._placed: dict[str, tuple] = {}  # task -> (Ray options, nodes): where it must sit

    # ------------------------------------------------------------------ tasks
    def actor(self, task: str) -> Any:
        """The Ray actor of `task` (created, or found by name, on first use)."""
        handle = self._actors.get(task)  # a step asks for each of its tasks: no parsing then
        if handle is None:
            if self._ended:
                raise OpsdkError("this ClusterSession ended its tasks (end_tasks); create a new "
                                 "session to start them again")
            name = self.cluster.check_location(task)
            handle = self._actors.get(name)
            if handle is None:
                handle = self._start(name)
                self._actors[name] = handle
            self._actors[task] = handle
        return handle

    def _start(self, name: str) -> Any:
        """The actor of task `name`: started with its placement, or found by name where
        another client started it (then _introduce finds whether it sits where this session's
        placement says)."""
        from opsdk.dist.task import start_task

        options = self.placement.get(name)
        address = self._addresses.get(name)
        nodes: list = []
        if options or address:
            ray = engine.ray_module()
            nodes = ray.nodes()
            options, problem = actor_options(name, options, address, nodes,
                                             ray.get_runtime_context().get_node_id())
            if problem:
                warn_user(problem)
        handle = start_task(name, max_restarts=self.max_restarts, name=self._actor_name(name),
                            namespace=_NAMESPACE, placement=options)
        if options:  # checked by _introduce, all tasks at once, when they answer
            self._placed[name] = (options, nodes)
        return handle

    def _introduce(self, wait: bool = False) -> dict[str, int]:
        """Every task of the cluster knows every other; returns their incarnations. With
        `wait`, a task whose actor Ray is still restarting (a restart takes seconds, more on a
        loaded machine) is asked again until it answers or the step timeout (else 60 s) ends."""
        ray = engine.ray_module()
        deadline = time.monotonic() + (self.step_timeout or 60.0)
        while True:
            actors = {t: self.actor(t) for t in self.cluster.task_names()}
            refs = {t: a.set_peers.remote(actors) for t, a in actors.items()}
            where = {t: actors[t].info.remote() for t in self._placed}
            try:
                incarnations = {t: ray.get(r, timeout=self.step_timeout)
                                for t, r in refs.items()}
                infos = {t: ray.get(r, timeout=self.step_timeout) for t, r in where.items()}
                break
            except Exception as exc:
                if (wait and isinstance(exc, ray.exceptions.ActorUnavailableError)
                        and time.monotonic() < deadline):
                    time.sleep(0.2)  # restarting: Ray answers at once that it is not back yet
                    continue
                raise TaskUnavailable(f"the cluster's tasks did not answer: {_reason(exc)}"
                                      ) from None
        for task, info in infos.items():
            options, listed = self._placed[task]
            problem = misplaced(task, options, info["ray_node"], listed, info.get("reserved"))
            if problem:
                raise OpsdkError(f"{problem}: another client started it under cluster_name "
                                 f"'{self.cluster_name}' and it keeps its place; close that "
                                 "client's session first, or give this one another "
                                 "cluster_name")
            del self._placed[task]  # where it runs now; a restart keeps its placement
        for task, incarnation in incarnations.items():
            self._trusted.setdefault(task, incarnation)
        return incarnations

    def _placed_elsewhere(self) -> bool:
        """Whether this client's task must not run in the client's process: the session places
        it (`placement=`), or its TF1 address put its actor on another machine."""
        if self.task in self.placement:
            return True
        if self.task not in self._addresses:
            return False
        if self._task_machine is None:
            self._task_machine = self.engine_info(self.task)["node"]
        return self._task_machine != socket.gethostname()

    def reconnect(self) -> None:
        """Wait until every task answers (a restarted one included) and introduce them again;
        the next step registers the partitions a restarted task lost."""
        with self._lock:
            self._incarnations = self._introduce(wait=True)
            self._pushed = None

    def trusted_incarnation(self, task: str) -> Optional[int]:
        """The incarnation of `task` that holds this session's variables, which
        checkpoint.save checks: a task that restarted since holds none until a restore. None
        where there is nothing to check: before the session's first step, and for a task that
        held no variables at its last checkpoint or restore (a worker, whose restart loses
        nothing; a task given variables after that checkpoint is not guarded until the next)."""
        if self.held_nothing(task):
            return None
        return self._trusted.get(task)

    def held_nothing(self, task: str) -> bool:
        """Whether `task` held no variables at this session's last checkpoint or restore."""
        return task in self._empty

    def note_holders(self, tasks: Any) -> None:
        """After a checkpoint or restore: `tasks` held variables in it, the others none."""
        self._empty = set(self.cluster.task_names()) - set(tasks)

    def trust_tasks(self) -> None:
        """Every task, as it runs now, holds the session's variables (after a restore put them
        back); also introduces the tasks again."""
        with self._lock:
            self._incarnations = self._introduce()
            self._trusted = dict(self._incarnations)
            self._pushed = None

    def restore_checkpoint(self, path: Any, values: dict) -> None:
        """Give each task the variables of `values` it holds (a Saver's restore of checkpoint
        `path`, already read and checked: opsdk/dist/checkpoint.py)."""
        from opsdk.dist.checkpoint import restore_values

        restore_values(self, Path(path), values)

    def forget_pushed(self) -> None:
        """Start the next step in full: variables may have changed other than by the steps of
        this session (a restore). Called by checkpoint.restore."""
        with self._lock:
            self._pushed = None

    # ------------------------------------------------------------------ running
    def run(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
            timeout: Optional[float] = None) -> Any:
        """Compute `fetches` with `feed_dict` values on the cluster; same structure of values
        back. `timeout` (default: the session's step_timeout) bounds every wait of the step."""
        if self._closed:
            raise OpsdkError("ClusterSession.run on a closed session; create a new one")
        structure, feeds, step = self._resolve(fetches, feed_dict)
        if self._pending_warnings:  # said at the caller's line, not in a thread of the session
            with self._lock:
                pending, self._pending_warnings = self._pending_warnings, []
            for message in pending:
                warn_user(message)
        values = self._run_step(step, feeds, timeout if timeout is not None else self.step_timeout)
        return structure.rebuild([values.get(e) for e in structure.elements])

    def _resolve(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]]) -> tuple:
        """(fetch structure, checked feeds by tensor, the step registered on its tasks)."""
        structure = FetchStructure(self.graph, fetches)
        feeds = {}
        for key, value in (feed_dict or {}).items():
            tensor = self.graph.as_graph_element(key)
            if isinstance(tensor, Operation):
                raise OpsdkError(f"cannot feed node '{tensor.name}'; feed one of its tensors")
            feeds[tensor] = check_feed(tensor, value)
        return structure, feeds, self._step(structure.elements, tuple(feeds))

    def profile(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                steps: int = 10, warmup: int = 10, show: bool = True) -> ClusterProfile:
        """Run `fetches` `warmup` times, then `steps` times with every node of every task of
        the step timed (each task times its own), and say where the time went: per task, per
        node, and what a step spends beyond its busiest task's nodes (Ray's calls and values,
        and the tasks' waits on one another). Printed unless `show=False`. The runs are the
        session's own: a training step trains.

        >>> sess.profile(train_op, {x: batch}, steps=20)  # doctest: +SKIP
        """
        check_counts("ClusterSession.profile", steps, warmup)
        for _ in range(warmup):
            self.run(fetches, feed_dict)
        if self._closed:
            raise OpsdkError("ClusterSession.profile on a closed session; create a new one")
        walls: list[float] = []

        def timed_steps() -> None:
            for _ in range(steps):
                start = time.perf_counter()
                self.run(fetches, feed_dict)
                walls.append(time.perf_counter() - start)
        _, timed = self._with_node_timers(fetches, feed_dict, timed_steps, "stop_profile")
        result = ClusterProfile.of(steps, warmup, walls, timed)
        if show:
            print(result)
        return result

    def traced_run(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                   timeout: Optional[float] = None) -> tuple[Any, list]:
        """`run` once with every node of every task of the step timed: (what `run` returns,
        the node runs as (task, node, op type, device, thread, start, end) tuples, the times
        Unix seconds by the clock of the task's machine, threads numbered per task). A TF1
        run with `RunOptions(trace_level=FULL_TRACE)` on a cluster is one of these."""
        if self._closed:
            raise OpsdkError("ClusterSession.traced_run on a closed session; create a new one")
        result, traced = self._with_node_timers(
            fetches, feed_dict, lambda: ClusterSession.run(self, fetches, feed_dict, timeout),
            "stop_trace")  # this class's run: a subclass's may take other arguments
        return result, [(task, *run) for task, runs in traced.items() for run in runs]

    def _with_node_timers(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]],
                          body: Callable[[], Any], stop: str) -> tuple[Any, dict]:
        """body() with every task of the step timing its nodes (and this client's own task,
        whose steady runs happen in this process): (body's value, per task what its `stop`
        method, stop_profile or stop_trace, returned)."""
        tasks = sorted(self._resolve(fetches, feed_dict)[2].by_task)
        ray = engine.ray_module()
        ray.get([self.actor(t).start_profile.remote(self._client) for t in tasks],
                timeout=self.step_timeout)
        local = self._local
        if local is not None:
            local.state.start_profile(self._client)
        try:
            value = body()
        except BaseException:  # the step's error, not a failure to stop the timers, goes up
            _collect_quietly(ray, [getattr(self.actor(t), stop).remote() for t in tasks])
            if local is not None:
                getattr(local.state, stop)()
            raise
        timed = dict(zip(tasks, ray.get([getattr(self.actor(t), stop).remote() for t in tasks],
                                        timeout=self.step_timeout)))
        if local is not None:
            mine = getattr(local.state, stop)()
            if stop == "stop_profile":
                timed[local.task] = _merged(timed.get(local.task, []), mine)
            else:  # the process's threads numbered after the task actor's
                actor = timed.get(local.task, [])
                first = 1 + max((run[3] for run in actor), default=-1)
                timed[local.task] = sorted(
                    actor + [(*run[:3], first + run[3], *run[4:]) for run in mine],
                    key=lambda run: run[4])
        return value, timed

    def _step(self, elements: list, feeds: tuple) -> DistributedStep:
        key = (tuple(elements), frozenset(feeds), len(self.graph.operations))
        with self._lock:
            step = self._steps.get(key)
            if step is None:
                step = build_step(self.graph, elements, feeds, self.options, self.cluster)
                if self.in_process_worker and runs_in_client(step, self.task,
                                                             self._placed_elsewhere()):
                    step.head = self.task
                    if self._local is None:
                        self._local = ClientTask(self.task)
                self._steps[key] = step
            if not self._incarnations:
                self._incarnations = self._introduce()
            if step.registered_for != self._incarnations:
                self._pushed = None
                step.drop_graph()
                step.register(self.actor, self._incarnations, self._client, self.step_timeout,
                              self._local)
        return step

    def _run_step(self, step: DistributedStep, feeds: dict, timeout: Optional[float]) -> dict:
        ray = engine.ray_module()
        token = RunToken(timeout)
        unpaid = None
        with self._lock:
            self._steps_run += 1
            step_id = (self._client << 32) | self._steps_run
            carry = self._take_pushed(step)
            self._active.add(token)
            step.note_cycle(time.perf_counter(), self._last_step is step, self.graph_idle_s)
            self._last_step = step
            graph = self._graph(step) if carry is not None else None
            pays = (None if graph is None
                    else compiled.graph_pays(step.call_cycles, step.graph_cycles))
            if pays:
                step.graph_cycles = []  # the next GRAPH_TRIAL cycles are judged afresh
            elif pays is False:  # task calls were faster: a while of them, longer each time
                unpaid, graph = step.detach_graph(), None
                step.unpaid_graphs += 1
                step.compile_at = step.steady_runs + compiled.RETRY_AFTER * 2 ** (
                    step.unpaid_graphs - 1)
            if graph is not None:  # in use: _watch_idle leaves it
                self._in_graph[token] = (step, step_id)
                step.last_run = time.monotonic()
            step.last_kind = ("graph" if graph is not None else "calls"
                              if carry is not None and not step.compiling and step.graph is None
                              else None)
        if unpaid is not None:
            unpaid.teardown()
        try:
            if graph is not None:
                results, pushed = self._run_compiled(step, graph, step_id, feeds, timeout, carry,
                                                     token)
            else:
                results, pushed = self._run_launched(step, step_id, feeds, timeout, carry, token)
        finally:
            with self._lock:
                self._active.discard(token)
        self._note_pushed(step, step_id, pushed)
        return step.collect(results)

    def _run_launched(self, step: DistributedStep, step_id: int, feeds: dict,
                      timeout: Optional[float], carry: Optional[Carry], token: RunToken
                      ) -> tuple[dict, Any]:
        """One run as Ray task calls: (each task's results, what it pushed for the next run)."""
        ray = engine.ray_module()
        started = time.perf_counter()
        refs, made, pushed, results = step.launch(
            self.actor, step_id, feeds, timeout, carry, self.push_values,
            self._local if step.head is not None else None)
        pending = list(refs)
        try:
            while pending:
                # All at once: one call when the step goes well; a failed task still shows
                # within _POLL_S, and so do close(), Ctrl-C and the deadline.
                ready, pending = ray.wait(pending, num_returns=len(pending), timeout=_POLL_S)
                # In launch order: in a steady step a task's failure fails the calls that took
                # its values too, with its error; the first one names the task it came from.
                for ref in sorted(ready, key=list(refs).index):
                    try:
                        results[refs[ref]] = ray.get(ref)
                    except Exception as exc:
                        raise self._failed(step, step_id, refs[ref], exc) from None
                if token.cancelled or (token.deadline is not None
                                       and time.monotonic() > token.deadline):
                    token.check("distributed step")
        except BaseException as exc:  # a task's error, close(), a deadline, Ctrl-C
            self._abort(step, step_id, str(exc) or type(exc).__name__)
            _collect_quietly(ray, [r for r in made if refs.get(r) not in results])
            raise
        if carry is not None:
            step.steady_seconds += time.perf_counter() - started
        return results, pushed

    def _graph(self, step: DistributedStep) -> Any:
        """The compiled graph of `step`'s steady runs (opsdk/dist/compiled.py), or None where
        they run as Ray task calls: once its steady runs took compile_after_s in all (and at
        least COMPILE_AFTER of them ran) it is compiled in the background (0.2-3 s: Ray makes
        the channels' buffers on every task), the steps going on with task calls meanwhile."""
        if not (self.compiled_steps and self.push_values and step.steady_order is not None):
            return None
        step.steady_runs += 1
        if (step.graph is None and not step.compiling and step.steady_runs >= step.compile_at
                and step.steady_seconds >= self.compile_after_s * 2 ** step.idle_releases):
            step.compiling = True
            threading.Thread(target=self._compile, args=(step, step.generation), daemon=True,
                             name="opsdk-compile").start()
        return step.graph

    def _compile(self, step: DistributedStep, generation: int) -> None:
        """Compile `step`'s graph (a thread of its own); it serves the steady runs after, unless
        the step's tasks changed or the session closed meanwhile."""
        from opsdk.dist.compiled import compile_steady

        graph, ray = None, engine.ray_module()
        try:
            graph = compile_steady(step, self.actor, (self._client, id(step)), self.step_timeout,
                                   self._local if step.head is not None else None)
        except ray.exceptions.RayActorError:
            pass  # a task died: the next step says so, and its restart compiles again
        except Exception as exc:  # noqa: BLE001 - Ray task calls run it instead
            if not self._closed and step.generation == generation:
                with self._lock:  # the step's next run says so
                    self._pending_warnings.append(
                        f"opsdk.dist: this step keeps Ray task calls; compiling it as a Ray "
                        f"compiled graph failed: {_reason(exc)}")
                step.compile_at = math.inf
        with self._lock:
            step.compiling = False
            stale = graph is not None and (self._closed or step.generation != generation)
            if graph is None and step.compile_at != math.inf:
                step.compile_at = step.steady_runs + 100  # no slot free: try again much later
            elif not stale:
                step.graph = graph
                step.last_run = time.monotonic()
                if not self._watching:
                    self._watching = True
                    self._watcher = threading.Thread(target=self._watch_idle, daemon=True,
                                                     name="opsdk-idle-graphs")
                    self._watcher.start()
        if stale:
            graph.teardown()

    def _watch_idle(self) -> None:
        """Tear down every compiled graph whose step has not run for graph_idle_s (a thread of
        its own while the session has graphs): Ray's channels wait in a busy loop, so an idle
        graph holds a core on each of its tasks and the client."""
        while True:
            self._closing.wait(max(min(self.graph_idle_s / 4, 0.25), 0.01))
            now = time.monotonic()
            with self._lock:
                in_use = {id(step) for step, _ in self._in_graph.values()}
                idle = [step.detach_graph(idle=True) for step in self._steps.values()
                        if step.graph is not None and id(step) not in in_use
                        and now - step.last_run > self.graph_idle_s]
                ending = self._closed or not any(s.graph is not None or s.compiling
                                                 for s in self._steps.values())
                if ending:
                    self._watching = False  # _compile starts another with the next graph
            for graph in idle:
                graph.teardown()
            if ending:
                return

    def _run_compiled(self, step: DistributedStep, graph: Any, step_id: int, feeds: dict,
                      timeout: Optional[float], carry: Carry, token: RunToken
                      ) -> tuple[dict, Any]:
        """One steady run on `step`'s compiled graph, as `_run_launched`, the wait blocking in
        Ray (Ctrl-C interrupts it; close() aborts the step on the tasks, which ends it)."""
        from opsdk.dist.compiled import HeadFailed, owned, resolved

        ray = engine.ray_module()
        outputs, keep = [], True  # _run_step put the run in _in_graph
        try:
            try:
                refs = graph.execute(step_id, feeds, timeout, resolved(carry, ray, timeout))
            except HeadFailed as exc:  # a node of the task run here: nothing else started
                token.check("distributed step")  # closed: say so, not what it caused
                raise exc.error from None
            except Exception as exc:  # a graph Ray tore down (a task died), a lost value
                keep = False
                raise self._failed(step, step_id, graph.task_of(exc, graph.order[0]), exc
                                   ) from None
            for task, ref in zip(graph.order, refs):
                left = -1 if token.deadline is None else max(token.deadline - time.monotonic(), 0)
                try:
                    outputs.append(owned(ref.get(timeout=left)))
                except ray.exceptions.RayChannelTimeoutError:
                    keep = False
                    token.cancel("its timeout passed")
                    token.check("distributed step")
                except Exception as exc:
                    token.check("distributed step")  # closed: say so, not what it caused
                    keep = isinstance(exc, ray.exceptions.RayTaskError)  # a node's error
                    task = graph.task_of(exc, task)
                    raise self._failed(step, step_id, task, exc) from None
        except BaseException as exc:  # a task's error, close(), a deadline, Ctrl-C
            keep = keep and not isinstance(exc, KeyboardInterrupt)
            self._abort(step, step_id, str(exc) or type(exc).__name__)
            if not keep:
                step.drop_graph()
            raise
        finally:
            with self._lock:
                self._in_graph.pop(token, None)
                step.last_run = time.monotonic()
            if self._closed:  # close() left the graphs to the run it stopped
                self._drop_graphs()
        return graph.fetched(outputs), graph.carry_of(outputs) if self.push_values else None

    def _take_pushed(self, step: DistributedStep) -> Optional[Carry]:
        """What the previous run pushed for this run of `step`: if it was of the same step,
        pushed, and nothing else ran since or runs now (under _lock)."""
        last, self._pushed = self._pushed, None
        if last is not None and last[0] is step and not self._active:
            return last[1]
        return None

    def _note_pushed(self, step: DistributedStep, step_id: int, pushed: Optional[Carry]
                     ) -> None:
        """After a successful run: its pushed values serve the next run, unless another run
        started meanwhile (it may have changed the variables after they were read)."""
        with self._lock:
            if (pushed is not None and not self._active
                    and step_id == (self._client << 32) | self._steps_run):
                self._pushed = (step, pushed)

    def _failed(self, step: DistributedStep, step_id: int, task: str, exc: BaseException
                ) -> OpsdkError:
        """The error of a failed partition, naming its task (and marking the cluster for a
        liveness check: a restarted task needs its partitions again)."""
        self._incarnations = {}
        ray = engine.ray_module()
        if isinstance(exc, ray.exceptions.RayActorError):
            return TaskUnavailable(f"task {task} died during the step ({_reason(exc)}); the "
                                   "step was aborted on every task")
        return failure(_reason(exc), exc)

    def _abort(self, step: DistributedStep, step_id: int, message: str) -> None:
        """Abort the step on every task and wait (briefly) until each has done so, so that
        nothing of it is left to meet a later step (a dead task does not answer: skipped)."""
        ray = engine.ray_module()
        if self._local is not None:
            self._local.state.abort(step_id, message)
        refs = [self.actor(task).abort.remote(step_id, message) for task in step.tasks]
        ray.wait(refs, num_returns=len(refs), timeout=_ABORT_WAIT_S)

    # ------------------------------------------------------------------ variables
    def variable_values(self) -> dict[str, Any]:
        """Every task's variables, by name (what a checkpoint holds)."""
        ray = engine.ray_module()
        values: dict[str, Any] = {}
        for task in self.cluster.task_names():
            try:
                values.update(ray.get(self.actor(task).variable_values.remote(),
                                      timeout=self.step_timeout))
            except Exception as exc:
                if not is_gone(exc):
                    raise
                raise TaskUnavailable(f"task {task} did not answer: {_reason(exc)}") from None
        return values

    def engine_info(self, task: str) -> dict:
        """What a task's actor says of itself: task, incarnation, pid, node."""
        ray = engine.ray_module()
        return ray.get(self.actor(task).info.remote(), timeout=self.step_timeout)

    def task_stats(self) -> dict[str, dict]:
        """Per task: bytes and values sent to other tasks, partitions registered, steady
        steps run (this client's task: its steady runs in the client's process included)."""
        ray = engine.ray_module()
        stats = {t: ray.get(self.actor(t).stats.remote(), timeout=self.step_timeout)
                 for t in self.cluster.task_names()}
        if self._local is not None:  # the steady runs of this client's task in its process
            here = self._local.state.stats()
            for counter in ("bytes_sent", "values_sent", "steady_steps"):
                stats[self._local.task][counter] += here[counter]
        return stats

    # ------------------------------------------------------------------ lifetime
    def end_tasks(self) -> None:
        """Close the session and end its cluster's tasks (Ray kills their actors): for every
        client of the same `cluster_name`, whose next step fails on a dead task, and with
        them the variables they held. Without it a task lives on after `close()` until the
        program that started it ends (the tasks hold one another's Ray handles to send values),
        as TensorFlow's servers outlive a session; another session of the same `cluster_name`
        finds it with its variables."""
        self.close()
        ray = engine.ray_module()
        with self._lock:
            self._ended = True
            self._actors.clear()
        if not ray.is_initialized():  # Ray was shut down: its tasks went with it
            return
        for task in self.cluster.task_names():
            try:
                handle = ray.get_actor(self._actor_name(task), namespace=_NAMESPACE)
            except ValueError:  # never started, or already ended
                continue
            ray.kill(handle, no_restart=True)

    def _actor_name(self, task: str) -> str:
        return f"opsdk:{self.cluster_name}:{task}"

    def close(self) -> None:
        """Stop the steps in flight on every task (they abort at their next wait)."""
        self._closed = True
        self._closing.set()
        for token in list(self._active):
            token.cancel("the session was closed")
        with self._lock:
            in_graph = list(self._in_graph.values())
        for step, step_id in in_graph:  # their client waits in Ray: the tasks end the step
            self._abort(step, step_id, "the session was closed")
        if not in_graph:
            self._drop_graphs()
        if self._local is not None:
            self._local.close()
        # The watcher ends before close() returns: a thread of the session still running when
        # the program shuts Ray down next may collect garbage holding Ray objects, and a Ray
        # object freed after the shutdown ends the process (Ray: "The core worker has already
        # been shutdown").
        with self._lock:
            watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=RELEASE_JOIN_S)

    def _drop_graphs(self) -> None:
        """Tear down every compiled graph of the session (their tasks' threads come back)."""
        for step in list(self._steps.values()):
            step.drop_graph()

    def __enter__(self) -> "ClusterSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_NAMESPACE = "opsdk"  # the Ray namespace of the task actors (named opsdk:<cluster_name>:<task>)
RELEASE_JOIN_S = 15.0  # close() waits this long for the watcher (a teardown it is in included)


def _reason(exc: BaseException) -> str:
    """The useful part of a Ray error: the remote exception's message, else Ray's text."""
    cause = getattr(exc, "cause", None)
    if cause is not None and not isinstance(cause, type(exc)):
        return str(cause)
    text = str(exc)
    return text.strip().splitlines()[-1] if text.strip() else type(exc).__name__


def _merged(*timings: list) -> list:
    """Node timings ((name, type, device, calls, seconds) rows) of one task, summed by node."""
    totals: dict[tuple, list] = {}
    for rows in timings:
        for *node, calls, seconds in rows:
            total = totals.setdefault(tuple(node), [0, 0.0])
            total[0] += calls
            total[1] += seconds
    return [(*node, calls, seconds) for node, (calls, seconds) in totals.items()]


def _collect_quietly(ray: Any, refs: list) -> None:
    """Fetch the results of the other tasks of an aborted step and drop them: they fail too (the
    abort, or the first error relayed), and Ray prints every failed result nobody fetched as an
    "Unhandled error" with its traceback, burying the one error the step raised. Bounded: a task
    that does not answer within the abort's wait is left to Ray."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=_ABORT_WAIT_S)
    for ref in ready:
        try:
            ray.get(ref)
        except Exception:  # noqa: BLE001 - consequences of the error already raised
            pass
