"""Glue messages: the wording is the registry's, and the C++ expression builds that text."""

from __future__ import annotations

from opsdk.codegen import messages as msg
from opsdk.codegen.binding_model import binding_model

from codegen_fixtures import CAST_OP, LIST_OP, parse_one, write_workspace


def test_cpp_message_merges_literals_and_converts_values():
    m = msg.Message("ValueError", ("op: input '", "x", "' has ", msg.Value("a.n"), " rows"))
    assert msg.cpp_message(m) == 'std::string("op: input \'x\' has ") + std::to_string(a.n) + " rows"'
    dt = msg.Message("TypeError", ("got ", msg.Value("code", "dtype")))
    assert "opsdk::glue::dtype_name(code)" in msg.cpp_message(dt)


def test_cpp_string_literal_escapes():
    assert msg.cpp_string_literal('a "b"\n\\') == '"a \\"b\\"\\n\\\\"'


def test_size_phrase_uses_registry_wording():
    value = msg.Value("s")
    assert msg.Message("ValueError", msg.size_phrase(value, 1, 2)).text({"s": "4"}) == "4 columns"
    assert msg.Message("ValueError", msg.size_phrase(value, 2, 3)).text({"s": "4"}) == "size 4 in axis 2"


def test_dim_mismatch_text():
    got = msg.size_phrase(msg.Value("g"), 1, 2)
    m = msg.dim_mismatch("pm", "y", got, "x", msg.Value("w"), "p")
    assert m.text({"g": "3", "w": "4"}) == "pm: input 'y' has 3 columns but x has 4 (dim p)"


def test_dtype_messages(tmp_path):
    write_workspace(tmp_path, {"cast_op": CAST_OP})
    spec = parse_one(tmp_path, "cast_op")
    got = msg.Value("d", "dtype")
    bad = msg.dtype_not_allowed("cast_op", spec, spec.input("x"), "x", got)
    assert bad.exc == "TypeError"
    assert bad.text({"d": "int8"}) == "cast_op: input 'x' has dtype int8; expected int32 or float32 (type attr SrcT)"
    fixed = msg.dtype_not_allowed("cast_op", spec, spec.input("mask"), "mask", got)
    assert fixed.text({"d": "int8"}) == "cast_op: input 'mask' has dtype int8; expected bool"


def test_not_written_names_the_kernel_file(tmp_path):
    write_workspace(tmp_path, {"list_op": LIST_OP})
    model = binding_model(parse_one(tmp_path, "list_op"))
    assert model.not_written == "op 'list_op': kernel body not written yet (opdefs/list_op_cpu.cc)"
    assert model.kernel_source == "opdefs/list_op_cpu.cc"
