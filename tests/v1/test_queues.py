"""TF1's queues, queue runners, producers, batchers and readers in opsdk.v1 (opsdk/v1/queues.py,
opsdk/v1/readers.py): the values and errors TF1 gives on the same programs (compared side by
side with TensorFlow's compat.v1 when these tests were written), and every wait stopping."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def drain(sess, fetch, limit=100):
    """Run fetch until OutOfRangeError; the values."""
    got = []
    with pytest.raises(tf.errors.OutOfRangeError):
        for _ in range(limit):
            got.append(sess.run(fetch))
    return got


def test_a_fifo_queue_enqueues_dequeues_and_closes_as_tf():
    q = tf.FIFOQueue(3, [tf.float32, tf.int32], shapes=[[2], []])
    enqueue = q.enqueue_many([[[1., 2.], [3., 4.], [5., 6.]], [7, 8, 9]])
    x, y = q.dequeue()
    xs, ys = q.dequeue_many(2)
    assert x.get_shape().as_list() == [2] and xs.get_shape().as_list() == [2, 2]
    with tf.Session() as sess:
        sess.run(enqueue)
        assert sess.run(q.size()) == 3
        got = sess.run([x, y])
        np.testing.assert_array_equal(got[0], [1, 2])
        assert got[1] == 7
        many = sess.run([xs, ys])
        np.testing.assert_array_equal(many[0], [[3, 4], [5, 6]])
        np.testing.assert_array_equal(many[1], [8, 9])
        sess.run(q.close())
        assert sess.run(q.is_closed())
        with pytest.raises(tf.errors.OutOfRangeError, match="is closed and has insufficient "
                                                            "elements"):
            sess.run(x)
        with pytest.raises(tf.errors.CancelledError, match="is closed"):
            sess.run(enqueue)


def test_each_session_has_its_own_queue():
    q = tf.FIFOQueue(2, tf.int32)
    put, size = q.enqueue(5), q.size()
    with tf.Session() as one, tf.Session() as two:
        one.run(put)
        assert one.run(size) == 1 and two.run(size) == 0


def test_a_padding_queue_pads_and_a_plain_one_names_the_shapes():
    pad = tf.PaddingFIFOQueue(4, [tf.int32], shapes=[[None]])
    plain = tf.FIFOQueue(4, [tf.int32])
    v = tf.placeholder(tf.int32, [None])
    with tf.Session() as sess:
        for row in ([1], [2, 3, 4]):
            sess.run([pad.enqueue([v]), plain.enqueue([v])], {v: row})
        np.testing.assert_array_equal(sess.run(pad.dequeue_many(2)), [[1, 0, 0], [2, 3, 4]])
        with pytest.raises(OpsdkError, match=r"shapes \[\(1,\), \(3,\)\]; a batch needs one "
                                             r"shape \(a PaddingFIFOQueue pads them\)"):
            sess.run(plain.dequeue_many(2))


def test_waits_end_on_a_timeout_and_on_close_from_another_thread():
    q = tf.FIFOQueue(1, tf.float32)
    value, put = q.dequeue(), q.enqueue(1.0)
    with tf.Session() as sess:
        start = time.monotonic()
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(value, options=tf.RunOptions(timeout_in_ms=200))
        sess.run(put)
        with pytest.raises(tf.errors.DeadlineExceededError):  # full: the enqueue waits
            sess.run(put, options=tf.RunOptions(timeout_in_ms=200))
        assert time.monotonic() - start < 5
        sess.run(value)
        threading.Timer(0.2, sess.close).start()
        with pytest.raises(tf.errors.CancelledError):
            sess.run(value)


def test_slice_input_producer_and_batch_run_their_epochs_then_end():
    data = np.arange(10, dtype=np.float32).reshape(10, 1)
    labels = np.arange(10, dtype=np.int32)
    d, l = tf.train.slice_input_producer([data, labels], num_epochs=2, shuffle=False)
    bd, bl = tf.train.batch([d, l], batch_size=4, allow_smaller_final_batch=True)
    assert bd.get_shape().as_list() == [None, 1] and bl.get_shape().as_list() == [None]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        got = drain(sess, bl)
        coord.request_stop()
        coord.join(threads)
    assert [g.tolist() for g in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5],
                                         [6, 7, 8, 9]]


def test_shuffle_batch_draws_every_element_and_a_list_of_one_gives_a_tensor():
    labels = np.arange(10, dtype=np.int32)
    label, = tf.train.slice_input_producer([labels], shuffle=True, seed=1)
    batch = tf.train.shuffle_batch([label], batch_size=5, capacity=20, min_after_dequeue=5,
                                   seed=2, num_threads=2)
    assert isinstance(batch, tf.Tensor) and batch.get_shape().as_list() == [5]
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        seen = [sess.run(batch).tolist() for _ in range(20)]
        coord.request_stop()
        coord.join(threads)
    assert set(sum(seen, [])) == set(range(10))
    assert seen[:2] != [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]  # drawn, not in order


def test_a_monitored_session_starts_the_queue_runners_and_stops_at_the_end():
    x, = tf.train.slice_input_producer([np.arange(6, dtype=np.float32)], num_epochs=1,
                                       shuffle=False)
    batch = tf.train.batch([x], batch_size=4, allow_smaller_final_batch=True)
    got = []
    with tf.train.MonitoredTrainingSession() as sess:
        while not sess.should_stop():
            got.append(sess.run(batch).tolist())
    assert got == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]


def test_readers_and_decoders_read_files_as_tf(tmp_path):
    (tmp_path / "a.csv").write_text('x,y,name\n1.5,2,foo\n,3,"b,ar"\n4,5,baz\n')
    (tmp_path / "b.csv").write_bytes(b"x,y,name\r\n7,8,qux\r\n")
    records = np.arange(14, dtype=np.uint8).reshape(2, 7)
    records[1, -1] = 0  # a record ending in a zero byte keeps it
    (tmp_path / "r.bin").write_bytes(b"HH" + records.tobytes() + b"F")
    names = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    files = tf.train.string_input_producer(names, num_epochs=1, shuffle=False)
    key, value = tf.TextLineReader(skip_header_lines=1).read(files)
    x, y, name = tf.decode_csv(value, record_defaults=[[0.5], [0], [""]])
    binary = tf.train.string_input_producer([str(tmp_path / "r.bin")], num_epochs=1,
                                            shuffle=False)
    record_key, record = tf.FixedLengthRecordReader(record_bytes=7, header_bytes=2,
                                                    footer_bytes=1).read(binary)
    raw = tf.decode_raw(record, tf.uint8)
    whole = tf.train.string_input_producer([names[1]], num_epochs=1)
    file_name, contents = tf.WholeFileReader().read(whole)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        rows = drain(sess, [key, x, y, name])
        first, second = sess.run([record_key, raw]), sess.run([record_key, raw])
        whole_file = sess.run([file_name, contents])
        coord.request_stop()
        coord.join(threads)
    a, b = names[0].encode(), names[1].encode()
    assert [[r[0], float(r[1]), int(r[2]), r[3]] for r in rows] == [
        [a + b":2", 1.5, 2, b"foo"], [a + b":3", 0.5, 3, b"b,ar"], [a + b":4", 4.0, 5, b"baz"],
        [b + b":2", 7.0, 8, b"qux"]]
    assert first[0].endswith(b"r.bin:0") and second[0].endswith(b"r.bin:1")
    np.testing.assert_array_equal(first[1], records[0])
    np.testing.assert_array_equal(second[1], records[1])
    assert whole_file == [b, b"x,y,name\r\n7,8,qux\r\n"]


def test_decode_csv_of_a_vector_and_its_errors():
    columns = tf.decode_csv(tf.constant(["1,a", "2,b"]), [tf.constant([], tf.int32), ["z"]])
    bad = tf.placeholder(tf.string, [])
    number, word = tf.decode_csv(bad, [[1.0], tf.constant([], tf.string)])
    with tf.Session() as sess:
        got = sess.run(columns)
        np.testing.assert_array_equal(got[0], [1, 2])
        assert got[1].tolist() == [b"a", b"b"]
        assert sess.run([number, word], {bad: ",x"}) == [1.0, b"x"]
        with pytest.raises(tf.errors.InvalidArgumentError, match="field 1 is required but "
                                                                 "missing in record 0"):
            sess.run(word, {bad: "2,"})
        with pytest.raises(tf.errors.InvalidArgumentError, match="expect 2 fields but have 3"):
            sess.run(word, {bad: "2,x,y"})
        with pytest.raises(tf.errors.InvalidArgumentError, match="field 0 in record 0 is not "
                                                                 "a valid float32"):
            sess.run(number, {bad: "two,x"})


def test_a_reader_names_a_missing_file_and_wants_a_string_queue(tmp_path):
    files = tf.train.string_input_producer([str(tmp_path / "missing.csv")])
    _, line = tf.TextLineReader().read(files)
    with pytest.raises(OpsdkError, match="give the queue of file names"):
        tf.TextLineReader().read(tf.FIFOQueue(2, tf.int32))
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        with pytest.raises(tf.errors.NotFoundError, match="missing.csv"):
            sess.run(line)
        coord.request_stop()
        coord.join(threads)


def test_match_filenames_once_feeds_a_producer_and_a_dataset(tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(name + "\n")
    files = tf.train.match_filenames_once(str(tmp_path / "*.txt"))
    queue = tf.train.string_input_producer(files, num_epochs=1, shuffle=False)
    _, line = tf.TextLineReader().read(queue)
    lines = tf.data.TextLineDataset(files).make_initializable_iterator()
    with tf.Session() as sess:
        sess.run([tf.local_variables_initializer(), lines.initializer])
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert sess.run(files).tolist() == [str(tmp_path / n).encode() for n in ("a.txt",
                                                                                  "b.txt")]
        assert [sess.run(line), sess.run(line)] == [b"a.txt", b"b.txt"]
        assert [sess.run(lines.get_next()) for _ in range(2)] == [b"a.txt", b"b.txt"]
        coord.request_stop()
        coord.join(threads)


def test_contrib_regularizers():
    w = tf.constant([[1.0, -2.0], [3.0, 0.5]])
    l1 = tf.contrib.layers.l1_regularizer(0.1)(w)
    l2 = tf.contrib.layers.l2_regularizer(0.01)(w)
    both = tf.contrib.layers.l1_l2_regularizer(0.1, 0.01)(w)
    assert tf.contrib.layers.l2_regularizer(0.0)(w) is None
    with tf.Session() as sess:
        got = sess.run([l1, l2, both])
    np.testing.assert_allclose(got, [0.65, 0.07125, 0.72125], rtol=1e-6)
