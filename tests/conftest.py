"""Fixtures shared by every test package."""

from __future__ import annotations

import importlib.util

import pytest


def pytest_addoption(parser):
    # Declared at the root so it exists however pytest is started (tests/codegen uses it).
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/codegen/golden/ from the current templates")


@pytest.fixture
def cupy():
    """CuPy with a usable CUDA device, or the test is skipped saying which of the two is missing."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed (pip install '.[gpu]')")
    import cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        pytest.skip(f"no usable CUDA device: {exc}")
    return cupy
