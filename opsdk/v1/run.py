"""Run a TensorFlow 1 program unchanged: its ops on one device, or its `import tensorflow` bound.

Every op of the program's default graph goes under `--device`; `--as-tensorflow` answers the
program's own `import tensorflow` with opsdk.v1.

    python -m opsdk.v1.run --device /gpu:0 examples/mnist_softmax.py [program args ...]
    python -m opsdk.v1.run --as-tensorflow worker.py --job_name=worker --task_index=0

`--as-tensorflow` binds `tensorflow` (and `tensorflow.nn`, `tensorflow.train`, ...) to
opsdk.v1 before the program runs (`bind_tensorflow`), so a program whose import line says
`import tensorflow as tf` runs without one line of it changed.

The program runs as `__main__` (its folder first on sys.path, as `python PROGRAM` would) inside
`with tf.device(DEVICE):` on the default graph, so every node it adds there asks for that
device; placement then puts each node on it where the op has a kernel for it (soft placement
otherwise, logged once per node). Graphs the program makes itself (`tf.Graph()`) are not
scoped.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from typing import Optional, Sequence

import opsdk


# The namespaces a program may import as modules (`import tensorflow.contrib.layers`, `from
# tensorflow.nn import relu`).
NAMESPACES = ("nn", "nn.rnn_cell", "train", "layers", "losses", "metrics", "summary", "contrib",
              "contrib.rnn", "contrib.layers", "contrib.seq2seq", "contrib.framework",
              "contrib.factorization", "app", "gfile", "errors", "compat", "compat.v1")


def bind_tensorflow() -> None:
    """Answer `import tensorflow` (and its namespaces as modules) with opsdk.v1 in this
    process."""
    import opsdk.v1 as tf

    sys.modules["tensorflow"] = tf
    for name in NAMESPACES:
        value: object = tf
        for part in name.split("."):
            value = getattr(value, part)
        sys.modules["tensorflow." + name] = value  # type: ignore[assignment]
    # `from tensorflow.python.framework import ops` and the other modules of TF's internals
    # that TF1 programs import for themselves (opsdk.v1.internals)
    from opsdk.v1 import internals

    internals.install()


def run_program(path: str, device: Optional[str], argv: Sequence[str] = ()) -> None:
    """Run the program at `path` as `__main__` under `device` (None: no scope)."""
    program = Path(path).resolve()
    if not program.is_file():
        raise opsdk.OpsdkError(f"{path}: no such program")
    sys.argv = [str(program), *argv]
    sys.path.insert(0, str(program.parent))
    graph = opsdk.get_default_graph()
    scope = graph.device(device) if device else _nothing()
    with scope:
        runpy.run_path(str(program), run_name="__main__")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opsdk.v1.run", description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="e.g. /gpu:0, /cpu:0, /test:0")
    parser.add_argument("--as-tensorflow", action="store_true",
                        help="answer the program's `import tensorflow` with opsdk.v1")
    parser.add_argument("program")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if ns.as_tensorflow:
        bind_tensorflow()
    try:
        run_program(ns.program, ns.device, ns.args)
    except opsdk.OpsdkError as exc:
        print(f"opsdk.v1.run: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
