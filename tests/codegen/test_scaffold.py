"""scaffold_op (`opsdk new NAME`): refused names, the files written, and a scaffold that builds."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from opsdk.codegen.scaffold import scaffold_op
from opsdk.registry import OpsdkError, load_registry


@pytest.mark.parametrize("name, reason", [
    ("Bad", "lowercase letters"), ("1op", "lowercase letters"), ("my-op", "lowercase letters"),
    ("lambda", "Python keyword"), ("x" * 80, "at most"),
    ("stop", "reserved"),
])
def test_refuses_bad_names(tmp_path, name, reason):
    with pytest.raises(OpsdkError, match=reason) as error:
        scaffold_op(tmp_path, name)
    assert f"cannot create op '{name}'" in str(error.value)
    assert not (tmp_path / "opdefs").exists() or not any((tmp_path / "opdefs").iterdir())


def test_a_builtin_op_name_is_free_in_a_workspace(tmp_path):
    assert scaffold_op(tmp_path, "add")[0] == tmp_path.resolve() / "opdefs" / "add.yaml"


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
    module = _scaffolded_test(tmp_path, "scale_me")
    with pytest.raises(AssertionError, match=r"op 'scale_me': kernel body not written yet"):
        module.test_scale_me_matches_its_reference()
    # It is derived from the declaration, not frozen to the example: after a real edit (an attr
    # renamed, another added, a rank changed) and the body written, it passes as it is...
    decl = tmp_path / "opdefs/scale_me.yaml"
    decl.write_text(decl.read_text().replace("  scale: {", "  factor: {").replace("[n, p]", "[n]")
                    .replace("\nattrs:\n", "\nattrs:\n  shift: {type: float, default: 0.5}\n")
                    .replace('reference: "scale * x"', 'reference: "factor * x + shift"'))
    _write_body(tmp_path / "opdefs/scale_me_cpu.cc",
                "out.y[i] = static_cast<T>(attrs.factor) * in.x[i] + static_cast<T>(attrs.shift);")
    build_workspace(tmp_path, cuda="off", progress=False)
    module.test_scale_me_matches_its_reference()
    with pytest.raises(pytest.skip.Exception, match="declares no gradient op yet"):
        module.test_scale_me_gradient_agrees_with_finite_differences()
    # ...and it catches a kernel that no longer matches the edited reference.
    _write_body(tmp_path / "opdefs/scale_me_cpu.cc", "out.y[i] = static_cast<T>(attrs.factor) * in.x[i];")
    build_workspace(tmp_path, cuda="off", progress=False)
    with pytest.raises(AssertionError, match="forward mismatch"):
        module.test_scale_me_matches_its_reference()


def _scaffolded_test(root, name):
    spec = importlib.util.spec_from_file_location(f"scaffolded_{name}", root / f"tests/test_{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_body(path, statement):
    text = path.read_text()
    stub = "    (void)in, (void)out, (void)dims, (void)attrs;\n    OPSDK_NOT_IMPLEMENTED();"
    if stub in text:
        text = text.replace(stub, "    for (int64_t i = 0; i < dims.n; ++i) BODY")
    else:
        text = text[:text.index("    for (int64_t i = 0; i < dims.n; ++i) ")] + "    for (int64_t i = 0; i < dims.n; ++i) BODY" + \
            text[text.index("\n", text.index("    for (int64_t i = 0; i < dims.n; ++i) ")):]
    path.write_text(text.replace("BODY", statement))


def test_a_gradient_op_gets_no_test_no_cuda_file_and_no_cuda_line(tmp_path):
    scaffold_op(tmp_path, "scale_me")
    written = scaffold_op(tmp_path, "scale_me_grad")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "opdefs/scale_me_grad.yaml", "opdefs/scale_me_grad_cpu.cc"]
    assert "cuda" not in (tmp_path / "opdefs/scale_me_grad.yaml").read_text()
    decl = tmp_path / "opdefs/scale_me.yaml"
    decl.write_text(decl.read_text().replace("gradient: null", "gradient: scale_me_grad"))
    registry = load_registry(tmp_path)  # the pair fits the signature rule as scaffolded
    grad = registry.get("scale_me_grad")
    assert [t.name for t in grad.inputs] == ["x", "grad_y"] and [t.name for t in grad.outputs] == ["grad_x"]
    assert grad.devices == ("cpu",) and registry.gradient_of("scale_me") is grad
