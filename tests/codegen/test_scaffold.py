"""scaffold_op (`opsdk new NAME`): refused names, the files written, and a scaffold that builds."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from opsdk.codegen.scaffold import scaffold_op
from opsdk.registry import OpsdkError, load_registry


@pytest.mark.parametrize("name, reason", [
    ("Bad", "lowercase letters"), ("1op", "lowercase letters"), ("my-op", "lowercase letters"),
    ("lambda", "Python keyword"), ("x" * 80, "at most"), ("add", "already exists"),
    ("stop", "reserved"),
])
def test_refuses_bad_names(tmp_path, name, reason):
    with pytest.raises(OpsdkError, match=reason) as error:
        scaffold_op(tmp_path, name)
    assert f"cannot create op '{name}'" in str(error.value)
    assert not (tmp_path / "opdefs").exists() or not any((tmp_path / "opdefs").iterdir())


def test_refuses_an_existing_workspace_op_and_overwrites_nothing(tmp_path):
    scaffold_op(tmp_path, "scale_me")
    with pytest.raises(OpsdkError, match="already exists"):
        scaffold_op(tmp_path, "scale_me")
    (tmp_path / "tests" / "test_other.py").write_text("# mine\n")
    with pytest.raises(OpsdkError, match=r"tests/test_other.py already exist"):
        scaffold_op(tmp_path, "other")
    assert (tmp_path / "tests" / "test_other.py").read_text() == "# mine\n"


def test_writes_a_valid_declaration(tmp_path):
    written = scaffold_op(tmp_path, "scale_me")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "opdefs/scale_me.yaml", "opdefs/scale_me_cpu.cc", "opdefs/scale_me_cuda.cu", "tests/test_scale_me.py"]
    spec = load_registry(tmp_path).get("scale_me")
    assert [t.name for t in spec.type_attrs] == ["T"]
    assert [a.name for a in spec.attrs] == ["scale"]
    assert spec.reference and spec.gradient is None
    assert "OPSDK_NOT_IMPLEMENTED();" in (tmp_path / "opdefs/scale_me_cpu.cc").read_text()
    assert "gradient: scale_me_grad" in (tmp_path / "opdefs/scale_me.yaml").read_text()  # the hint
    compile((tmp_path / "tests/test_scale_me.py").read_text(), "test_scale_me.py", "exec")


@pytest.mark.slow
def test_scaffold_builds_and_says_the_body_is_missing(tmp_path):
    from opsdk.build.driver import build_workspace
    from opsdk.runtime.kernels.loader import load_kernel
    from opsdk.runtime.frontend.ops_module import load_ops

    scaffold_op(tmp_path, "scale_me")
    build_workspace(tmp_path, cuda="off", progress=False)
    message = "op 'scale_me': kernel body not written yet (opdefs/scale_me_cpu.cc)"
    kernel = load_kernel(load_registry(tmp_path).get("scale_me"), "cpu")
    with pytest.raises(NotImplementedError) as error:
        kernel(np.ones((2, 3), np.float32), 2.0)
    assert str(error.value) == message
    # Through the wrapper, eagerly: the same NotImplementedError, word for word.
    with pytest.raises(NotImplementedError) as error:
        load_ops(tmp_path).scale_me(np.ones((2, 3), np.float32), scale=2.0)
    assert str(error.value) == message
    # The scaffolded test runs and fails for that reason until the body is written.
    spec = importlib.util.spec_from_file_location("scaffolded_test", tmp_path / "tests/test_scale_me.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises((NotImplementedError, OpsdkError), match="kernel body not written yet"):
        module.test_scale_me_matches_reference("float32", (3, 4))
