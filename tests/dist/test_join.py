"""Joining a cluster by address: `ray start --head` on loopback in a subprocess (its own temp dir
and port), an example run against it, and that cluster stopped by its own means."""

from __future__ import annotations

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

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_softmax_example_runs_against_a_cluster_given_by_address():
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        pytest.skip("the ray command is not installed beside this Python")
    folder = tempfile.mkdtemp(prefix="opsdk-head-")
    port = _free_port()
    # Token authentication, as Ray enables it for local clusters: the cluster and its client
    # share a token of this test's own.
    token = Path(folder) / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    head = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", f"--port={port}",
         "--node-ip-address=127.0.0.1", f"--temp-dir={folder}", "--include-dashboard=false",
         "--num-cpus=2", "--object-store-memory=80000000", "--disable-usage-stats"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not _answers(port):
            assert head.poll() is None, head.stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, "ray start --head did not come up"
            time.sleep(0.5)
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "dist_softmax.py"), "--steps", "20",
             "--address", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        assert "global step 20" in run.stdout
    finally:
        # `ray start --block` stops its cluster on SIGTERM; the group is this cluster's alone.
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    assert not _answers(port)
