"""The process settings `import opsdk` makes (opsdk/_process.py), and their opt-out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = ("import json, os, opsdk; "
         "print(json.dumps({'omp': os.environ.get('OMP_WAIT_POLICY')}))")


def _import_opsdk(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_WAIT_POLICY", "OPSDK_TUNE_PROCESS")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_openmp_threads_sleep_when_idle_unless_the_user_chose():
    assert _import_opsdk() == {"omp": "PASSIVE"}
    assert _import_opsdk(OMP_WAIT_POLICY="ACTIVE") == {"omp": "ACTIVE"}


def test_the_settings_are_skipped_on_request():
    assert _import_opsdk(OPSDK_TUNE_PROCESS="0") == {"omp": None}
