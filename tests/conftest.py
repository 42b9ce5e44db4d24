"""Fixtures shared by every test package."""

from __future__ import annotations

import importlib.util

import pytest


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
