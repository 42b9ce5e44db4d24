"""What `opsdk build --wheel` stages before pip packs it: the package's name, and no untouched
scaffold CUDA stub (nor the `cuda:` line naming it). Fast: no compile, no pip."""

from __future__ import annotations

import pytest

from opsdk.build.wheel import _stage, package_name
from opsdk.cli.main import main
from opsdk.registry import OpsdkError, load_registry


def test_opsdk_yaml_names_the_package(tmp_path):
    root = tmp_path / "ws"
    (root / "opdefs").mkdir(parents=True)
    assert package_name(root) == "ws"
    (root / "opsdk.yaml").write_text("name: my_ops\n")
    assert package_name(root) == "my_ops"


def test_an_untouched_cuda_stub_and_its_line_are_left_out_and_a_written_kernel_kept(tmp_path):
    root = tmp_path / "ws"
    for op in ("stub_op", "real_op"):
        assert main(["-C", str(root), "new", op]) == 0
    written = root / "opdefs" / "real_op_cuda.cu"
    written.write_text(written.read_text() + "// written\n")
    staged = tmp_path / "staged" / "ws"
    _stage(root, staged)
    assert not (staged / "opdefs" / "stub_op_cuda.cu").exists()
    assert "cuda:" not in (staged / "opdefs" / "stub_op.yaml").read_text()
    assert (staged / "opdefs" / "real_op_cuda.cu").read_text() == written.read_text()
    registry = load_registry(staged)
    assert registry.get("stub_op").devices == ("cpu",)
    assert registry.get("real_op").devices == ("cpu", "cuda")


def test_a_stub_named_where_its_line_cannot_be_dropped_is_a_located_error(tmp_path):
    root = tmp_path / "ws"
    assert main(["-C", str(root), "new", "stub_op"]) == 0
    yaml = root / "opdefs" / "stub_op.yaml"
    text = yaml.read_text().replace("kernels:\n  cpu: stub_op_cpu.cc\n  cuda: stub_op_cuda.cu\n",
                                    "kernels: {cpu: stub_op_cpu.cc, cuda: stub_op_cuda.cu}\n")
    assert "kernels: {" in text
    yaml.write_text(text)
    with pytest.raises(OpsdkError, match=r"^opdefs/stub_op\.yaml:\d+: op 'stub_op': "
                                         r"opdefs/stub_op_cuda\.cu is the untouched scaffold stub"):
        _stage(root, tmp_path / "staged" / "ws")
