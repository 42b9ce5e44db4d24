"""`make bench`'s driver (bench/run_all.py) and its headline table (bench/headline.py): a hung
script is killed at its time limit with its workers, and every headline figure gets a row, saying
"absent" and why where its measurement is missing. See bench/README.md."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str):
    """A script of bench/ as a module (bench/ is no package; its scripts import each other)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run_all():
    return load("run_all")


@pytest.fixture(scope="module")
def headline():
    return load("headline")


HANG = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("started", flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of a killed parent is reaped by init; until then it is a zombie.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_hung_script_is_killed_with_its_workers_and_the_suite_goes_on(run_all, tmp_path,
                                                                         monkeypatch):
    (tmp_path / "bench_hang.py").write_text(HANG)
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    pid_file = tmp_path / "child.pid"
    script = run_all.Script("bench_hang", full=(str(pid_file),), timeout_s=2)
    start = time.monotonic()
    entry = run_all.run_script(script, "full", tmp_path)
    assert time.monotonic() - start < 30
    assert entry["timed_out"] and entry["returncode"] != 0
    assert "started" in entry["output"] and "killed after 2 s" in entry["output"]
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the script's worker outlived the time limit"


def test_a_script_within_its_limit_reports_its_rows(run_all, tmp_path, monkeypatch):
    (tmp_path / "bench_rows.py").write_text(
        "import json, sys\nprint('hello')\n"
        "open(sys.argv[2], 'w').write(json.dumps([{'case': 'c', 'impl': 'i', 'median_s': 1.0}]))\n")
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    entry = run_all.run_script(run_all.Script("bench_rows", takes_json=True, timeout_s=60), "full",
                               tmp_path)
    assert entry["returncode"] == 0 and not entry["timed_out"]
    assert entry["output"].strip() == "hello"
    assert entry["rows"] == [{"case": "c", "impl": "i", "median_s": 1.0}]


BURN = """
import subprocess, sys, time
if sys.argv[1:] == ["worker"]:
    start = time.process_time()
    while time.process_time() - start < 0.5:
        pass
else:
    subprocess.run([sys.executable, __file__, "worker"], check=True)
"""


def test_a_script_s_cpu_time_counts_its_workers(run_all, tmp_path, monkeypatch):
    (tmp_path / "bench_burn.py").write_text(BURN)
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    entry = run_all.run_script(run_all.Script("bench_burn", timeout_s=60), "full", tmp_path)
    assert entry["returncode"] == 0 and entry["cpu_s"] >= 0.5


def pairwise_rows(torch_skipped: str = "") -> dict:
    case = "gradient n=1024 m=1024 p=256 float32"
    torch = ({"case": case, "impl": "torch.cdist", "skipped": torch_skipped} if torch_skipped else
             {"case": case, "impl": "torch.cdist", "median_s": 0.1, "min_s": 0.09, "max_s": 0.2,
              "repeats": 11})
    opsdk = {"case": case, "impl": "opsdk", "median_s": 0.01, "min_s": 0.009, "max_s": 0.02,
             "repeats": 75}
    return {"name": "bench_pairwise_manhattan", "returncode": 0, "rows": [opsdk, torch]}


def test_a_figure_gives_both_medians_their_repeats_and_the_ratio(headline):
    figure = next(f for f in headline.FIGURES if f.case.startswith("gradient"))
    mine, others = headline.cells(figure, [pairwise_rows()])
    assert mine == "10.000 ms (9.000 ms - 20.000 ms, n=75)"
    assert others == "torch.cdist 100.000 ms (90.000 ms - 200.000 ms, n=11): 10.00x opsdk's time"


def test_an_alternative_that_was_skipped_is_absent_with_the_reason(headline):
    figure = next(f for f in headline.FIGURES if f.case.startswith("gradient"))
    _, others = headline.cells(figure, [pairwise_rows("torch not installed")])
    assert others == "torch.cdist: absent (torch not installed)"


def test_every_figure_has_a_row_and_a_missing_measurement_says_absent(headline):
    failed = {"name": "bench_tf1", "returncode": 1, "timed_out": True, "rows": []}
    lines = headline.headline_table([pairwise_rows(), failed], gpu=None)
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| work")]
    assert len(rows) == len(headline.FIGURES) + len(headline.GPU_SCRIPTS)
    cnn = next(line for line in rows if "deep-MNIST" in line)
    assert "absent: bench_tf1 (timed out) wrote no row 'opsdk.v1'" in cnn
    gelu = next(line for line in rows if "GELU" in line)
    assert "absent: bench_elementwise was not run" in gelu
    assert all("absent: no GPU" in line for line in rows if line.startswith("| GPU"))
    cells = [line.replace("\\|", "").count("|") for line in rows]
    assert cells == [4] * len(rows), "a cell's own '|' ends it (TF1's '|x-y|' row)"


def test_every_figure_names_a_row_its_script_writes(headline):
    """The figures' cases and implementations are those the scripts name, so a rename in a
    script cannot leave a figure silently absent."""
    pairwise, elementwise, tf1 = (load(n) for n in ("bench_pairwise_manhattan",
                                                    "bench_elementwise", "bench_tf1"))
    overhead, over = load("bench_overhead"), load("bench_oversubscribed")
    cases = {"bench_pairwise_manhattan": [c.label for c in pairwise.cases_for(False)],
             "bench_elementwise": [title for title, _ in elementwise.CASES.values()],
             "bench_tf1": [label for label, _, _ in tf1.MODELS],
             "bench_oversubscribed": [over.case_label("4 busy processes")]}
    impls = {"bench_pairwise_manhattan": set(pairwise.IMPLS),
             "bench_elementwise": {i for _, impls in elementwise.CASES.values() for i in impls},
             "bench_tf1": {"opsdk.v1", "tf compat.v1", tf1.TORCH},
             "bench_oversubscribed": {"opsdk.v1", "tf compat.v1"}}
    for figure in headline.FIGURES:
        if figure.script == "bench_overhead":
            assert overhead.FWDBWD_TITLE.startswith(figure.case)
            assert {figure.opsdk, *figure.others} <= set(overhead.FWDBWD_ROWS)
            continue
        assert any(c.startswith(figure.case) for c in cases[figure.script]), figure
        assert {figure.opsdk, *figure.others} <= impls[figure.script], figure


def test_rows_are_timed_at_least_three_times_however_slow(run_all):
    pairwise = load("bench_pairwise_manhattan")
    timing = pairwise.Timing(budget_s=2.0, cap=200)

    def calls(timing, seconds: float) -> int:
        times = []
        while timing.more(times):
            times.append(seconds)
        return len(times)
    assert calls(timing, 10.0) == 3  # a call of 10 s: 3, not 15
    assert calls(timing, 0.1) == 20
    assert calls(timing, 1e-6) == 200
    assert calls(pairwise.Timing(repeats=7), 10.0) == 7
    [result] = pairwise.worker("numpy broadcast", [pairwise.Case("forward", 8, 8, 4)],
                               pairwise.Timing(budget_s=0.0))
    assert result.repeats == 3 and result.min_s <= result.median_s <= result.max_s


def test_the_headline_names_the_gpu_benchmarks_run_all_runs(run_all, headline):
    assert set(headline.GPU_SCRIPTS) == {s.title for s in run_all.GPU_SCRIPTS}
    titles = [s.title for s in (*run_all.SCRIPTS, *run_all.GPU_SCRIPTS)]
    assert len(titles) == len(set(titles)), "two entries of the report would share a name"


def test_make_bench_runs_every_benchmark_of_bench(run_all):
    names = {s.name for s in (*run_all.SCRIPTS, *run_all.GPU_SCRIPTS)}
    assert names == {p.stem for p in BENCH.glob("bench_*.py")}
