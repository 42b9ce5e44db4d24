"""`Session.explain`: what each pass of the compile pipeline did, as data and as text."""

from __future__ import annotations

from dataclasses import dataclass

from opsdk.runtime.compile.pipeline import PIPELINE
from opsdk.runtime.compile.plan import Plan
from opsdk.runtime.ir.device_names import device_part
from opsdk.runtime.kernels.buffers import LEND_FROM


@dataclass(frozen=True)
class Explanation:
    """Per pass, in pipeline order, the lines saying what it did; plus the placement, the
    copies, the folded and merged nodes and the partitions as data for programs and tests."""

    passes: tuple[tuple[str, tuple[str, ...]], ...]
    placement: dict  # node name -> location (task and device)
    copies: tuple[tuple[str, str, str], ...]  # cuts between devices: (tensor, from, to device)
    folded: tuple[str, ...]
    merged: tuple[str, ...]
    partitions: dict  # location -> node names (their _send and _recv nodes included)
    cuts: tuple[tuple[str, str, str], ...]  # (tensor, from location, to location)
    donated: tuple[str, ...] = ()  # nodes writing into a dead input's buffer
    pooled: tuple[str, ...] = ()  # nodes taking their output buffers from the session's pool
    pool_releases: int = 0  # slots whose value goes back to the pool when it dies
    peak_bytes: int = 0  # the most bytes of step values alive at once (static shapes)
    peak_known: bool = True  # False: some sizes are known only at run time (a lower bound)
    lent: tuple[str, ...] = ()  # fetched tensors whose arrays are lent (BufferPool.lend)

    def lines_of(self, pass_name: str) -> tuple[str, ...]:
        return dict(self.passes).get(pass_name, ())

    def __str__(self) -> str:
        out = []
        for name, lines in self.passes:
            out.append(f"{name}:")
            out.extend(f"  {line}" for line in lines)
        out.append("memory:")
        out.extend(f"  {line}" for line in self.memory_lines())
        return "\n".join(out)

    def memory_lines(self) -> tuple[str, ...]:
        bound = "" if self.peak_known else " at least (some sizes are known only at run time)"
        return (f"peak: {self.peak_bytes} bytes of step values{bound}",
                f"in place: {', '.join(self.donated) or 'nothing'}",
                f"from the buffer pool: {', '.join(self.pooled) or 'nothing'}",
                f"values given back to the pool when they die: {self.pool_releases}",
                f"fetches lent (arrays of {LEND_FROM // 1024} KiB or more, taken back once "
                f"dropped): {', '.join(self.lent) or 'none'}")


def explain_plan(plan: Plan) -> Explanation:
    """The explanation of a plan built by the pipeline."""
    program = plan.program
    parts = program.partitions
    cuts = tuple((r.attrs["tensor_name"], r.attrs["send_location"], r.attrs["recv_location"])
                 for part in parts.values() for r in part.recvs)
    copies = tuple((name, device_part(a), device_part(b)) for name, a, b in cuts
                   if device_part(a) != device_part(b))
    return Explanation(
        passes=tuple((p.name, tuple(program.report.get(p.name, ()))) for p in PIPELINE),
        placement={op.name: where for op, where in program.location.items()
                   if op.type not in ("_send", "_recv")},
        copies=copies, folded=plan.folded, merged=plan.merged,
        partitions={loc: [op.name for op in part.ops] for loc, part in parts.items()},
        cuts=cuts, donated=plan.donated, pooled=plan.pooled,
        pool_releases=sum(k is not None for k in plan.pool_keys),
        peak_bytes=plan.peak_bytes, peak_known=plan.peak_known,
        lent=tuple(dict.fromkeys(e.name for e, device in zip(program.fetches, plan.fetch_lends)
                                 if device is not None)))
