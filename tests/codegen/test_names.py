"""The Python that decides names, C++ types and dispatch keys of generated code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opsdk.codegen import names
from opsdk.registry.dtypes import DTYPE_NAMES
from opsdk.registry.shapes import ExprDim, SymDim, parse_expr

from codegen_fixtures import ATTRS_OP, CAST_OP, LIST_OP, parse_one, write_workspace

GLUE_H = Path(names.__file__).resolve().parents[1] / "include" / "opsdk" / "glue.h"


@pytest.fixture
def specs(tmp_path):
    write_workspace(tmp_path, {"attrs_op": ATTRS_OP, "list_op": LIST_OP, "cast_op": CAST_OP})
    return {n: parse_one(tmp_path, n) for n in ("attrs_op", "list_op", "cast_op")}


def test_glue_enum_follows_dtype_names():
    # The glue's integer codes are the indices of DTYPE_NAMES; the enum must list them in order.
    body = re.search(r"enum DType : int \{(.*?)\};", GLUE_H.read_text(), re.S).group(1)
    enum = [e.strip() for e in body.replace("\n", " ").split(",") if e.strip()]
    assert enum[:-1] == [names.dtype_enum(d).split("::")[-1] for d in DTYPE_NAMES]
    assert enum[-1] == "kUnknown"


@pytest.mark.parametrize("dtype, enum", [("float32", "kFloat32"), ("uint16", "kUInt16"),
                                         ("complex128", "kComplex128"), ("bool", "kBool")])
def test_dtype_enum(dtype, enum):
    assert names.dtype_enum(dtype) == f"opsdk::glue::{enum}"


def test_attr_types(specs):
    spec = specs["attrs_op"]
    got = {a.name: names.attr_cpp_type(a) for a in spec.attrs}
    assert got == {"k": "int64_t", "mode": "std::string", "axes": "std::vector<int64_t>",
                   "weights": "std::vector<double>", "exact": "bool", "alpha": "double"}


def test_template_params_and_member_types(specs):
    cast = specs["cast_op"]
    assert names.template_prefix(cast) == "template <typename SrcT, typename DstT>"
    assert names.template_args(cast) == "<SrcT, DstT>"
    assert names.input_member_type(cast, cast.input("mask")) == "opsdk::ConstTensor<bool>"
    assert names.output_member_type(cast, cast.output("count")) == "opsdk::Tensor<int64_t>"
    lst = specs["list_op"]
    assert names.input_member_type(lst, lst.input("xs")) == "std::vector<opsdk::ConstTensor<T>>"


def test_dispatch_keys_are_distinct_per_combination(specs):
    cast = specs["cast_op"]
    combos = names.dtype_combinations(cast)
    assert combos == [("int32", "float32"), ("int32", "float64"), ("float32", "float32"),
                      ("float32", "float64")]
    keys = {names.dispatch_key(tuple(names.dtype_code(d) for d in c)) for c in combos}
    assert len(keys) == len(combos)
    assert names.dispatch_key((3, 10)) == 3 * names.DISPATCH_RADIX + 10
    assert names.DISPATCH_RADIX > len(DTYPE_NAMES)


def test_output_dims_render_to_cpp(specs):
    spec = specs["attrs_op"]
    z = spec.output("z")
    assert [names.output_dim_cpp(spec, d) for d in z.shape] == ["(dims.n + dims.m)", "(dims.p * attrs.k)"]
    floor = ExprDim(parse_expr("(n - k) // 2"), "(n - k) // 2")
    assert names.output_dim_cpp(spec, floor) == "opsdk::floordiv((dims.n - attrs.k), 2)"
    assert names.output_dim_cpp(spec, SymDim("m")) == "dims.m"


def test_python_type_attr_param(specs):
    cast = specs["cast_op"]
    [dst] = cast.unbound_type_attrs
    assert names.python_type_attr_param(cast, dst) == "dtype"


@pytest.mark.parametrize("name, ok", [("scale", True), ("a1_b", True), ("Scale", False), ("1a", False),
                                      ("with", False), ("namespace", False), ("a-b", False),
                                      ("x" * 65, False), ("match", True)])  # soft keywords name functions
def test_check_op_name(name, ok):
    assert (names.check_op_name(name) is None) == ok
