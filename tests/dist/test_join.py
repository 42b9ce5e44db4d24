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
