"""examples/torch_prototypes.py and examples/jax_prototypes.py train to a good accuracy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_torch_example_trains():
    pytest.importorskip("torch", reason="PyTorch not installed: pip install 'opsdk[torch]'")
    assert _load("torch_prototypes").main() > 0.9


@pytest.mark.slow
def test_jax_example_trains():
    pytest.importorskip("jax", reason="JAX not installed: pip install 'opsdk[jax]'")
    assert _load("jax_prototypes").main() > 0.9
