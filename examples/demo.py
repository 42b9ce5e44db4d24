"""`make demo`: the main job, end to end on the ops this repository declares and builds.

1. nearest-centroid assignment: a graph of `pairwise_manhattan` (C++ kernel built by `opsdk build`)
   and builtin ops, fed from NumPy, checked against NumPy;
2. TensorFlow 1's MNIST softmax regression (synthetic data) trained with Adagrad through
   `Session.run`, its loss going down.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mnist_softmax  # noqa: E402
import nearest_centroid  # noqa: E402


def main() -> None:
    print("== nearest-centroid assignment (pairwise_manhattan + builtin ops in one graph)")
    nearest_centroid.main()
    print("\n== MNIST-shaped softmax regression, AdagradOptimizer(0.01).minimize(loss)")
    losses = mnist_softmax.main(steps=300, report_every=50)
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    if not losses[-1] < 0.5 * losses[0]:
        raise SystemExit("the training loss did not go down")


if __name__ == "__main__":
    main()
