"""The named shape functions: results agree with NumPy, unknowns propagate, mistakes are plain
ValueErrors naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsdk.registry.shape_fns import SHAPE_FNS

dims = st.integers(0, 4)
shapes = st.lists(dims, max_size=4).map(tuple)


def blur(shape, mask):
    """The shape with some dims made unknown (None), as at graph time."""
    return tuple(None if m else d for d, m in zip(shape, mask))


def agrees(inferred, actual) -> bool:
    """An inferred shape is right when its rank is right and each known dim matches."""
    return inferred is not None and len(inferred) == len(actual) and all(
        i is None or i == a for i, a in zip(inferred, actual))


# ---- broadcast -----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(base=shapes, data=st.data())
def test_broadcast_matches_numpy_with_unknown_dims(base, data):
    drop = data.draw(st.integers(0, len(base)))
    ones = data.draw(st.lists(st.booleans(), min_size=len(base), max_size=len(base)))
    other = tuple(1 if o else d for d, o in zip(base, ones))[drop:]
    want = np.broadcast_shapes(base, other)
    assert SHAPE_FNS["broadcast"]({"x": base, "y": other}, {}) == [want]
    mask_x = data.draw(st.lists(st.booleans(), min_size=len(base), max_size=len(base)))
    mask_y = data.draw(st.lists(st.booleans(), min_size=len(other), max_size=len(other)))
    [got] = SHAPE_FNS["broadcast"]({"x": blur(base, mask_x), "y": blur(other, mask_y)}, {})
    assert agrees(got, want)


def test_broadcast_unknown_dim_against_size():
    fn = SHAPE_FNS["broadcast"]
    assert fn({"x": (None, 3), "y": (4, 1)}, {}) == [(4, 3)]  # None vs 4: 4 whatever None is
    assert fn({"x": (None,), "y": (1,)}, {}) == [(None,)]
    assert fn({"x": (None,), "y": (None,)}, {}) == [(None,)]


def test_broadcast_unknown_rank_propagates():
    assert SHAPE_FNS["broadcast"]({"x": None, "y": (2, 3)}, {}) == [None]


def test_broadcast_three_inputs_for_where():
    got = SHAPE_FNS["broadcast"]({"cond": (2, 1, 1), "x": (3, 1), "y": (4,)}, {})
    assert got == [np.broadcast_shapes((2, 1, 1), (3, 1), (4,))]


def test_broadcast_mismatch_names_inputs_and_dim():
    with pytest.raises(ValueError) as err:
        SHAPE_FNS["broadcast"]({"x": (2, 3), "y": (4, 3)}, {})
    msg = str(err.value)
    assert "input 'x' has shape (2, 3)" in msg and "input 'y' has shape (4, 3)" in msg
    assert "dim -2" in msg


# ---- reduce --------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple), data=st.data())
def test_reduce_matches_numpy(shape, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank))
    keepdims = data.draw(st.booleans())
    want = np.sum(np.zeros(shape), axis=tuple(axes) or None, keepdims=keepdims).shape
    assert SHAPE_FNS["reduce"]({"x": shape}, {"axes": axes, "keepdims": keepdims}) == [want]


def test_reduce_unknowns_and_errors():
    fn = SHAPE_FNS["reduce"]
    assert fn({"x": (None, 3, None)}, {"axes": [1], "keepdims": False}) == [(None, None)]
    assert fn({"x": None}, {"axes": [0], "keepdims": True}) == [None]
    assert fn({"x": (2, 3)}, {"axes": [], "keepdims": True}) == [(1, 1)]
    with pytest.raises(ValueError, match="axes entry 2 is out of range for rank 2"):
        fn({"x": (2, 3)}, {"axes": [2], "keepdims": False})
    with pytest.raises(ValueError, match="the same axis twice"):
        fn({"x": (2, 3)}, {"axes": [1, -1], "keepdims": False})


# ---- reshape, transpose --------------------------------------------------------------------

def test_reshape_infers_minus_one_and_checks_counts():
    fn = SHAPE_FNS["reshape"]
    assert fn({"x": (2, 3, 4)}, {"shape": [4, -1]}) == [(4, 6)]
    assert fn({"x": (2, 3)}, {"shape": [-1]}) == [(6,)]
    assert fn({"x": (None, 3)}, {"shape": [-1, 3]}) == [(None, 3)]
    assert fn({"x": None}, {"shape": [2, 5]}) == [(2, 5)]
    with pytest.raises(ValueError, match=r"cannot reshape x of shape \(2, 3\) \(6 elements\) to \[4\]"):
        fn({"x": (2, 3)}, {"shape": [4]})
    with pytest.raises(ValueError, match="more than one -1"):
        fn({"x": (2, 3)}, {"shape": [-1, -1]})
    with pytest.raises(ValueError, match="cannot reshape"):
        fn({"x": (2, 3)}, {"shape": [4, -1]})


def test_transpose_perm_reverse_and_errors():
    fn = SHAPE_FNS["transpose"]
    assert fn({"x": (2, 3, 4)}, {"perm": []}) == [(4, 3, 2)]
    assert fn({"x": (2, None, 4)}, {"perm": [1, 0, 2]}) == [(None, 2, 4)]
    assert fn({"x": (2, 3)}, {"perm": [-1, 0]}) == [(3, 2)]
    assert fn({"x": None}, {"perm": [1, 0]}) == [(None, None)]
    assert fn({"x": None}, {"perm": []}) == [None]
    with pytest.raises(ValueError, match="not a permutation"):
        fn({"x": (2, 3)}, {"perm": [0, 0]})


# ---- concat, stack -------------------------------------------------------------------------

def test_concat_sums_axis_and_merges_unknowns():
    fn = SHAPE_FNS["concat"]
    assert fn({"xs": [(2, 3), (4, 3)]}, {"axis": 0}) == [(6, 3)]
    assert fn({"xs": [(2, None), (2, 5)]}, {"axis": -1}) == [(2, None)]
    assert fn({"xs": [(None, 3), (2, 3)]}, {"axis": 1}) == [(2, 6)]
    assert fn({"xs": [None, (2, 3)]}, {"axis": 0}) == [(None, 3)]
    with pytest.raises(ValueError, match=r"input 'xs'\[1\] has shape \(2, 4\)"):
        fn({"xs": [(2, 3), (2, 4)]}, {"axis": 0})
    with pytest.raises(ValueError, match="rank"):
        fn({"xs": [(2, 3), (2,)]}, {"axis": 0})
    with pytest.raises(ValueError, match="out of range"):
        fn({"xs": [(2,), (3,)]}, {"axis": 1})


def test_stack_inserts_new_axis():
    fn = SHAPE_FNS["stack"]
    assert fn({"xs": [(2, 3)] * 4}, {"axis": 0}) == [(4, 2, 3)]
    assert fn({"xs": [(2, 3)] * 4}, {"axis": -1}) == [(2, 3, 4)]
    assert fn({"xs": [(2, None), (None, 3)]}, {"axis": 1}) == [(2, 2, 3)]
    with pytest.raises(ValueError, match="xs"):
        fn({"xs": [(2, 3), (3, 3)]}, {"axis": 0})


# ---- slice, gather, creation, gradient helpers ---------------------------------------------

def test_slice_sizes_and_bounds():
    fn = SHAPE_FNS["slice"]
    assert fn({"x": (5, 6)}, {"begin": [1, 2], "size": [-1, 3]}) == [(4, 3)]
    assert fn({"x": (None, 6)}, {"begin": [1, 0], "size": [-1, 2]}) == [(None, 2)]
    assert fn({"x": (5, 6)}, {"begin": [], "size": []}) == [(5, 6)]
    assert fn({"x": None}, {"begin": [0], "size": [2]}) == [(2,)]
    with pytest.raises(ValueError, match="exceeds x's size 5"):
        fn({"x": (5,)}, {"begin": [3], "size": [3]})
    with pytest.raises(ValueError, match="x has rank 2"):
        fn({"x": (5, 6)}, {"begin": [0], "size": [1]})


def test_gather_replaces_axis_with_index_dims():
    fn = SHAPE_FNS["gather"]
    assert fn({"params": (5, 6, 7), "indices": (2, 3)}, {"axis": 1}) == [(5, 2, 3, 7)]
    assert fn({"params": (5, 6), "indices": ()}, {"axis": 0}) == [(6,)]
    assert fn({"params": (5, 6), "indices": None}, {"axis": 0}) == [None]
    with pytest.raises(ValueError, match="axis 2 is out of range for rank 2"):
        fn({"params": (5, 6), "indices": (1,)}, {"axis": 2})


def test_from_shape_attr_and_like_inputs():
    assert SHAPE_FNS["from_shape_attr"]({}, {"shape": [2, 0, 3]}) == [(2, 0, 3)]
    with pytest.raises(ValueError, match="negative"):
        SHAPE_FNS["from_shape_attr"]({}, {"shape": [2, -1]})
    got = SHAPE_FNS["like_x_y"]({"x": (2, None), "y": None, "grad_z": (2, 3)}, {})
    assert got == [(2, None), None]
    assert SHAPE_FNS["like_xs"]({"xs": [(1,), (2,)], "grad_y": (3,)}, {}) == [[(1,), (2,)]]
