"""Devices as objects: found by name, each with its arrays, copies and calling convention. The
test device stands for a second, separate device on a machine without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime import devices
from opsdk.runtime.devices.testing import TEST_XP, TestArray
from opsdk.runtime.ir.graph import Graph


@pytest.mark.parametrize("name", ["/gpu:0", "/device:GPU:0", "cuda", "gpu", "/GPU:0", "cuda:0"])
def test_every_spelling_of_the_gpu_is_one_device(name):
    assert devices.get_device(name) is devices.get_device("/device:GPU:0")
    assert devices.get_device(name).type_name == "GPU"


def test_the_host_and_the_test_device_are_found_by_name():
    assert devices.get_device("/cpu:0") is devices.host()
    assert devices.get_device("") is devices.host()
    test = devices.get_device("/test:1")
    assert test.type_name == "TEST" and test.index == 1 and test.name == "/device:TEST:1"
    assert test is not devices.get_device("/test:0")


def test_an_unknown_device_type_is_refused_where_the_scope_is_written():
    with pytest.raises(OpsdkError, match=r"device '/tpu:0': cannot read 'device:tpu:0' "
                                         r"\(device types: CPU, GPU, TEST;"):
        with Graph().device("/tpu:0"):
            pass


def test_a_device_type_is_one_registration():
    assert set(devices.DEVICE_TYPES) == {"CPU", "GPU", "TEST"}
    for device_type in devices.DEVICE_TYPES.values():
        assert device_type.kernel_kinds and device_type.type_name


def test_test_arrays_do_not_leak_into_host_code_nor_host_arrays_into_the_device():
    device = devices.get_device("/test:0")
    a = device.from_host(np.arange(6.0).reshape(2, 3))
    assert isinstance(a, TestArray) and device.owns(a) and not devices.host().owns(a)
    b = TEST_XP.exp(a) + 1.0
    assert isinstance(b, TestArray)
    np.testing.assert_allclose(devices.to_host(TEST_XP.add.reduce(b, axis=0)),
                               (np.exp(np.arange(6.0)) + 1).reshape(2, 3).sum(0))
    with pytest.raises(TypeError, match="does not support ufuncs"):
        np.add(a, 1.0)
    with pytest.raises(TypeError, match="reached host code without a copy"):
        np.asarray(a)
    with pytest.raises(OpsdkError, match="host .NumPy. array reached the test device"):
        TEST_XP.add(a, np.ones(3))


def test_copies_to_and_from_the_test_device_are_counted():
    device = devices.get_device("/test:0")
    before_in, before_out = device.copies_in, device.copies_out
    on = device.copy_from(np.ones(3), devices.host())
    back = devices.host().copy_from(on, device)
    assert isinstance(back, np.ndarray) and back.tolist() == [1.0, 1.0, 1.0]
    assert (device.copies_in - before_in, device.copies_out - before_out) == (1, 1)
    assert device.copy_from(on, device) is on  # already there: no copy


def test_without_cupy_the_gpu_says_what_it_needs(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", None)
    why = devices.get_device("/gpu:0").unavailable()
    assert why == "needs CuPy, which is not installed (pip install '.[gpu]'), and a CUDA GPU"


def test_a_probe_made_before_cupy_was_imported_does_not_answer_for_a_blocked_cupy(monkeypatch):
    """The probe's key is the `cupy` module object; before the first import there is none, and
    the probe's own import adds it: a later stand-in (None blocks the import) is probed anew."""
    import sys
    import types
    from opsdk.runtime.devices import cuda
    fake = types.ModuleType("cupy")

    def probe_now():
        entry = sys.modules.setdefault("cupy", fake)  # what `import cupy` does the first time
        return (None, "fake: sees no GPU") if entry is fake else (None, "blocked")
    monkeypatch.setattr(cuda, "_probes", {})
    monkeypatch.setattr(cuda, "_probe_now", probe_now)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert cuda.probe_cupy() == (None, "fake: sees no GPU")
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert cuda.probe_cupy() == (None, "blocked")
