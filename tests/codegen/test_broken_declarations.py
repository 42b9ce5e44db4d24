"""One bad declaration never stops the others: generate and build do every good op, then report
the broken files' mistakes (file:line) and fail."""

from __future__ import annotations

import textwrap
import warnings

import pytest

from opsdk.build.driver import build_workspace
from opsdk.codegen.generate import generate_workspace
from opsdk.registry import OpDefErrors
from opsdk.runtime.frontend.ops_module import load_ops

GOOD = """
op: twice_it
summary: 2 x.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  python: k.py:twice_it
"""


def test_generate_and_build_do_the_good_ops_then_report_the_broken_file(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "good.yaml").write_text(textwrap.dedent(GOOD))
    (tmp_path / "opdefs" / "k.py").write_text("def twice_it(xp, x):\n    return x * 2\n")
    (tmp_path / "opdefs" / "bad.yaml").write_text("op: bad_op\nsummary: broken\ninptus: {}\n")
    with pytest.raises(OpDefErrors, match=r"opdefs/bad.yaml:3: op 'bad_op': unknown key 'inptus'"):
        generate_workspace(tmp_path)
    assert "def twice_it(" in (tmp_path / "generated" / "python" / "ops.py").read_text()
    with pytest.raises(OpDefErrors, match=r"opdefs/bad.yaml:3"):
        build_workspace(tmp_path, cuda="off", progress=False)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        ops = load_ops(tmp_path)
    import numpy as np
    assert ops.twice_it(np.ones(2)).tolist() == [2.0, 2.0]
