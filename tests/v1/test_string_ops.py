"""TF1's string ops in opsdk.v1 (opsdk/v1/string_ops.py), with the values TF's compat.v1 gave on
the same calls when the module was written."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def test_equal_compares_strings_as_strings():
    # Before, tf.equal compared the strings' bytes: a [n, width] bool array, silently wrong.
    words = tf.constant(["ab", "c", "hello world"])
    fed = tf.placeholder(tf.string, [])
    grid = tf.constant([["a", "bb"], ["ccc", "d"]])
    got = run([tf.equal(words, tf.constant("ab")), tf.not_equal(words, "c"),
               tf.equal(fed, "xy"), tf.equal(grid, "d"), tf.equal(tf.constant([1, 2]), 2)],
              {fed: "xy"})
    assert got[0].tolist() == [True, False, False] and got[1].tolist() == [True, False, True]
    assert got[2] == True  # noqa: E712 - a NumPy bool
    assert got[3].tolist() == [[False, False], [False, True]]
    assert got[4].tolist() == [False, True]  # numbers as before


def test_the_string_ops():
    words = tf.constant(["ab", "c", "hello world"])
    grid = tf.constant([["a", "bb"], ["ccc", "d"]])
    got = run([tf.string_join([words, "!"], separator="-"), tf.substr(words, 1, 2),
               tf.string_to_number(tf.constant(["1.5", "-2"])),
               tf.string_to_number(tf.constant(["7", "8"]), out_type=tf.int32),
               tf.as_string(tf.constant([1.5, 2.0])), tf.as_string(tf.constant([3, 4])),
               tf.string_strip(tf.constant([" a ", "b  "])),
               tf.regex_replace(words, "l+", "L"), tf.reduce_join(grid),
               tf.reduce_join(grid, 1, separator=","), tf.strings.length(words),
               tf.strings.upper(words), tf.strings.regex_full_match(words, "[a-z]+"),
               tf.strings.join([grid, grid])])
    want = [[b"ab-!", b"c-!", b"hello world-!"], [b"b", b"", b"el"], [1.5, -2.0], [7, 8],
            [b"1.500000", b"2.000000"], [b"3", b"4"], [b"a", b"b"],
            [b"ab", b"c", b"heLo worLd"], b"abbcccd", [b"a,bb", b"ccc,d"], [2, 1, 11],
            [b"AB", b"C", b"HELLO WORLD"], [True, True, False],
            [[b"aa", b"bbbb"], [b"cccccc", b"dd"]]]
    for g, w in zip(got, want):
        assert np.asarray(g).tolist() == w
    assert got[3].dtype == np.int32


def test_string_split_gives_a_sparse_tensor_of_pieces():
    spaced, marked = run([tf.string_split(tf.constant(["a b  c", "d", ""])),
                          tf.string_split(tf.constant(["a,b;c"]), delimiter=",;")])
    assert spaced.indices.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0]]
    assert spaced.values.tolist() == [b"a", b"b", b"c", b"d"]
    assert spaced.dense_shape.tolist() == [3, 3]
    assert marked.values.tolist() == [b"a", b"b", b"c"] and marked.dense_shape.tolist() == [1, 3]


def test_mistakes_are_named():
    with pytest.raises(tf.errors.InvalidArgumentError, match="could not correctly convert "
                                                             "string: x1"):
        run(tf.string_to_number(tf.constant(["x1"])))
    with pytest.raises(tf.OpsdkError, match="source must be a vector of strings"):
        tf.string_split(tf.constant("a b"))
    with pytest.raises(tf.OpsdkError, match="not strings"):
        tf.substr(tf.constant([1, 2]), 0, 1)


def test_structural_ops_move_whole_strings():
    # Before, they moved the strings' bytes: tf.reshape of 4 strings to [2, 2] failed or mixed
    # bytes of different strings; get_shape() counted the bytes as an axis.
    words = tf.constant(["ab", "c", "hello", "x"])
    square = tf.reshape(words, [2, 2])
    assert words.get_shape().as_list() == [4] and square.get_shape().ndims == 2
    assert tf.constant("abc").get_shape().as_list() == []
    got = run([square, tf.expand_dims(words, 0), tf.squeeze(tf.reshape(words, [1, 4])),
               tf.transpose(square), tf.concat([words, tf.constant(["zz"])], 0),
               tf.stack([words, words], axis=1), tf.gather(words, [3, 0]),
               tf.gather(square, [1], axis=1), tf.reshape(tf.constant([1, 2, 3, 4]), [2, 2])])
    w = np.array([b"ab", b"c", b"hello", b"x"], dtype=object)
    want = [w.reshape(2, 2), w[None], w, w.reshape(2, 2).T, np.append(w, b"zz"),
            np.stack([w, w], 1), w[[3, 0]], w.reshape(2, 2)[:, [1]], [[1, 2], [3, 4]]]
    for g, v in zip(got, want):
        assert np.asarray(g).tolist() == np.asarray(v).tolist()
