"""The headline figures of `make bench`: one row per figure of the speed targets, picked from the
rows the scripts wrote (bench/README.md), each with its alternatives of the same run.

Every figure names the script, the case and the opsdk row it comes from, and the alternatives it
is compared with. A cell gives the median, min - max and the number of timed repeats; an
alternative's cell adds its time as a multiple of the opsdk row's (for the ceiling loop that is
the share of the ceiling's rate the opsdk row reaches). A row that is missing says "absent" and
why: the script skipped it (not installed, not applicable), or did not write it (failed, timed
out, or a mode that does not run that case).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Figure:
    """Where one headline figure comes from: `script`'s rows whose case starts with `case`."""
    work: str
    script: str
    case: str
    opsdk: str
    others: tuple[str, ...]
    peak: bool = False  # the opsdk row's peak extra memory is part of the figure


PAIRWISE = "bench_pairwise_manhattan"
FIGURES = (
    Figure("GELU (tanh form) from builtin ops, 16M float32, Session.run", "bench_elementwise",
           "GELU", "opsdk Session.run", ("torch gelu(approximate='tanh')", "NumPy expression")),
    Figure("chain of 1000 adds on 256x256 float32, Session.run, per add", "bench_elementwise",
           "1000 adds", "opsdk Session.run", ("NumPy in place",), peak=True),
    Figure("deep-MNIST CNN training step, batch 50", "bench_tf1", "deep-MNIST CNN", "opsdk.v1",
           ("tf compat.v1",)),
    Figure("pairwise_manhattan forward, n=m=4096, p=256, float32", PAIRWISE,
           "forward n=4096 m=4096 p=256 float32", "opsdk", ("ceiling loop",)),
    Figure("pairwise_manhattan forward, n=m=4096, p=256, float64", PAIRWISE,
           "forward n=4096 m=4096 p=256 float64", "opsdk", ("ceiling loop",)),
    Figure("pairwise_manhattan gradient, n=m=1024, p=256, float32", PAIRWISE,
           "gradient n=1024 m=1024 p=256 float32", "opsdk", ("torch.cdist",)),
    Figure("forward + backward on tiny inputs, one Session.run", "bench_overhead",
           "forward + backward", "opsdk Session.run",
           ("torch autograd cdist(p=1).sum().backward()",
            "TF1 Session.run (broadcast |x-y|, tf.gradients)")),
    Figure("MLP 784-512-512-10 Adam step, batch 256", "bench_tf1", "MLP 784-512-512-10",
           "opsdk.v1", ("torch eager", "tf compat.v1")),
    Figure("TF1 autoencoder step with 4 busy processes beside it", "bench_oversubscribed",
           "autoencoder step, 4 busy", "opsdk.v1", ("tf compat.v1",)),
)
GPU_SCRIPTS = ("bench_pairwise_manhattan_gpu", "bench_fusion --gpu")  # run_all's names


def fmt_s(value: Optional[float]) -> str:
    if value is None:
        return ""
    if value >= 1:
        return f"{value:.3f} s"
    return f"{value * 1e3:.3f} ms" if value >= 1e-3 else f"{value * 1e6:.2f} us"


def find_row(benchmarks: list[dict], script: str, case: str,
             impl: str) -> tuple[Optional[dict], str]:
    """(the row, "") or (None, why it is absent)."""
    entry = next((b for b in benchmarks if b["name"] == script), None)
    if entry is None:
        return None, f"{script} was not run"
    row = next((r for r in entry.get("rows") or [] if r.get("impl") == impl
                and str(r.get("case", "")).startswith(case)), None)
    if row is None:
        status = "timed out" if entry.get("timed_out") else f"exit {entry['returncode']}"
        return None, f"{script} ({status}) wrote no row {impl!r} for {case!r}"
    if row.get("median_s") is None:
        return None, row.get("skipped") or "no time reported"
    return row, ""


def timing(row: dict) -> str:
    """median (min - max, n repeats)."""
    return (f"{fmt_s(row['median_s'])} ({fmt_s(row.get('min_s'))} - {fmt_s(row.get('max_s'))}, "
            f"n={row.get('repeats', '?')})")


def cells(figure: Figure, benchmarks: list[dict]) -> tuple[str, str]:
    """The opsdk cell and the alternatives' cell of one figure."""
    base, why = find_row(benchmarks, figure.script, figure.case, figure.opsdk)
    if base is None:
        mine = f"absent: {why}"
    else:
        mine = timing(base)
        if figure.peak and base.get("peak_extra_mib") is not None:
            mine += f", peak +{base['peak_extra_mib']:.1f} MiB"
    others = []
    for impl in figure.others:
        row, why = find_row(benchmarks, figure.script, figure.case, impl)
        if row is None:
            others.append(f"{impl}: absent ({why})")
            continue
        text = f"{impl} {timing(row)}"
        if base is not None:
            ratio = row["median_s"] / base["median_s"]
            text += (f": opsdk at {ratio:.2f} of it" if impl == "ceiling loop"
                     else f": {ratio:.2f}x opsdk's time")
        others.append(text)
    return mine, "; ".join(others)


def headline_table(benchmarks: list[dict], gpu: Optional[str]) -> list[str]:
    """The Markdown lines of the headline table."""
    lines = ["## Headline figures", "",
             "Medians (min - max, n timed repeats after warm-up); each alternative from the same "
             "script's run.", "", "| work | opsdk | alternatives (same run) |", "|---|---|---|"]
    for figure in FIGURES:
        text = [cell.replace("|", "\\|").replace("\n", " ")  # a pipe would end the cell
                for cell in (figure.work, *cells(figure, benchmarks))]
        lines.append(f"| {' | '.join(text)} |")
    for script in GPU_SCRIPTS:
        ran = any(b["name"] == script for b in benchmarks)
        where = (f"see the {script} section below" if ran else
                 f"absent: {'not run' if gpu else 'no GPU (nvidia-smi -L lists none)'}")
        lines.append(f"| GPU: {script} | {where} | |")
    return lines
