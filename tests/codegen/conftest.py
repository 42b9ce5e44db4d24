"""Fixtures of the codegen tests: small workspaces written into tmp dirs, golden-file handling."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/codegen/golden/ from the current templates")


@pytest.fixture
def update_golden(request) -> bool:
    # The option exists when pytest starts from tests/codegen (`pytest tests/codegen --update-golden`).
    return bool(request.config.getoption("--update-golden", default=False))
