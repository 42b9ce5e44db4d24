"""The builtin op einsum and its gradient op: equations of operands of different shapes (the
gradcheck of opdefs/builtin/reduce.yaml draws one shape for all) against NumPy and central
finite differences, and the equations the op refuses."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
from opsdk import ops
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad

CASES = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
         ("ij,jk->kji", [(2, 3), (3, 4)]), ("bij,i->bj", [(2, 3, 4), (3,)]),
         ("i,j->ij", [(3,), (4,)]), ("ijk,kl,l->ij", [(2, 3, 4), (4, 2), (2,)]),
         ("ij,->ij", [(2, 3), ()]), ("abc,cd->", [(2, 2, 3), (3, 2)])]


@pytest.mark.parametrize("equation, shapes", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_numpy_and_finite_differences(equation, shapes):
    rng = np.random.default_rng(len(equation))
    values = [rng.normal(size=s) for s in shapes]
    g = opsdk.Graph()
    with g.as_default():
        xs = [opsdk.placeholder("float64", list(s), name=f"x{k}") for k, s in enumerate(shapes)]
        y = ops.einsum(xs, equation=equation)
        loss = ops.reduce_sum(y * y)
        grads = opsdk.gradients(loss, xs)
    expected = np.einsum(equation, *values)
    assert y.shape == expected.shape
    feeds = dict(zip(xs, values))
    with opsdk.Session(g) as sess:
        got, *got_grads = sess.run([y, *grads], feeds)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        assert got.shape == expected.shape
        for x, grad in zip(xs, got_grads):
            np.testing.assert_allclose(grad, numeric_grad(sess, loss, x, feeds), rtol=1e-6,
                                       atol=1e-7)


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk", [(2, 3), (3, 4)], "must name the output after one '->'"),
    ("...ij,jk->...ik", [(2, 3), (3, 4)], r"'\.\.\.' is not taken"),
    ("ii->i", [(3, 3)], "repeats a letter"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "letter 'j' is 3 in one operand and 4 in operand 1"),
    ("ijk,jk->ik", [(2, 3), (3, 4)], "names 3 dim.* operand 0 has rank 2"),
    ("ij->ik", [(2, 3)], "must name distinct letters of the operands"),
    ("ij,jk->ik", [(2, 3)], "2 operand term.* 1 operand"),
    ("i1,1k->ik", [(2, 3), (3, 4)], "letters only"),
])
def test_a_refused_equation_names_itself_and_what_is_wrong(equation, shapes, message):
    with opsdk.Graph().as_default():
        xs = [opsdk.placeholder("float32", list(s)) for s in shapes]
        with pytest.raises(OpsdkError, match=message):
            ops.einsum(xs, equation=equation)
