"""Joining a cluster by address: `ray start --head` on loopback in a subprocess (its own temp dir
and port), an example run against it, and that cluster stopped by its own means."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ray_cli import ray_cluster

ROOT = Path(__file__).resolve().parents[2]


def test_softmax_example_runs_against_a_cluster_given_by_address():
    with ray_cluster() as (address, env):
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "dist_softmax.py"), "--steps", "20",
             "--address", address],
            capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        assert "global step 20" in run.stdout


def test_the_tasks_outlive_the_worker_process_that_started_them():
    # each worker of a between-graph program is a process of its own; the chief finishing first
    # must not take the ps (which its client started) away from the other worker
    script = [sys.executable, "-m", "opsdk.v1.run", "--as-tensorflow",
              str(Path(__file__).with_name("tf1_worker.py"))]
    with ray_cluster() as (address, env):
        chief = subprocess.run(script + ["0", "5", address], capture_output=True, text=True,
                               timeout=300, env=env, cwd=ROOT)
        assert chief.returncode == 0, chief.stdout[-2000:] + chief.stderr[-3000:]
        worker = subprocess.run(script + ["1", "60", address], capture_output=True, text=True,
                                timeout=300, env=env, cwd=ROOT)
        assert worker.returncode == 0, worker.stdout[-2000:] + worker.stderr[-3000:]
        assert "worker 1: global step 65, w " in worker.stdout, worker.stdout
        trained = [float(v) for v in worker.stdout.split(", w ")[1].split()]
        assert abs(trained[0] - 1.0) < 0.1 and abs(trained[3] - 4.0) < 0.1, trained
        # both clients are gone; the tasks and their variables stay until end_tasks
        reader = subprocess.run(script + ["1", "0", address, "--end-tasks"],
                                capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
        assert reader.returncode == 0, reader.stdout[-2000:] + reader.stderr[-3000:]
        assert reader.stdout.split(", w ")[1] == worker.stdout.split(", w ")[1]
