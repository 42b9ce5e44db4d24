"""The runnable examples in the builtin wrappers' docstrings run and print what they claim.

Ops with a Python kernel run here with no build; ops that need a compiled kernel are checked by
the build's own tests.
"""

from __future__ import annotations

import doctest
import warnings

import pytest

from opsdk.registry import BUILTIN_ROOT, load_registry
from opsdk.runtime.frontend.ops_module import load_ops


def _python_kernel_ops() -> list[str]:
    return sorted(s.name for s in load_registry().ops_in_workspace(BUILTIN_ROOT) if s.kernel("python"))


def test_every_builtin_op_has_an_example():
    module = load_ops(BUILTIN_ROOT)
    for name in load_registry().names():
        assert ">>> " in getattr(module, name).__doc__, name


@pytest.mark.parametrize("op", _python_kernel_ops())
def test_docstring_example_runs(op):
    module = load_ops(BUILTIN_ROOT)
    [test] = [t for t in doctest.DocTestFinder().find(getattr(module, op), op, globs=vars(module).copy())]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pow/log of drawn values may warn
        result = runner.run(test, out=report.append)
    assert result.attempted > 0
    assert result.failed == 0, "".join(report)
