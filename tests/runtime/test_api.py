"""apply_op: eager calls on NumPy values, graph mode by context or by Tensor inputs, and the
errors of both that name the op."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.kernels import call_cache
from opsdk.runtime.frontend.api import apply_op, workspace_applier
from opsdk.runtime.kernels.call_cache import EAGER_CALLS, eager_key
from opsdk.runtime.ir.graph import Graph, Tensor, placeholder
from opsdk.runtime.exec.session import Session


def test_eager_call_returns_numpy(registry):
    out = apply_op(registry, "add", [np.ones(3, np.float32), 2], {})
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [3.0, 3.0, 3.0])
    s, d = apply_op(registry, "split_sum", [[1.0, 2.0], [0.5, 0.5]], {})
    np.testing.assert_array_equal(s, [1.5, 2.5])
    np.testing.assert_array_equal(d, [0.5, 1.5])


def test_eager_validates_shapes_and_attrs(registry):
    with pytest.raises(OpError, match=r"^l1_dist: input 'y' has 3 columns but x has 4 \(dim p\)"):
        apply_op(registry, "l1_dist", [np.zeros((2, 4)), np.zeros((5, 3))], {})
    with pytest.raises(OpError, match=r"^reduce_sum: unknown attr 'axs'"):
        apply_op(registry, "reduce_sum", [np.zeros(3)], {"axs": [0]})
    with pytest.raises(OpError, match="takes 2 input"):
        apply_op(registry, "add", [np.zeros(3)], {})


def test_eager_kernel_error_carries_op_name(registry):
    with pytest.raises(OpError) as err:
        apply_op(registry, "explode", [np.zeros(2)], {})
    assert str(err.value) == "explode: ValueError: bad input"


def test_eager_device_choice(registry):
    assert apply_op(registry, "add", [1.0, 2.0], {}, device="python") == 3.0
    with pytest.raises(OpsdkError, match="op 'add': no cpu kernel declared"):
        apply_op(registry, "add", [1.0, 2.0], {}, device="cpu")


def test_graph_mode_inside_context_and_from_tensor_inputs(registry):
    g = Graph()
    with g.as_default():
        inside = apply_op(registry, "add", [np.ones(2), np.ones(2)], {}, name="inside")
        x = placeholder("float64", [2], name="x")
    outside = apply_op(registry, "mul", [x, 3.0], {}, name="outside")  # a Tensor input: graph mode
    assert isinstance(inside, Tensor) and isinstance(outside, Tensor)
    assert outside.graph is g and outside.op.inputs[1].dtype == "float64"
    with Session(g) as sess:
        got = sess.run([inside, outside], {x: [1.0, 2.0]})
    np.testing.assert_array_equal(got[1], [3.0, 6.0])


def test_type_attr_and_attrs_in_a_graph(registry):
    g = Graph()
    with g.as_default():
        z = apply_op(registry, "zeros", [], {"shape": [2, 3], "dtype": "float32"}, name="z")
        total = apply_op(registry, "reduce_sum", [z + 1.0], {"axes": [1]})
    assert z.shape == (2, 3) and z.dtype == "float32" and z.op.type_attrs == {"dtype": "float32"}
    with Session(g) as sess:
        np.testing.assert_array_equal(sess.run(total), [3.0, 3.0])


def test_workspace_applier_binds_its_registry_once(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "twice.yaml").write_text(textwrap.dedent("""
        op: twice
        summary: 2 x.
        type_attrs:
          T: [float64]
        inputs:
          x: {dtype: T, shape: [n]}
        outputs:
          y: {dtype: T, shape: [n]}
        kernels:
          python: twice_kernel.py:twice
        """))
    (tmp_path / "opdefs" / "twice_kernel.py").write_text("def twice(xp, x):\n    return x * 2\n")
    ops = workspace_applier(tmp_path)
    np.testing.assert_array_equal(ops("twice", [np.ones(2)], {}), [2.0, 2.0])
    np.testing.assert_array_equal(ops("add", [np.ones(2), np.ones(2)], {}), [2.0, 2.0])


# ---- the eager call cache (opsdk/runtime/kernels/call_cache.py) ---------------------------------------

def _message(call) -> str:
    with pytest.raises(OpsdkError) as err:
        call()
    return str(err.value)


def test_repeated_eager_calls_run_the_kernel_every_time(registry, hooks):
    x = np.arange(3, dtype=np.float32)
    for i in range(3):
        np.testing.assert_array_equal(apply_op(registry, "counted_add", [x, x + i], {}), 2 * x + i)
    assert hooks["calls"]["counted_add"] == 3
    key = eager_key(registry.get("counted_add"), [x, x], {}, None)
    assert EAGER_CALLS.data[key].spec is registry.get("counted_add")


def test_errors_after_a_cached_call_read_as_on_a_first_call(registry):
    x2, x3 = np.zeros(2, np.float32), np.zeros(3, np.float32)
    wrong_shapes = lambda: apply_op(registry, "counted_add", [x2, x3], {})  # noqa: E731
    EAGER_CALLS.clear()
    first = _message(wrong_shapes)
    apply_op(registry, "counted_add", [x2, x2], {})  # cached for (float32, float32)
    assert _message(wrong_shapes) == first
    assert first.startswith("counted_add: input 'y' has size 3")
    # An attr equal in Python (False == 0) but of another type is still refused.
    apply_op(registry, "reduce_sum", [x3], {"axes": [], "keepdims": False})
    assert _message(lambda: apply_op(registry, "reduce_sum", [x3], {"axes": [], "keepdims": 0})) \
        == "reduce_sum: attr 'keepdims' must be true or false, got 0"


def test_eager_attrs_key_floats_by_their_bits(registry):
    zero = apply_op(registry, "fill", [], {"shape": [2], "value": 0.0})
    negative_zero = apply_op(registry, "fill", [], {"shape": [2], "value": -0.0})
    assert not np.signbit(zero).any() and np.signbit(negative_zero).all()


def test_an_edited_kernel_is_picked_up_after_the_recheck_interval(tmp_path, monkeypatch):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "bump.yaml").write_text(textwrap.dedent("""
        op: bump
        summary: x + a constant.
        type_attrs:
          T: [float64]
        inputs:
          x: {dtype: T, shape: [n]}
        outputs:
          y: {dtype: T, shape: [n]}
        kernels:
          python: bump_kernel.py:bump
        """))
    source = tmp_path / "opdefs" / "bump_kernel.py"
    source.write_text("def bump(xp, x):\n    return x + 1\n")
    ops = workspace_applier(tmp_path)
    x = np.zeros(2)
    monkeypatch.setattr(call_cache, "RECHECK_S", 3600.0)
    np.testing.assert_array_equal(ops("bump", [x], {}), [1.0, 1.0])
    source.write_text("def bump(xp, x):\n    return x + 2\n")
    later = source.stat().st_mtime + 10  # a new mtime, however coarse the file system's clock
    os.utime(source, (later, later))
    np.testing.assert_array_equal(ops("bump", [x], {}), [1.0, 1.0])  # not re-resolved yet
    monkeypatch.setattr(call_cache, "RECHECK_S", 0.0)
    np.testing.assert_array_equal(ops("bump", [x], {}), [2.0, 2.0])


def test_an_eager_python_number_must_fit_the_inputs_dtype(registry):
    with pytest.raises(OpsdkError, match=r"^add: input 'y' is 1e\+300, which float32 cannot"):
        apply_op(registry, "add", [np.ones(2, np.float32), 1e300], {})
    assert apply_op(registry, "add", [np.ones(2, np.float32), 2], {}).dtype == np.float32


class _DLPackOnly:
    """An array that offers nothing but DLPack (as a foreign framework's would)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_an_eager_call_takes_any_dlpack_array_without_a_copy(registry):
    x = np.arange(6.0).reshape(2, 3)
    got = apply_op(registry, "reduce_sum", [_DLPackOnly(x)], {"axes": [1]})
    assert got.tolist() == [3.0, 12.0]


def test_torch_and_jax_arrays_come_back_as_their_kind(registry):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install '.[torch]')")
    t = torch.arange(3.0)  # (one that requires grad is refused: tests/frameworks/test_torch.py)
    out = apply_op(registry, "exp", [t], {})
    assert isinstance(out, torch.Tensor) and torch.allclose(out, torch.exp(t.detach()))
    jnp = pytest.importorskip("jax.numpy", reason="jax is not installed (pip install '.[jax]')")
    out = apply_op(registry, "add", [jnp.ones(2), jnp.ones(2)], {})
    assert type(out).__module__.startswith("jax") and out.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("op_name, inputs, words", [
    ("add", [[[1.0, 2.0], [3.0]], np.ones(2)], "add: input 'x' is not an array: setting an"),
    ("add", [np.array(["a", "b"]), np.ones(2)], "add: input 'x' has dtype str32; expected"),
    ("add", [np.array([object(), 1]), np.ones(2)], "add: input 'x' has dtype object; expected"),
    ("concat", [[np.ones(2), [[1.0], [2.0, 3.0]]]], "concat: input 'xs' is not an array"),
])
def test_bad_kernel_inputs_name_the_op_and_the_input(registry, op_name, inputs, words):
    with pytest.raises(OpError) as info:
        apply_op(registry, op_name, inputs, {"axis": 0} if op_name == "concat" else {})
    assert str(info.value).startswith(words)


def test_an_allocation_failure_is_a_memory_error_naming_the_op(registry):
    with pytest.raises(MemoryError) as info:
        apply_op(registry, "zeros", [], {"shape": [10**7, 10**7], "dtype": "float32"})
    assert isinstance(info.value, OpsdkError) and str(info.value).startswith("zeros: out of memory")


def test_a_ragged_feed_names_the_tensor(graph, registry):
    from opsdk.runtime.exec.session import Session
    x = placeholder("float64", [None], name="x")
    y = apply_op(registry, "exp", [x], {})
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=r"^feed for 'x:0': the fed value is not an array"):
            sess.run(y, {x: [[1.0], [2.0, 3.0]]})
