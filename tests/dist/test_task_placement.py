"""Placement (opsdk/dist/placement.py): each job's or task's Ray resources or node, checked when
the session is made and against the cluster's nodes when its tasks start; and a two-node cluster
(`ray start` twice on loopback) whose tasks run where they were placed, the steady step compiled
across the two nodes."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from opsdk.dist import ClusterSession, ClusterSpec, placement
from opsdk.dist.placement import (actor_options, address_options, misplaced, ray_options,
                                   task_placement)
from opsdk.registry.errors import OpsdkError
from ray_cli import ray_cluster
from steady_model import LR, PS, WORKER

HERE = Path(__file__).resolve().parent
CLUSTER = ClusterSpec({"ps": 1, "worker": 2})


def test_a_tasks_entry_is_laid_over_its_jobs():
    placed = task_placement(CLUSTER, {
        "worker": {"num_gpus": 1, "resources": {"rack_a": 1}},
        "/job:worker/task:1": {"resources": {"big_memory": 1}},
        "ps": {"node": "10.0.0.1"}})
    assert placed == {
        PS: {"node": "10.0.0.1"},
        WORKER: {"num_gpus": 1, "resources": {"rack_a": 1}},
        "/job:worker/replica:0/task:1": {"num_gpus": 1, "resources": {"big_memory": 1}}}
    assert task_placement(CLUSTER, None) == {}


@pytest.mark.parametrize("placement, message", [
    ([("worker", {})], r"placement: expected a dict of job name or task"),
    ({"chief": {}}, r"placement\['chief'\]: the cluster has no job 'chief' \(jobs: ps, worker\)"),
    ({"/job:worker/task:5": {}}, r"task 5 of job 'worker', which has 2 task\(s\)"),
    ({3: {}}, r"key 3 must be a job name"),
    ({"worker": 1}, r"placement\['worker'\]: expected a dict of Ray options"),
    ({"worker": {"gpus": 1}}, r"unknown option\(s\) gpus; the options are num_cpus, num_gpus"),
    ({"worker": {"num_gpus": -1}}, r"\['num_gpus'\]: expected a number of 0 or more, got -1"),
    ({"worker": {"num_cpus": float("nan")}}, r"\['num_cpus'\]: expected a number"),
    ({"worker": {"num_cpus": True}}, r"\['num_cpus'\]: expected a number"),
    ({"worker": {"memory": 1.5}}, r"\['memory'\]: expected a whole number"),
    ({"worker": {"resources": {}}}, r"\['resources'\]: expected a dict of resource name"),
    ({"worker": {"resources": {"CPU": 1}}}, r"'CPU' is not a custom resource's name"),
    ({"worker": {"resources": {"rack": "1"}}}, r"\['rack'\]: expected a number"),
    ({"worker": {"node": 5}}, r"\['node'\]: expected a non-empty string, got 5"),
])
def test_a_bad_placement_is_refused_when_the_session_is_made(placement, message):
    with pytest.raises(OpsdkError, match=message):
        task_placement(CLUSTER, placement)


def _node(node_id, ip, **resources):
    return {"NodeID": node_id, "NodeManagerAddress": ip, "Alive": True,
            "Resources": {"CPU": 2.0, "memory": 8e9, "object_store_memory": 8e7,
                          f"node:{ip}": 1.0, **resources}}


NODES = [_node("a" * 56, "10.0.0.1", ps_host=1.0), _node("b" * 56, "10.0.0.2", GPU=1.0),
         _node("c" * 56, "10.0.0.3"), {**_node("d" * 56, "10.0.0.4", GPU=4.0), "Alive": False}]


def test_a_node_becomes_a_hard_affinity_by_ip_or_id():
    for wanted in ("10.0.0.1", "a" * 56):
        options = ray_options(PS, {"node": wanted, "num_cpus": 1}, NODES)
        strategy = options.pop("scheduling_strategy")
        assert (strategy.node_id, strategy.soft) == ("a" * 56, False)
        assert options == {"num_cpus": 1}
    assert ray_options(WORKER, {"num_gpus": 1}, NODES) == {"num_gpus": 1}


@pytest.mark.parametrize("options, message", [
    ({"node": "10.0.0.9"}, r"task /job:ps/replica:0/task:0: placement names node '10\.0\.0\.9', "
                           r"which is not an alive node.*aaaaaaaaaaaa at 10\.0\.0\.1 with 2 CPU"),
    ({"node": "10.0.0.4"}, r"not an alive node"),               # a dead node
    ({"num_gpus": 2}, r"asks for 2 GPU, which no alive node of the Ray cluster has \(nodes: "),
    ({"node": "10.0.0.1", "num_gpus": 1},
     r"asks for 1 GPU, which node '10\.0\.0\.1' does not have"),
    ({"resources": {"ps_host": 2}}, r"asks for 2 ps_host"),
    ({"accelerator_type": "H100"}, r"asks for an accelerator of type H100"),
])
def test_what_ray_would_leave_waiting_is_refused_naming_the_nodes(options, message):
    with pytest.raises(OpsdkError, match=message):
        ray_options(PS, options, NODES)


def test_an_address_two_nodes_share_must_be_named_by_id():
    twins = [_node("a" * 56, "127.0.0.1"), _node("b" * 56, "127.0.0.1")]
    with pytest.raises(OpsdkError, match=r"the address of 2 nodes; name one by its id"):
        ray_options(PS, {"node": "127.0.0.1"}, twins)


def _node_of(options):
    return options["scheduling_strategy"].node_id


@pytest.mark.parametrize("address, node", [
    ("10.0.0.2:2222", "b" * 56),        # by IP address
    ("[10.0.0.3]:2222", "c" * 56),      # bracketed
    ("Host-A:2222", "a" * 56),          # by the node's host name, in any case
    ("localhost:2222", "c" * 56),       # a loopback host: the client's own node
    ("127.0.0.1", "c" * 56),            # no port
])
def test_a_tf1_address_places_its_task_on_the_node_it_names(address, node):
    nodes = [{**NODES[0], "NodeManagerHostname": "host-a"}, *NODES[1:]]
    options, problem = actor_options(PS, None, address, nodes, own_node="c" * 56)
    assert problem is None and _node_of(options) == node


def test_a_tf1_address_of_no_alive_node_places_nothing_and_says_so(resolver):
    for address in ("ps0:2222", "10.0.0.4:2222"):  # a placeholder; a dead node's address
        options, problem = actor_options(PS, None, address, NODES, own_node="c" * 56)
        assert options == {}
        assert re.search(rf"task /job:ps/replica:0/task:0: its address '{re.escape(address)}' "
                         r"(\(the name does not resolve\) )?names no alive node of the Ray cluster \(nodes: aaaaaaaaaaaa at "
                         r"10\.0\.0\.1.*\); Ray places the task", problem)


@pytest.fixture
def resolver(monkeypatch):
    """placement's host lookups answered from a table (`answers[host]`: IPs, or "hang")."""
    answers, asked = {}, []

    def getaddrinfo(host, port, *args, **kwargs):
        asked.append(host)
        if answers.get(host) == "hang":
            time.sleep(30)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, 0)) for ip in answers[host]]

    monkeypatch.setattr(placement.socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(placement, "_resolved", {})
    return answers, asked


def test_a_tf1_host_name_no_node_reports_is_looked_up_once(resolver):
    answers, asked = resolver
    answers.update({"ps.example": ["10.0.0.2"], "me.example": ["127.0.1.1"],
                    "far.example": ["192.0.2.7"]})
    for _ in range(2):
        options, problem = actor_options(PS, None, "ps.example:2222", NODES, own_node="c" * 56)
        assert problem is None and _node_of(options) == "b" * 56
    assert asked == ["ps.example"]  # once per name
    options, _ = actor_options(PS, None, "me.example:2222", NODES, own_node="c" * 56)
    assert _node_of(options) == "c" * 56  # resolves to loopback: the client's node
    options, problem = actor_options(PS, None, "far.example:2222", NODES, own_node="c" * 56)
    assert options == {} and "'far.example:2222' (it resolves to 192.0.2.7) names no alive" in problem
    _, problem = actor_options(PS, None, "ps0:2222", NODES, own_node="c" * 56)
    assert "'ps0:2222' (the name does not resolve) names no alive node" in problem
    actor_options(PS, None, "10.0.0.9:2222", NODES, own_node="c" * 56)
    assert "10.0.0.9" not in asked  # an IP address is not looked up


def test_a_resolver_that_does_not_answer_costs_the_wait_and_no_more(resolver, monkeypatch):
    answers, _ = resolver
    answers["slow.example"] = "hang"
    monkeypatch.setattr(placement, "RESOLVE_S", 0.3)
    start = time.monotonic()
    options, problem = actor_options(PS, None, "slow.example:1", NODES, own_node="c" * 56)
    assert time.monotonic() - start < 3
    assert options == {} and "(the resolver did not answer within 0.3 s)" in problem


def test_placement_wins_over_an_address_and_nodes_sharing_one_take_it_by_resource():
    options, _ = actor_options(PS, {"node": "10.0.0.3"}, "10.0.0.2:2222", NODES, "a" * 56)
    assert _node_of(options) == "c" * 56
    options, _ = actor_options(PS, {"resources": {"ps_host": 1}}, "10.0.0.1:2222", NODES, "")
    assert _node_of(options) == "a" * 56 and options["resources"] == {"ps_host": 1}
    twins = [_node("a" * 56, "127.0.0.1", x=1.0), _node("b" * 56, "127.0.0.1")]
    assert address_options(PS, "127.0.0.1:1", twins, "") == (
        {"resources": {"node:127.0.0.1": 0.001}}, None)
    options, _ = actor_options(PS, {"resources": {"x": 1}}, "127.0.0.1:1", twins, "")
    assert options["resources"] == {"node:127.0.0.1": 0.001, "x": 1}


def test_a_running_task_that_does_not_sit_where_placed_is_named():
    assert misplaced(PS, ray_options(PS, {"node": "10.0.0.1"}, NODES), "a" * 56, NODES) is None
    assert misplaced(PS, ray_options(PS, {"node": "10.0.0.1"}, NODES), "b" * 56, NODES) == (
        f"task {PS} runs on node bbbbbbbbbbbb at 10.0.0.2, not on node aaaaaaaaaaaa that its "
        "placement names")
    assert misplaced(PS, {"num_gpus": 1, "resources": {"ps_host": 1}}, "c" * 56, NODES) == (
        f"task {PS} runs on node cccccccccccc at 10.0.0.3, which lacks 1 GPU, 1 ps_host that its "
        "placement asks for")
    assert misplaced(PS, {"num_gpus": 1}, "b" * 56, NODES) is None
    # on the right node, but started by another client that reserved less
    assert misplaced(PS, {"num_gpus": 1}, "b" * 56, NODES, {"GPU": 1.0}) is None
    assert misplaced(PS, {"num_gpus": 1}, "b" * 56, NODES, {}) == (
        f"task {PS} runs on node bbbbbbbbbbbb at 10.0.0.2 holding nothing, not the 1 GPU that its "
        "placement asks for")
    assert misplaced(PS, {"resources": {"ps_host": 1}}, "a" * 56, NODES,
                     {"ps_host": 0.5, "CPU": 1.0}) == (
        f"task {PS} runs on node aaaaaaaaaaaa at 10.0.0.1 holding 0.5 ps_host, 1 CPU, not the 1 "
        "ps_host that its placement asks for")


def test_a_task_another_client_started_without_the_reservation_asked_is_named(ray_engine):
    """The node has the CPU this session's placement asks for; the running ps, started by an
    earlier session of the same cluster_name, reserved none: that is an error, not a task
    silently short of what was asked (the node check alone passed it)."""
    cluster = {"ps": 1, "worker": 1}
    with ClusterSession(None, cluster, cluster_name="reserved-elsewhere") as first:
        first.reconnect()  # starts and introduces the tasks (num_cpus=0)
        with ClusterSession(None, cluster, cluster_name="reserved-elsewhere",
                            placement={"ps": {"num_cpus": 1}}) as second:
            with pytest.raises(OpsdkError, match=(
                    rf"task {re.escape(PS)} runs on node \w+ at \S+ holding nothing, not the 1 "
                    r"CPU that its placement asks for: another client started it under "
                    r"cluster_name 'reserved-elsewhere'")):
                second.reconnect()


def test_a_cluster_spec_keeps_the_addresses_tf1s_form_gave():
    spec = ClusterSpec({"ps": ["h0:2222"], "worker": 2})
    assert spec.addresses() == {PS: "h0:2222"}
    assert ClusterSpec(spec).addresses() == {PS: "h0:2222"} and ClusterSpec(spec) == spec
    assert ClusterSpec({"ps": 1, "worker": 2}).addresses() == {}


def test_a_placement_the_cluster_cannot_take_fails_before_any_step_hangs(ray_engine):
    cluster = {"ps": 1, "worker": 1}
    with ClusterSession(None, cluster, cluster_name="placement-refused",
                        placement={"ps": {"resources": {"no_such_host": 1}}}) as sess:
        with pytest.raises(OpsdkError, match=r"task /job:ps/replica:0/task:0: placement asks "
                                             r"for 1 no_such_host, which no alive node"):
            sess.actor(PS)


def test_tasks_run_where_placed_and_a_compiled_step_crosses_the_nodes():
    # node b at an IP address of its own, so that TF1's addresses can tell the nodes apart
    with ray_cluster({"b_host": 1}, head_resources={"a_host": 1}, extra_ips=("127.0.0.2",)) as (
            address, env):
        runs = [subprocess.run([sys.executable, str(HERE / "placed_run.py"), address, mode],
                               capture_output=True, text=True, timeout=500, env=env, cwd=HERE)
                for mode in ("placement", "addresses")]
    for run in runs:
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    out, tf1 = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    # TF1's form: the ps on b and worker 0 on a by their addresses; worker 1's names no node
    assert tf1["addresses"]["b"] == "127.0.0.2" and tf1["addresses"]["a"] != "127.0.0.2"
    assert tf1["tasks"][PS] == tf1["nodes"]["b"] and tf1["tasks"][WORKER] == tf1["nodes"]["a"]
    no_node = {w for w in tf1["warnings"] if "names no alive node" in w}  # one per session
    assert len(no_node) == 1 and re.match(
        r"task /job:worker/replica:0/task:1: its address 'nowhere:2222' \(.*\) names no alive "
        r"node of the Ray cluster \(nodes: ", no_node.pop())
    assert len(tf1["losses"]) == 2
    assert tf1["refused"].startswith(f"task {PS} runs on node {tf1['nodes']['b'][:12]} at "
                                     f"127.0.0.2, not on node {tf1['nodes']['a'][:12]} that its "
                                     "placement names: another client started it under "
                                     "cluster_name 'default'")
    a, b = out["nodes"]["a"], out["nodes"]["b"]
    assert a != b
    assert out["tasks"] == {PS: b, WORKER: a, "/job:worker/replica:0/task:1": b}
    # 12 runs on the graph (the second one hung while the client kept values read from it)
    assert out["on_graph"] == 12
    v, expected = 1.0, []
    for _ in out["losses"]:
        expected.append(v * v)
        v -= LR * 2 * v
    np.testing.assert_allclose(out["losses"], expected, rtol=1e-6)
