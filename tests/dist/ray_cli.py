"""A Ray cluster of this test's own, started with the `ray` command (`ray start --head` on
loopback, its own temp dir, port and token; more nodes with `ray start --address`) and stopped by
its own means. Used by test_join.py and test_task_placement.py."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def ray_cluster(*extra_nodes: dict, head_resources: dict | None = None,
                extra_ips: tuple = ()) -> Iterator[tuple[str, dict]]:
    """(address, environment for its clients) of a cluster whose head has `head_resources`
    and one more node per `extra_nodes` entry (its custom resources), every node on loopback
    with one CPU: at 127.0.0.1, or the extra nodes at their `extra_ips` entry (another
    loopback address, 127.0.0.2, gives a node an IP address of its own)."""
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        pytest.skip("the ray command is not installed beside this Python")
    folder = tempfile.mkdtemp(prefix="opsdk-head-")
    port = free_port()
    # Token authentication, as Ray enables it for local clusters: the cluster and its client
    # share a token of this test's own.
    token = Path(folder) / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    common = ["--block", "--num-cpus=2",
              "--object-store-memory=80000000", "--disable-usage-stats"]

    def start(args: list, resources: dict | None, ip: str = "127.0.0.1") -> subprocess.Popen:
        more = [f"--node-ip-address={ip}"]
        more += [f"--resources={json.dumps(resources)}"] if resources else []
        return subprocess.Popen([str(ray_cli), "start", *args, *common, *more],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)

    nodes = [start(["--head", f"--port={port}", f"--temp-dir={folder}",
                    "--include-dashboard=false"], head_resources)]
    try:
        deadline = time.monotonic() + 120
        while not answers(port):
            assert nodes[0].poll() is None, nodes[0].stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, "ray start --head did not come up"
            time.sleep(0.5)
        ips = list(extra_ips) + ["127.0.0.1"] * (len(extra_nodes) - len(extra_ips))
        nodes += [start([f"--address=127.0.0.1:{port}"], resources, ip)
                  for resources, ip in zip(extra_nodes, ips)]
        yield f"127.0.0.1:{port}", env
    finally:
        # `ray start --block` stops its node on SIGTERM; each group is one node's alone. The
        # other nodes first, the head last.
        for node in reversed(nodes):
            os.killpg(node.pid, signal.SIGTERM)
            try:
                node.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    assert not answers(port)
