"""Partitioned variables in opsdk.v1 (opsdk/v1/partitioned.py): tf.get_variable with a
partitioner, the three partitioners, embedding lookups of shards ("mod" and "div"), their
gradients and updates, and placement of the shards by a replica device setter. The expected
values are those TensorFlow 2.21's compat.v1 printed for the same programs."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _numbered(emb):
    """Assign ops giving shard k the values 100 k + 0, 1, 2, ... in order."""
    return [v.assign(tf.reshape(tf.range(float(v.get_shape().num_elements())),
                                v.get_shape()) + 100.0 * k) for k, v in enumerate(emb)]


def test_the_partitioners_split_as_tensorflows():
    assert tf.fixed_size_partitioner(3)(tf.TensorShape([10, 4])) == [3, 1]
    assert tf.min_max_variable_partitioner(max_partitions=4, min_slice_size=64)(
        tf.TensorShape([10, 4]), dtype=tf.float32) == [3, 1]
    assert tf.min_max_variable_partitioner(max_partitions=8, min_slice_size=1 << 20)(
        tf.TensorShape([1000, 64]), dtype=tf.float32) == [1, 1]
    assert tf.variable_axis_size_partitioner(max_shard_bytes=48)(
        tf.TensorShape([10, 4]), dtype=tf.float32) == [4, 1]
    assert tf.variable_axis_size_partitioner(max_shard_bytes=1000, max_shards=3)(
        tf.TensorShape([1000, 64]), dtype=tf.float32) == [3, 1]
    assert tf.variable_axis_size_partitioner(max_shard_bytes=4096, axis=1)(
        tf.TensorShape([8, 300]), dtype=tf.float64) == [1, 5]


def test_get_variable_with_a_partitioner_makes_shards():
    emb = tf.get_variable("emb", [10, 4], initializer=tf.ones_initializer(),
                          partitioner=tf.fixed_size_partitioner(3))
    assert type(emb).__name__ == "PartitionedVariable" and len(emb) == 3
    assert [v.name for v in emb] == ["emb/part_0:0", "emb/part_1:0", "emb/part_2:0"]
    assert [v.get_shape().as_list() for v in emb] == [[4, 4], [3, 4], [3, 4]]
    assert emb.get_shape().as_list() == [10, 4] and emb.name == "emb"
    assert [v.name for v in tf.global_variables()] == [v.name for v in emb]
    with tf.variable_scope("s", partitioner=tf.fixed_size_partitioner(2)):
        w = tf.get_variable("w", [5, 3], initializer=tf.zeros_initializer())
    assert [v.get_shape().as_list() for v in w] == [[3, 3], [2, 3]]
    one = tf.get_variable("one", [3, 2], partitioner=tf.fixed_size_partitioner(1))
    assert [v.name for v in one] == ["one/part_0:0"]
    with tf.variable_scope("r", reuse=tf.AUTO_REUSE, partitioner=tf.fixed_size_partitioner(3)):
        assert tf.get_variable("a", [6]) is tf.get_variable("a", [6])
    parts = tf.create_partitioned_variables([6, 4], [1, 2], tf.zeros_initializer(), name="cp")
    assert [v.name for v in parts] == ["cp/part_0:0", "cp/part_1:0"]
    assert [v.get_shape().as_list() for v in parts] == [[6, 2], [6, 2]]


def test_lookups_read_each_shard_at_its_ids():
    emb = tf.get_variable("emb", [10, 4], partitioner=tf.fixed_size_partitioner(3))
    ids = tf.constant([0, 3, 5, 9, 1, 3])
    mod = tf.nn.embedding_lookup(emb, ids)
    div = tf.nn.embedding_lookup(emb, ids, partition_strategy="div")
    mod2 = tf.nn.embedding_lookup(list(emb), tf.constant([[0, 9], [4, 4]]))
    whole = tf.convert_to_tensor(emb)
    product = tf.matmul(tf.ones([2, 10]), emb)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(_numbered(emb))
        row = lambda k, r: [100.0 * k + 4 * r + c for c in range(4)]  # noqa: E731
        np.testing.assert_array_equal(s.run(mod), [row(0, 0), row(0, 1), row(2, 1), row(0, 3),
                                                   row(1, 0), row(0, 1)])
        np.testing.assert_array_equal(s.run(div), [row(0, 0), row(0, 3), row(1, 1), row(2, 2),
                                                   row(0, 1), row(0, 3)])
        np.testing.assert_array_equal(s.run(mod2), [[row(0, 0), row(0, 3)],
                                                    [row(1, 1), row(1, 1)]])
        np.testing.assert_array_equal(s.run(whole), [*(row(0, r) for r in range(4)),
                                                     *(row(1, r) for r in range(3)),
                                                     *(row(2, r) for r in range(3))])
        np.testing.assert_allclose(s.run(product), [[948.0, 958.0, 968.0, 978.0]] * 2,
                                   rtol=1e-6)


def test_the_gradient_of_a_lookup_reaches_each_shard_at_its_rows():
    emb = tf.get_variable("emb", [10, 4], partitioner=tf.fixed_size_partitioner(3))
    weights = tf.constant(np.arange(24).reshape(6, 4) * 1.0, tf.float32)
    loss = tf.reduce_sum(tf.nn.embedding_lookup(emb, tf.constant([0, 3, 5, 9, 1, 3])) * weights)
    grads = tf.gradients(loss, list(emb))
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(_numbered(emb))
        got = s.run(grads)
        np.testing.assert_array_equal(got[0], [[0, 1, 2, 3], [24, 26, 28, 30], [0, 0, 0, 0],
                                               [12, 13, 14, 15]])
        np.testing.assert_array_equal(got[1], [[16, 17, 18, 19], [0] * 4, [0] * 4])
        np.testing.assert_array_equal(got[2], [[0] * 4, [8, 9, 10, 11], [0] * 4])
        s.run(step)
        np.testing.assert_allclose(s.run(list(emb)[0])[1], [1.6, 2.4, 3.2, 4.0], rtol=1e-6)
        np.testing.assert_allclose(s.run(list(emb)[2])[1], [203.2, 204.1, 205.0, 205.9],
                                   rtol=1e-6)


def test_sparse_lookups_max_norm_and_array_initializers(tmp_path):
    emb = tf.get_variable("emb", [6, 2], initializer=tf.ones_initializer(),
                          partitioner=tf.fixed_size_partitioner(2))
    table = np.arange(8.0).reshape(4, 2).astype(np.float32)
    c = tf.get_variable("c", [4, 2], initializer=table, partitioner=tf.fixed_size_partitioner(2))
    ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([1, 5, 3], tf.int64), [2, 2])
    total = tf.reduce_sum(tf.nn.embedding_lookup_sparse(emb, ids, None, combiner="sum"))
    clipped = tf.nn.embedding_lookup(emb, [0, 5], max_norm=1.0)
    saver = tf.train.Saver([emb])  # the shards
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(total) == 6.0
        np.testing.assert_allclose(s.run(clipped), np.full((2, 2), 0.70710677), rtol=1e-6)
        np.testing.assert_array_equal(np.concatenate(s.run(list(c))), table)
        path = saver.save(s, str(tmp_path / "model"))
        s.run(emb.assign(tf.zeros([6, 2])))
        assert s.run(total) == 0.0
        saver.restore(s, path)
        assert s.run(total) == 6.0


def test_a_replica_device_setter_places_the_shards_in_turn_and_their_lookups_with_them():
    """Each shard's rows are gathered on its ps task, and their gradient made there: a step
    moves the rows asked for and their gradients, never a shard."""
    with tf.device(tf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker")):
        emb = tf.get_variable("emb", [10, 4], partitioner=tf.fixed_size_partitioner(3))
        w = tf.get_variable("w", [4, 2])
        ids = tf.placeholder(tf.int64, [8])
        loss = tf.reduce_sum(tf.matmul(tf.nn.embedding_lookup(emb, ids), w))
        tf.train.AdagradOptimizer(0.1).minimize(loss)
    assert [v.device for v in emb] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    assert w.device == "/job:ps/task:1"
    homes = {v.op: v.device for v in emb}

    def shard_of(t):  # the shard a tensor is the value of (the variable's, or a read of it)
        if t.op in homes:
            return homes[t.op]
        if t.op.type in ("read_variable", "identity") and t.op.inputs:
            return homes.get(t.op.inputs[0].op)
        return None
    readers = [(op, shard_of(t)) for op in tf.get_default_graph().get_operations()
               for t in op.inputs if shard_of(t) is not None]
    kinds = sorted({op.type for op, _ in readers})
    assert {"gather", "gather_grad"} <= set(kinds)
    assert all(op.device == home for op, home in readers), [(op.name, op.device, home)
                                                            for op, home in readers]


def test_bad_partitions_and_strategies_are_refused():
    with pytest.raises(OpsdkError, match="5 shards of a dim of size 3"):
        tf.get_variable("few", [3, 2], partitioner=tf.fixed_size_partitioner(5))
    with pytest.raises(OpsdkError, match="more than 1 in one dim at most"):
        tf.get_variable("two", [4, 4], partitioner=lambda shape, dtype=None: [2, 2])
    emb = tf.get_variable("emb", [4, 2], partitioner=tf.fixed_size_partitioner(2))
    with pytest.raises(OpsdkError, match="partition_strategy 'both'; give 'mod' or 'div'"):
        tf.nn.embedding_lookup(emb, [1], partition_strategy="both")
    with pytest.raises(OpsdkError, match="ids must be int32 or int64"):
        tf.nn.embedding_lookup(emb, tf.constant([1.0]))
