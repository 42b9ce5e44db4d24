"""Every test file under tests/ is part of a whole run (`make test`, plain `pytest`).

pytest never enters a folder named `dist` unless told otherwise (its default norecursedirs;
pyproject.toml now lists them without it): tests/dist, opsdk.dist's tests, ran only when named on
the command line, and no whole run said so. And since the test folders have no __init__.py, two
test files of one base name stop a whole run at collection: the first test names them."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_no_two_test_files_share_a_name():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, f"test files sharing a name (rename one of each): {shared}"


def test_a_whole_run_collects_every_test_file():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    collected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    files = {str(p.relative_to(ROOT)) for p in TESTS.rglob("test_*.py")}
    # a file or folder skipped at import (a missing optional package: tests/dist without Ray) is
    # named in the skip's line; one that is never entered shows nowhere
    said = out.stdout + out.stderr
    missing = sorted(f for f in files - collected
                     if f not in said and str(Path(f).parent) + "/conftest.py" not in said)
    assert not missing, f"test files a whole run leaves out: {missing}\n{out.stdout[-2000:]}"


def test_each_test_file_and_each_shared_fixture_folder_goes_to_one_worker(request):
    """`make test` runs two pytest-xdist workers with `--dist loadgroup`: each test file is one
    group (its module fixtures made once), and tests/dist and tests/packaging are one group each
    (one Ray instance; one wheel built and installed), as tests/conftest.py marks them."""
    if not request.config.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not loaded: one process runs every test (no groups)")
    wrong = {}
    for item in request.session.items:
        where = item.path.relative_to(TESTS).as_posix()
        want = where.split("/")[0] if where.split("/")[0] in ("dist", "packaging") else where
        marks = [m.args[0] for m in item.iter_markers("xdist_group")]
        # in a worker, xdist names the group in the node id (its scheduler sees only that): the
        # marks must come before its own collection hook reads them
        named = not hasattr(request.config, "workerinput") or item.nodeid.endswith(f"@{want}")
        if marks != [want] or not named:
            wrong[item.nodeid] = marks
    assert not wrong, f"tests in the wrong xdist groups: {dict(list(wrong.items())[:5])}"
