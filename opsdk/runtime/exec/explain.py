"""`Session.explain`: what each pass of the compile pipeline did, as data and as text."""

from __future__ import annotations

from dataclasses import dataclass

from opsdk.runtime.compile.pipeline import PIPELINE
from opsdk.runtime.compile.plan import Plan


@dataclass(frozen=True)
class Explanation:
    """Per pass, in pipeline order, the lines saying what it did; plus the placement, the
    copies, the folded and merged nodes and the partitions as data for programs and tests."""

    passes: tuple[tuple[str, tuple[str, ...]], ...]
    placement: dict  # node name -> device name
    copies: tuple[tuple[str, str, str], ...]  # (tensor, from device, to device)
    folded: tuple[str, ...]
    merged: tuple[str, ...]
    partitions: dict  # location -> node names
    cuts: tuple[tuple[str, str, str], ...]  # (tensor, from location, to location)

    def lines_of(self, pass_name: str) -> tuple[str, ...]:
        return dict(self.passes).get(pass_name, ())

    def __str__(self) -> str:
        out = []
        for name, lines in self.passes:
            out.append(f"{name}:")
            out.extend(f"  {line}" for line in lines)
        return "\n".join(out)


def explain_plan(plan: Plan) -> Explanation:
    """The explanation of a plan built by the pipeline."""
    program = plan.program
    copies = tuple((op.inputs[0].name, op.attrs["from"].name, op.attrs["to"].name)
                   for op in program.ops if op.type == "copy" and op.spec is None)
    parts = program.partitions
    return Explanation(
        passes=tuple((p.name, tuple(program.report.get(p.name, ()))) for p in PIPELINE),
        placement={op.name: program.device[op].name for op in program.ops if op.type != "copy"},
        copies=copies, folded=plan.folded, merged=plan.merged,
        partitions={loc: [op.name for op in ops] for loc, ops in parts.parts.items()},
        cuts=tuple((c.tensor.name, c.source, c.destination) for c in parts.cuts))
