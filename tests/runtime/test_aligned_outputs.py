"""Outputs of 64 KiB and more from a built cpu kernel's glue start on a 64-byte boundary, their
memory owned by the glue's capsule (opsdk/include/opsdk/glue.h: empty); the buffer pool, donation
and in-place updates treat them as owning their memory, and their views keep them out of the
pool as a view of any array does (docs/internals.md, Aligned outputs)."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk import ops
from opsdk.registry import load_registry
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.kernels.buffers import BufferPool, owns_memory, release
from opsdk.runtime.kernels.choice import choose_kernel

pytestmark = pytest.mark.usefixtures("host_default")


@pytest.fixture(scope="module", autouse=True)
def built_relu_grad():
    if choose_kernel(load_registry().get("relu_grad")).kind != "cpu":
        pytest.fail("relu_grad's cpu kernel is not built: run `opsdk build`")


def _relu_grad(shape, dtype=np.float32):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    return ops.relu_grad(x, x)


@pytest.mark.parametrize("shape,dtype", [((256, 256), np.float32), ((128, 65), np.float64),
                                         ((3, 129, 43), np.float32)])
def test_large_outputs_start_on_a_cache_line_and_own_their_memory(shape, dtype):
    out = _relu_grad(shape, dtype)
    assert out.nbytes >= 64 * 1024
    assert out.ctypes.data % 64 == 0 and out.base is not None and owns_memory(out)
    assert out.flags.c_contiguous and out.flags.writeable and out.flags.aligned
    small = _relu_grad((8, 8))
    assert small.base is None and owns_memory(small)
    assert not owns_memory(out[1:])  # a view


def _thp_mode():
    """Linux's transparent huge page mode ("always", "madvise", "never"), or None."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.index("[") + 1:text.index("]")] if "[" in text else None


def _thp_eligible(address: int) -> bool:
    """Whether the mapping holding `address` may get huge pages (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "THPeligible:":
                return line.split()[1] == "1"
    raise AssertionError(f"no mapping in /proc/self/smaps holds {address:#x}")


@pytest.mark.skipif(_thp_mode() != "madvise",
                    reason="needs Linux's transparent huge pages in their madvise mode (where only "
                           "memory marked for them gets them)")
def test_outputs_of_4_mib_and_more_ask_for_huge_pages():
    # A fresh 64 MiB output faulted in 16,384 small pages one by one: the flagship's forward at
    # n=m=4096 took 101.4 ms so, against 79.4 ms marked. NumPy marks its own arrays from 4 MiB;
    # the glue's did not.
    big = _relu_grad((1024, 2048))  # 8 MiB
    assert big.base is not None and _thp_eligible(big.ctypes.data + big.nbytes // 2)


def test_an_aligned_output_goes_to_the_pool_unless_a_view_holds_it(monkeypatch):
    from opsdk.runtime.kernels import eager
    # the glue's own arrays: eager calls lend none (a lent result is a view, never pooled)
    monkeypatch.setitem(eager._eager_pool, "pool", None)
    pool = BufferPool(1 << 24)
    key = ("/device:CPU:0", np.dtype("float32"), (256, 256))
    values = [_relu_grad((256, 256))]
    view = values[0][:4]
    release(pool, key, values, 0)
    assert pool.bytes == 0  # the view holds it
    del view
    values = [_relu_grad((256, 256))]
    release(pool, key, values, 0)
    assert pool.bytes == 256 * 256 * 4 and pool.take(key) is not None


def test_a_session_reuses_aligned_outputs(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [256, 256], name="x")
        a = apply_op(registry, "relu_grad", [x, x], {}, name="a")
        b = apply_op(registry, "relu_grad", [a, a], {}, name="b")  # a read twice: not donated
        c = apply_op(registry, "relu_grad", [b, a], {}, name="c")
    feed = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
    want = np.where(feed > 0, feed, 0)
    with Session(g, SessionConfig(passes_off=frozenset({"fuse"}), buffer_pool_bytes=1 << 24)) as sess:
        for _ in range(4):
            got = sess.run(c, {x: feed})
            np.testing.assert_array_equal(got, want)
        taken = sess.buffers.taken
    assert got.ctypes.data % 64 == 0
    assert taken >= 1  # later runs took the aligned buffers earlier runs gave back


def test_a_variable_holding_an_aligned_output_is_updated_without_writing_into_it(registry):
    # A glue array stored in a variable is frozen (read-only) like every stored value, and
    # NumPy cannot make it writeable again (its base is the capsule, not a buffer): an in-place
    # update must take a fresh array then, not fail. It did fail once a fresh update (a step
    # whose other reader held the value) had stored a kernel's output.
    import opsdk
    from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
    from opsdk.runtime.train.optimizers import GradientDescentOptimizer

    g = Graph()
    with g.as_default():
        w = Variable(np.zeros((256, 256), np.float32), name="w")
        x = placeholder("float32", [256, 256], name="x")
        glue = w.assign(apply_op(registry, "relu_grad", [x, x], {}, name="glue"))
        train = GradientDescentOptimizer(0.5).minimize(opsdk.ops.reduce_sum(w.value() * x))
        init = global_variables_initializer(g)
    feed = np.random.default_rng(2).standard_normal((256, 256)).astype(np.float32)
    with Session(g) as sess:
        sess.run(init)
        sess.run(glue, {x: feed})  # w now holds the kernel's own (aligned) array
        for _ in range(2):
            sess.run(train, {x: feed})
        got = sess.run(w.value())
    np.testing.assert_allclose(got, np.where(feed > 0, feed, 0) - 2 * 0.5 * feed, rtol=1e-6)


def test_a_row_read_as_a_view_keeps_its_value_through_an_in_place_update():
    # gather of one row along axis 0 hands out a view of params (no copy). A view holds its
    # base, so a variable update later in the same step cannot write into the array the row
    # shows (the update takes a fresh array): a reader after the update sees the old row.
    import opsdk
    from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
    from opsdk.runtime.train.optimizers import GradientDescentOptimizer

    g = Graph()
    with g.as_default():
        start = np.arange(12, dtype=np.float64).reshape(4, 3)
        w = Variable(start.copy(), name="w")
        row = opsdk.ops.gather(w.value(), opsdk.constant(np.int32(2)))
        train = GradientDescentOptimizer(1.0).minimize(opsdk.ops.reduce_sum(w.value()))
        with g.control_dependencies([train]):
            later = row * 1.0
        init = global_variables_initializer(g)
    with Session(g) as sess:
        sess.run(init)
        for step in range(3):
            np.testing.assert_array_equal(sess.run(later), start[2] - step)
        np.testing.assert_array_equal(sess.run(w.value()), start - 3)
