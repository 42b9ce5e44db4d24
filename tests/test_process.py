"""Process settings (opsdk/_process.py): `import opsdk` changes nothing process-wide; they are
made only on request, by `opsdk.tune_process()` or OPSDK_TUNE_PROCESS=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = ("import json, os, opsdk; {call}"
         "print(json.dumps({{'omp': os.environ.get('OMP_WAIT_POLICY')}}))")


def _run(call: str = "", **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_WAIT_POLICY", "OPSDK_TUNE_PROCESS")}
    out = subprocess.run([sys.executable, "-c", PROBE.format(call=call)], env={**clean, **env},
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_opsdk_changes_no_process_setting():
    assert _run() == {"omp": None}


def test_the_settings_are_made_on_request():
    assert _run("opsdk.tune_process(); ") == {"omp": "PASSIVE"}
    assert _run(OPSDK_TUNE_PROCESS="1") == {"omp": "PASSIVE"}


def test_the_users_own_choice_wins():
    assert _run("opsdk.tune_process(); ", OMP_WAIT_POLICY="ACTIVE") == {"omp": "ACTIVE"}


def test_tune_process_says_what_it_set():
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", "import json, opsdk; "
                          "print(json.dumps(opsdk.tune_process()))"], env=clean, check=True,
                         capture_output=True, text=True)
    done = json.loads(out.stdout.strip().splitlines()[-1])
    assert done["OMP_WAIT_POLICY"] == "PASSIVE" and isinstance(done["mallopt"], bool)
