"""One bad declaration never stops the others: generate and build do every good op and report the
broken files' mistakes (file:line) and fail; `opsdk build` prints them before compiling
(tests/cli/test_declaration_errors.py)."""

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


LONG = "n + k + k + k + k + k + k + k + k + k + k + k + k + k + k + k + k + k"  # 69 characters


def test_an_input_dim_expression_longer_than_a_name_works_as_in_outputs(tmp_path):
    from opsdk.registry import OpError, load_registry
    from opsdk.registry.infer import infer_outputs

    decl = GOOD.replace("x: {dtype: T, shape: [n]}", f'x: {{dtype: T, shape: [n]}}\n  w: {{dtype: T, '
                        f'shape: ["{LONG}"]}}').replace("y: {dtype: T, shape: [n]}",
                                                       f'y: {{dtype: T, shape: ["{LONG}"]}}')
    decl = decl.replace("inputs:", "attrs:\n  k: {type: int, default: 1}\ninputs:")
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "good.yaml").write_text(decl)
    (tmp_path / "opdefs" / "k.py").write_text("def twice_it(xp, x, w, k):\n    return 2 * w\n")
    generate_workspace(tmp_path)
    spec = load_registry(tmp_path).get("twice_it")
    [(shape, _)] = infer_outputs(spec, [(3,), (20,)], ["float64", "float64"], {"k": 1})
    assert shape == (20,)
    with pytest.raises(OpError, match=r"input 'w'"):
        infer_outputs(spec, [(3,), (19,)], ["float64", "float64"], {"k": 1})
    (tmp_path / "opdefs" / "good.yaml").write_text(decl.replace(f'"{LONG}"]}}\noutputs',
                                                                f'{"d" * 65}]}}\noutputs'))
    with pytest.raises(OpDefErrors, match=r"input 'w': dim name 'd{10}.*' is 65 characters long; "
                                          r"names may have at most 64"):
        load_registry(tmp_path)
