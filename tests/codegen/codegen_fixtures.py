"""Small workspaces for the codegen tests, written into tmp dirs, and representative declarations."""

from __future__ import annotations

import textwrap
from pathlib import Path

from opsdk.registry import parse_opdef


def write_workspace(root: Path, declarations: dict[str, str], kernels: dict[str, str] | None = None) -> Path:
    """A workspace at `root`: opdefs/<name>.yaml per declaration, plus kernel files (empty unless
    given) for every `<op>_cpu.cc` / `<op>_cuda.cu` a declaration names."""
    opdefs = root / "opdefs"
    opdefs.mkdir(parents=True, exist_ok=True)
    for name, text in declarations.items():
        text = textwrap.dedent(text).lstrip()
        (opdefs / f"{name}.yaml").write_text(text)
        for device, suffix in (("cpu", "_cpu.cc"), ("cuda", "_cuda.cu")):
            named = f"{device}: {name}{suffix}" in text or f"source: {name}{suffix}" in text
            if named and not (opdefs / f"{name}{suffix}").exists():
                (opdefs / f"{name}{suffix}").write_text("")
    for rel, text in (kernels or {}).items():
        (opdefs / rel).write_text(textwrap.dedent(text).lstrip())
    return root


def parse_one(root: Path, name: str):
    """The OpSpec declared in opdefs/<name>.yaml of the workspace at `root`."""
    [spec] = parse_opdef(root / "opdefs" / f"{name}.yaml", root)
    return spec


# Representative declarations for golden files and unit tests.
ATTRS_OP = """
    op: attrs_op
    summary: Attrs of every type, bound dims and an expression output.
    doc: |
      Exercises every attr type.
    type_attrs:
      T: [float32, float64]
    attrs:
      k: {type: int, default: 1, min: 1, max: 64, doc: "repeat count"}
      mode: {type: str, default: sum, choices: [sum, mean]}
      axes: {type: list(int), default: []}
      weights: {type: list(float), default: [1.0, 2.0]}
      exact: {type: bool, default: false}
      alpha: {type: float}
    inputs:
      x: {dtype: T, shape: [n, p], doc: "n rows"}
      y: {dtype: T, shape: [m, p]}
    outputs:
      z: {dtype: T, shape: ["n + m", "p * k"]}
    gradient: null
    kernels:
      cpu: attrs_op_cpu.cc
      cuda: attrs_op_cuda.cu
    reference: "np.concatenate([x, y]).repeat(k, axis=1) * alpha"
"""

LIST_OP = """
    op: list_op
    summary: A list input with leading dims.
    type_attrs:
      T: [float32, int64]
    inputs:
      xs: {dtype: T, shape: [..., d], list: N}
    outputs:
      y: {dtype: T, shape: [..., "d * N"]}
      parts: {dtype: T, shape: [..., d], list: N}
    gradient: null
    kernels:
      cpu: list_op_cpu.cc
      cuda: list_op_cuda.cu
    reference: "(np.concatenate(xs, axis=-1), [x.copy() for x in xs])"
"""

CAST_OP = """
    op: cast_op
    summary: Two type attrs, one unbound, a fixed-dtype input and two outputs.
    type_attrs:
      SrcT: [int32, float32]
      DstT: {allowed: [float32, float64], default: float32}
    inputs:
      x: {dtype: SrcT, shape: [n, 3]}
      mask: {dtype: bool, shape: [n]}
    outputs:
      y: {dtype: DstT, shape: [n, 3]}
      count: {dtype: int64, shape: []}
    gradient: null
    kernels:
      cpu: cast_op_cpu.cc
      cuda: cast_op_cuda.cu
"""

LAUNCH_OP = """
    op: launch_op
    summary: A cuda kernel with declared launches, reading dims, attrs and expressions.
    type_attrs:
      T: [float32, float64]
    attrs:
      k: {type: int, default: 2, min: 1}
      alpha: {type: float, default: 0.5}
      flip: {type: bool, default: false}
    inputs:
      x: {dtype: T, shape: [n, p]}
      idx: {dtype: int64, shape: [n]}
    outputs:
      y: {dtype: T, shape: [n, p]}
      total: {dtype: T, shape: [n]}
    gradient: null
    kernels:
      cuda:
        source: launch_op_cuda.cu
        launch:
          - kernel: detail::rows<T, 4>
            grid: ["(n + 3) // 4", "max(p // 32, 1)"]
            block: [32, 4]
            shared: "4 * p * 8"
            args: [x, idx, y, n, p, alpha, flip]
          - kernel: totals<T>
            grid: "min((n + 255) // 256, 65535)"
            block: 256
            args: [y, total, n, "p * k", -1]
"""

WINDOW_OP = """
    op: window_op
    summary: Named dims from a choice attr and a bool attr, checked in an input and used in an output.
    type_attrs:
      T: [float32, float64]
    attrs:
      k: {type: int, default: 2, min: 1}
      padding: {type: str, default: valid, choices: [valid, same]}
      twice: {type: bool, default: false}
    dims:
      oh: "h if padding == 'same' else h - k + 1"
      cols: "2 * c if twice else c"
    inputs:
      x: {dtype: T, shape: [h, c]}
      g: {dtype: T, shape: [oh]}
    outputs:
      y: {dtype: T, shape: [oh, cols]}
    gradient: null
    kernels:
      cpu: window_op_cpu.cc
"""

OPTIONAL_OP = """
    op: optional_op
    summary: Optional inputs, one checked against a required input's dim, one binding a dim of its own.
    type_attrs:
      T: [float32, float64]
    inputs:
      w: {dtype: T, shape: [p], optional: true, doc: "a weight per column"}
      x: {dtype: T, shape: [n, p]}
      tags: {dtype: int64, shape: [q], optional: true}
    outputs:
      y: {dtype: T, shape: [n]}
    kernels:
      cpu: optional_op_cpu.cc
      cuda: optional_op_cuda.cu
"""

REPRESENTATIVE = {"attrs_op": ATTRS_OP, "list_op": LIST_OP, "cast_op": CAST_OP, "launch_op": LAUNCH_OP,
                  "window_op": WINDOW_OP, "optional_op": OPTIONAL_OP}
