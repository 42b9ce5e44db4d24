"""Every differentiable op of the registry: its gradient op agrees with finite differences.

Parametrised over `load_registry()`, so an op declared in YAML is checked with no new test code.
The cases come from each declaration's `gradcheck:` settings, with fewer examples than
`opsdk gradcheck` runs, to keep the suite quick.
"""

from __future__ import annotations

import pytest

from opsdk.gradcheck import DEFAULT_SEED, check_op
from opsdk.gradcheck.report import render_failure
from opsdk.gradcheck.runner import GradCheckReport, skip_reason
from opsdk.registry import load_registry

EXAMPLES_IN_TESTS = 10

REGISTRY = load_registry()
CHECKED = [n for n in sorted(REGISTRY.names()) if skip_reason(REGISTRY.get(n)) is None]


def test_the_registry_has_differentiable_ops_to_check():
    # Guards the parametrisation below against silently checking nothing.
    assert "pairwise_manhattan" in CHECKED and len(CHECKED) >= 10


@pytest.mark.parametrize("op_name", CHECKED)
def test_gradient_agrees_with_finite_differences(op_name):
    outcome = check_op(REGISTRY, REGISTRY.get(op_name), DEFAULT_SEED, EXAMPLES_IN_TESTS)
    if outcome.skipped:
        pytest.skip(f"{op_name}: {outcome.skipped}")
    report = GradCheckReport(DEFAULT_SEED, (outcome,), max_examples=EXAMPLES_IN_TESTS)
    problems = [render_failure(r, report) for r in outcome.results if not r.ok]
    assert not problems, "\n".join(problems)
    assert any(r.cases > 0 for r in outcome.results), f"{op_name}: no case was checked"
