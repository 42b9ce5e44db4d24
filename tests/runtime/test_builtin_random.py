"""random_uniform and random_normal: dtype, shape, range, and the documented seed semantics
(seed 0: fresh values per execution; any other seed: the same values every time, or with
attr sequence the next values of its sequence at each run of a session)."""

from __future__ import annotations

import numpy as np
import pytest

from test_builtin_ops import run


def uniform(seed, shape=(1000,), dtype="float32", minval=-1.0, maxval=3.0):
    return run("random_uniform", [], {"shape": list(shape), "seed": seed, "minval": minval,
                                      "maxval": maxval, "dtype": np.dtype(dtype)})


def normal(seed, shape=(4000,), dtype="float32", mean=2.0, stddev=0.5):
    return run("random_normal", [], {"shape": list(shape), "seed": seed, "mean": mean,
                                     "stddev": stddev, "dtype": np.dtype(dtype)})


@pytest.mark.parametrize("draw", [uniform, normal])
def test_nonzero_seed_repeats_and_seeds_differ(draw):
    a, b = draw(5), draw(5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, draw(6))


@pytest.mark.parametrize("draw", [uniform, normal])
def test_seed_zero_draws_fresh_values(draw):
    assert not np.array_equal(draw(0), draw(0))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_uniform_dtype_shape_and_half_open_range(dtype):
    u = uniform(3, shape=(50, 40), dtype=dtype)
    assert u.dtype == np.dtype(dtype) and u.shape == (50, 40)
    assert u.min() >= -1.0 and u.max() < 3.0
    assert abs(float(u.mean()) - 1.0) < 0.1  # the middle of [-1, 3)


def test_uniform_narrowing_never_reaches_maxval():
    # Values just below 1 round up to 1.0 in float16; the op must keep maxval excluded.
    u = uniform(9, shape=(20000,), dtype="float16", minval=0.0, maxval=1.0)
    assert u.max() < 1.0


def test_uniform_rejects_empty_interval():
    with pytest.raises(ValueError, match="minval 2.0 must be less than maxval 1.0"):
        uniform(1, minval=2.0, maxval=1.0)


def test_normal_moments():
    z = normal(4, dtype="float64")
    assert z.dtype == np.float64
    assert abs(z.mean() - 2.0) < 0.05 and abs(z.std() - 0.5) < 0.05


def test_a_sequence_node_draws_its_next_values_per_run_one_sequence_per_session():
    import opsdk

    graph = opsdk.Graph()
    with graph.as_default():
        seq = opsdk.ops.random_normal(shape=[6], seed=5, sequence=True)
        fixed = opsdk.ops.random_normal(shape=[6], seed=5)
        doubled = seq * 2.0  # another plan (another fetch) running the same node
    expected = np.random.default_rng(5)
    first_three = [expected.standard_normal(6).astype(np.float32) for _ in range(3)]
    with opsdk.Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(seq), first_three[0])
        np.testing.assert_array_equal(sess.run(doubled), 2 * first_three[1])  # the session's
        np.testing.assert_array_equal(sess.run(seq), first_three[2])          # one sequence
        np.testing.assert_array_equal(sess.run(fixed), first_three[0])  # no sequence: repeats
        np.testing.assert_array_equal(sess.run(fixed), first_three[0])
    with opsdk.Session(graph) as sess:  # a new session starts the sequence again
        np.testing.assert_array_equal(sess.run(seq), first_three[0])
