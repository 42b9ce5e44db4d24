"""A small PyTorch model with opsdk's flagship op inside: a prototype classifier.

Each class has learnable prototypes; a point's logits are minus its L1 distance to them
(`pairwise_manhattan`, a torch operator made from the declaration, with its declared gradient).
Trained with Adam on three Gaussian blobs, then compiled with torch.compile.

    python examples/torch_prototypes.py
"""

from __future__ import annotations

import torch

from opsdk.torch import ops


def blobs(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    centers = torch.tensor([[0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 0.0, 0.0], [0.0, 3.0, 3.0, 3.0]])
    labels = torch.randint(0, 3, (n,), generator=generator)
    return centers[labels] + torch.randn(n, 4, generator=generator), labels


class Prototypes(torch.nn.Module):
    def __init__(self, classes: int, dim: int, generator: torch.Generator):
        super().__init__()
        self.prototypes = torch.nn.Parameter(torch.randn(classes, dim, generator=generator))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -ops.pairwise_manhattan(x, self.prototypes)   # (batch, classes) logits


def main(steps: int = 150) -> float:
    generator = torch.Generator().manual_seed(0)
    model = Prototypes(3, 4, generator)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    step = torch.compile(lambda x, y: torch.nn.functional.cross_entropy(model(x), y),
                         fullgraph=True)
    for _ in range(steps):
        x, y = blobs(128, generator)
        loss = step(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    x, y = blobs(1000, generator)
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    print(f"final loss {loss.item():.3f}, test accuracy {accuracy:.3f}")
    return accuracy


if __name__ == "__main__":
    main()
