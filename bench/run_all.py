"""`make bench`: every benchmark in bench/, one after another, into bench/results/.

    .venv/bin/python bench/run_all.py [--quick] [--out bench/results] [--only NAME ...]

Writes results.json (the machine, library versions, and per benchmark its command, exit status,
seconds, peak memory and either its rows, for the scripts that write JSON, or its printed output)
and results.md (the same as Markdown tables, after the headline figures of bench/headline.py). Each
script has a time limit; past it the script and its workers are killed and the report says so. Each
script measures its alternatives side by side in its own run (medians, min and max over repeats
after warm-up); an alternative that is not installed is reported absent by the script, never
estimated. The GPU benchmarks run only where `nvidia-smi -L` lists a GPU. Times from different rows
of one script compare; across scripts the load may have changed (the load average is recorded
before and after each).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))
from headline import fmt_s, headline_table  # noqa: E402  (bench/ is no package)

@dataclass(frozen=True)
class Script:
    """A benchmark of bench/: its arguments in each mode, whether it writes --json FILE, and the
    seconds after which run_all kills it (with its workers) and goes on."""
    name: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    takes_json: bool = False
    timeout_s: float = 300
    label: str = ""  # the report's name for it, where one script runs twice (bench_fusion)
    leaves_out: tuple[str, ...] = ()  # (rows its arguments leave out, why): the report lists them

    @property
    def title(self) -> str:
        return self.label or self.name


SCRIPTS = (
    Script("bench_pairwise_manhattan", (), ("--quick",), True, 900),
    Script("bench_tf1", ("--steps", "200", "--repeats", "5"), ("--steps", "60", "--repeats", "3"),
           True, 600),
    Script("bench_elementwise", (), ("--quick",), True, 600),
    Script("bench_oversubscribed", ("--steps", "100"), ("--steps", "50"), True, 600),
    Script("bench_conv2d", ("--repeats", "5"), ("--repeats", "3")),
    Script("bench_overhead", ("--quick",), ("--quick",), True),
    Script("bench_executor"),
    Script("bench_fusion", ("--cpu", "--repeats", "5"), ("--cpu", "--repeats", "3")),
    Script("bench_jax_ffi", ("--quick",), ("--quick",),
           leaves_out=("n=m=128 and n=m=1024", "--quick runs n=m=16 and 512; the script "
                       "without it runs them all")),
    Script("bench_dist", ("--null-only",), ("--null-only", "--repeat", "10"), False, 600,
           leaves_out=("sparse-embedding bytes, softmax throughput, recovery from a killed ps",
                       "Ray clusters started and killed for each; the script without --null-only "
                       "runs them")),
    Script("bench_build", ("--repeats", "3", "--no-torch"), ("--quick", "--no-torch"), False, 600,
           leaves_out=("torch cpp_extension.load, cold and after a header edit",
                       "two fresh compiles of 50 s or more each; `python bench/bench_build.py "
                       "--quick` runs them")),
)
GPU_SCRIPTS = (Script("bench_pairwise_manhattan_gpu", (), ("--quick",)),
               Script("bench_fusion", ("--gpu",), ("--gpu",), label="bench_fusion --gpu"))
LIBRARIES = ("opsdk", "numpy", "scipy", "torch", "tensorflow-cpu", "tensorflow", "jax", "cupy-cuda13x", "cupy")
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
              "avx512_fp16", "amx_tile", "neon", "asimd", "sve")


def machine() -> dict:
    """CPU model, SIMD flags, cores, memory, load, OS, and the GPU when there is one."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                model = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {"cpu": model, "simd": [f for f in SIMD_FLAGS if f in flags], "cores": os.cpu_count(),
            "load_average": list(os.getloadavg()), "os": platform.platform(),
            "python": platform.python_version(), "gpu": gpu()}


def gpu() -> Optional[str]:
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


def versions() -> dict:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None  # absent: its rows say skipped
    return found


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def wait_within(proc: subprocess.Popen, timeout_s: float) -> tuple[int, object, bool]:
    """(status, rusage, timed out) of `proc`; past `timeout_s` its whole process group is killed
    (SIGTERM, then SIGKILL after 10 s), so a hung script or worker cannot block the suite."""
    deadline, signals = time.monotonic() + timeout_s, [signal.SIGKILL, signal.SIGTERM]
    timed_out = False
    try:
        while True:
            # wait4 rather than Popen.wait: the child's own peak memory comes with its status.
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                if timed_out:  # its workers may have outlived it: they go too
                    kill_group(proc.pid, signal.SIGKILL)
                return status, usage, timed_out
            if time.monotonic() > deadline and signals:
                timed_out = True
                kill_group(proc.pid, signals.pop())
                deadline = time.monotonic() + 10
            time.sleep(0.2)
    except BaseException:  # Ctrl-C: the script's group is a session of its own, so stop it here
        kill_group(proc.pid, signal.SIGKILL)
        raise


def run_script(script: Script, mode: str, workdir: Path) -> dict:
    """One benchmark in a child process: its rows (or output), status, seconds, peak memory."""
    name, args, timeout_s = script.name, getattr(script, mode), script.timeout_s
    command = [sys.executable, str(BENCH / f"{name}.py"), *args]
    out_json = workdir / f"{script.title.replace(' ', '_')}.json"
    if script.takes_json:
        command += ["--json", str(out_json)]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    # A session of its own: on a timeout the script's workers go with it.
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    status, usage, timed_out = wait_within(proc, timeout_s)
    reader.join(timeout=10)  # a grandchild that escaped the group may hold the pipe open
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    output = "".join(chunks)
    if timed_out:
        output += f"\n[run_all: killed after {timeout_s:.0f} s, its time limit]\n"
    entry = {"name": script.title, "command": " ".join(["python", f"bench/{name}.py", *args]),
             "returncode": proc.returncode, "seconds": round(seconds, 1), "timed_out": timed_out,
             "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
             # CPU seconds of the script and the workers it waited for: unlike the wall time,
             # other work on the machine hardly changes it.
             "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
             "load_before": load_before, "load_after": os.getloadavg()[0], "output": output}
    if script.takes_json and out_json.exists():
        entry["rows"] = json.loads(out_json.read_text())
    print(f"{name}: exit {proc.returncode} in {seconds:.0f} s", flush=True)
    return entry


# -- Markdown ------------------------------------------------------------------------------------

def row_table(rows: list[dict]) -> list[str]:
    """A Markdown table of a script's JSON rows: their keys as columns, times formatted."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        cells = []
        for k in keys:
            v = r.get(k, "")
            if isinstance(v, float):
                v = fmt_s(v) if k.endswith("_s") else f"{v:.3g}"
            cells.append(str(v).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = ["# Benchmark results", "",
             f"- CPU: {m['cpu']}; {m['cores']} cores; SIMD: {', '.join(m['simd']) or 'none found'}",
             f"- GPU: {m['gpu'] or 'none'}", f"- OS: {m['os']}; Python {m['python']}",
             f"- load average at start: {', '.join(f'{x:.2f}' for x in m['load_average'])}",
             f"- total: {report['seconds']:.0f} s; started {report['started']}",
             "- libraries: " + ", ".join(f"{k} {v or 'absent'}" for k, v in report["versions"].items()),
             *(f"- not run: {name} ({why})" for name, why in report.get("absent", {}).items()),
             ""]
    lines += headline_table(report["benchmarks"], m["gpu"]) + [""]
    lines += ["| benchmark | exit | seconds | CPU seconds | peak RSS | load before / after |",
              "|---|---|---|---|---|---|"]
    for b in report["benchmarks"]:
        status = f"{b['returncode']}{' (timed out)' if b.get('timed_out') else ''}"
        lines.append(f"| {b['name']} | {status} | {b['seconds']} | {b.get('cpu_s', '')} | "
                     f"{b.get('peak_rss_mib', '')} MiB | {b['load_before']:.1f} / "
                     f"{b['load_after']:.1f} |")
    lines.append(f"| all | | {sum(b['seconds'] for b in report['benchmarks']):.0f} | "
                 f"{sum(b.get('cpu_s', 0) for b in report['benchmarks']):.0f} | | |")
    for b in report["benchmarks"]:
        lines += ["", f"## {b['name']}", "", f"`{b['command']}`", ""]
        if b.get("rows"):
            lines += row_table(b["rows"]) + [""]
        lines += ["```", b["output"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each script's quick mode")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--only", nargs="+", help="run only these scripts (names without .py)")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    scripts = list(SCRIPTS) + (list(GPU_SCRIPTS) if gpu() else [])
    if args.only:
        scripts = [s for s in scripts if s.name in args.only or s.title in args.only]
    report = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "mode": mode,
              "machine": machine(), "versions": versions(), "benchmarks": []}
    if not gpu():
        report["absent"] = {s.title: "no GPU (nvidia-smi -L lists none)" for s in GPU_SCRIPTS}
    report.setdefault("absent", {}).update(
        {f"{s.title}: {s.leaves_out[0]}": s.leaves_out[1] for s in scripts if s.leaves_out})
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opsdk_bench_") as tmp:
        for script in scripts:
            report["benchmarks"].append(run_script(script, mode, Path(tmp)))
    report["seconds"] = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "results.md").write_text(markdown(report))
    print(f"wrote {args.out / 'results.md'} and results.json in {report['seconds']:.0f} s")
    return 0 if all(b["returncode"] == 0 for b in report["benchmarks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
