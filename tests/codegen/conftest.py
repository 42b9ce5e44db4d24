"""Fixtures of the codegen tests: small workspaces written into tmp dirs, golden-file handling."""

from __future__ import annotations

import pytest


@pytest.fixture
def update_golden(request) -> bool:
    # `pytest tests/codegen --update-golden` (the option is declared in tests/conftest.py).
    return bool(request.config.getoption("--update-golden", default=False))
