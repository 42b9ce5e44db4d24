"""normalize_attrs: defaults, types (NumPy scalars too), bounds, choices, list lengths."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry import OpError, normalize_attrs, parse_opdef

OP = """
op: attrs_op
summary: Attrs of every kind.
type_attrs:
  T: [float32]
  DstT: {allowed: [float32, float64], default: float32}
  OutT: [int32, int64]
attrs:
  k: {type: int, default: 2, min: 1, max: 8}
  mode: {type: str, default: sum, choices: [sum, mean]}
  axes: {type: list(int), default: []}
  scale: {type: float, default: 0.5}
  flag: {type: bool, default: false}
inputs:
  xs: {dtype: T, shape: [d], list: N}
outputs:
  y: {dtype: DstT, shape: [d]}
  i: {dtype: OutT, shape: [d]}
kernels: {python: kernels.py:foo}
"""


@pytest.fixture
def spec(ws):
    return parse_opdef(ws.write("a.yaml", OP), ws.root)[0]


def test_defaults_are_filled_in_declaration_order(spec):
    result = normalize_attrs(spec, {"N": 2, "OutT": "int64"})
    assert result == {"k": 2, "mode": "sum", "axes": (), "scale": 0.5, "flag": False, "N": 2,
                      "DstT": "float32", "OutT": "int64"}
    assert list(result) == ["k", "mode", "axes", "scale", "flag", "N", "DstT", "OutT"]


def test_numpy_values_become_python_values(spec):
    result = normalize_attrs(spec, {"k": np.int64(3), "axes": np.array([0, 1]), "scale": np.float32(2),
                                    "flag": np.bool_(True), "N": 1, "DstT": np.float64, "OutT": np.dtype("int32")})
    assert result["k"] == 3 and type(result["k"]) is int
    assert result["axes"] == (0, 1) and type(result["scale"]) is float and result["flag"] is True
    assert (result["DstT"], result["OutT"]) == ("float64", "int32")


def test_list_length_comes_from_the_inputs(spec):
    assert normalize_attrs(spec, {"OutT": "int32"}, inputs=[[1, 2, 3]])["N"] == 3
    assert normalize_attrs(spec, {"OutT": "int32"}, inputs={"xs": [1]})["N"] == 1
    with pytest.raises(OpError, match=r"^attrs_op: attr 'N' is 2 but input 'xs' holds 3 tensors$"):
        normalize_attrs(spec, {"N": 2, "OutT": "int32"}, inputs=[[1, 2, 3]])
    with pytest.raises(OpError, match=r"^attrs_op: list input of length 0: 'N' must be >= 1$"):
        normalize_attrs(spec, {"OutT": "int32"}, inputs=[[]])


@pytest.mark.parametrize("attrs, message", [
    ({"kk": 3}, "attrs_op: unknown attr 'kk' (did you mean 'k'?); its attrs are k, mode, axes, scale, flag, N, "
                "DstT, OutT"),
    ({"T": "float32"}, "attrs_op: type attr 'T' comes from the dtype of input 'xs'; don't pass it"),
    ({"k": 0}, "attrs_op: attr 'k' must be >= 1, got 0"),
    ({"k": 9}, "attrs_op: attr 'k' must be <= 8, got 9"),
    ({"k": True}, "attrs_op: attr 'k' must be an int, got True"),
    ({"k": 2.5}, "attrs_op: attr 'k' must be an int, got 2.5"),
    ({"mode": "max"}, "attrs_op: attr 'mode' must be one of sum, mean, got 'max'"),
    ({"axes": [0, "1"]}, "attrs_op: attr 'axes' must be a list of ints, got [0, '1']"),
    ({"scale": "big"}, "attrs_op: attr 'scale' must be a number, got 'big'"),
    ({"flag": 1}, "attrs_op: attr 'flag' must be true or false, got 1"),
    ({"DstT": "int8"}, "attrs_op: type attr 'DstT' must be one of float32, float64, got int8"),
])
def test_bad_attrs(spec, attrs, message):
    with pytest.raises(OpError) as info:
        normalize_attrs(spec, {"N": 1, "OutT": "int32", **attrs})
    assert str(info.value) == message


def test_missing_required_attrs(spec):
    with pytest.raises(OpError, match=r"^attrs_op: missing attr 'N' \(an int\)$"):
        normalize_attrs(spec, {"OutT": "int32"})
    with pytest.raises(OpError, match=r"^attrs_op: missing type attr 'OutT' \(one of int32, int64\)$"):
        normalize_attrs(spec, {"N": 1})


@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 2**64, np.uint64(2**64 - 1)])
def test_an_int_attr_outside_int64_is_refused_naming_op_attr_and_range(ws, value):
    spec = parse_opdef(ws.write("b.yaml", OP.replace(
        "k: {type: int, default: 2, min: 1, max: 8}", "k: {type: int, default: 2}")), ws.root)[0]
    with pytest.raises(OpError, match=r"^attrs_op: attr 'k' must be an int in int64's range "
                                      r"\(-2\*\*63 \.\. 2\*\*63 - 1\), got "):
        normalize_attrs(spec, {"k": value, "N": 1, "OutT": "int32"})
    with pytest.raises(OpError, match=r"^attrs_op: attr 'axes' items must be an int in int64's"):
        normalize_attrs(spec, {"axes": [0, value], "N": 1, "OutT": "int32"})
    edge = normalize_attrs(spec, {"k": 2**63 - 1, "axes": [-2**63], "N": 1, "OutT": "int32"})
    assert edge["k"] == 2**63 - 1 and edge["axes"] == (-2**63,)


@pytest.mark.parametrize("value", [2**63 - 1, 9007199254740993, np.int64(2**62 + 1),
                                   np.uint64(2**64 - 1)])
def test_a_float_attr_keeps_an_integer_that_float64_cannot_hold(spec, value):
    scale = normalize_attrs(spec, {"scale": value, "N": 1, "OutT": "int32"})["scale"]
    assert type(scale) is int and scale == int(value)


def test_a_float_attr_still_takes_small_integers_as_floats_and_refuses_huge_ones(spec):
    scale = normalize_attrs(spec, {"scale": np.int32(3), "N": 1, "OutT": "int32"})["scale"]
    assert type(scale) is float and scale == 3.0
    with pytest.raises(OpError, match=r"^attrs_op: attr 'scale' must be a number within "
                                      r"float64's range, got 10{39}\.\.\. \(401 characters\)$"):
        normalize_attrs(spec, {"scale": 10**400, "N": 1, "OutT": "int32"})
