"""Compiler output -> the few lines an author needs (no compiler run here: recorded outputs)."""

from __future__ import annotations

from pathlib import Path

from opsdk.build.compiler import build_key, read_depfile, Toolchain
from opsdk.build.diagnostics import (expected_signature, parse_diagnostics,
                                       summarize_failure, uninstantiated_kernels)

ROOT = Path("/ws")

GCC_TEMPLATE_FAILURE = """\
In file included from generated/cpp/foo_binding.cc:12:
/ws/opdefs/foo_cpu.cc: In instantiation of 'void opsdk_op_foo::cpu(const Inputs<T>&, Outputs<T>&, const Dims&, const Attrs&) [with T = float]':
generated/cpp/foo_binding.cc:80:17:   required from here
/ws/opdefs/foo_cpu.cc:12:5: error: 'y' was not declared in this scope
   12 |     y[i] = 0;
      |     ^
/ws/opdefs/foo_cpu.cc:12:5: note: suggested alternative: 'x'
/ws/opdefs/foo_cpu.cc: In instantiation of 'void opsdk_op_foo::cpu(...) [with T = double]':
generated/cpp/foo_binding.cc:81:17:   required from here
/ws/opdefs/foo_cpu.cc:12:5: error: 'y' was not declared in this scope
compilation terminated.
"""

GLUE_FAILURE = """\
generated/cpp/foo_binding.cc:80:29: error: no matching function for call to 'cpu<float>(...)'
/ws/generated/cpp/foo_op.h:30:6: note: candidate: 'template<class T> void opsdk_op_foo::cpu(...)'
"""

NVCC_FAILURE = """\
opdefs/foo_cuda.cu(7): error: identifier "blockIdx_x" is undefined
      int i = blockIdx_x;
              ^
1 error detected in the compilation of "generated/cuda/foo_cuda_binding.cu".
"""

OP_HEADER = """\
namespace opsdk_op_foo {
struct Attrs { int64_t k; };
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out,
         const Dims& dims, const Attrs& attrs);
}  // namespace opsdk_op_foo
"""


def test_template_errors_are_deduplicated_relative_and_tagged():
    text = summarize_failure(GCC_TEMPLATE_FAILURE, ROOT, "foo", "cpu", "build/cpu/foo/last_error.log")
    lines = text.splitlines()
    assert lines[0] == "opdefs/foo_cpu.cc:12:5: error: 'y' was not declared in this scope [op 'foo', cpu]"
    assert lines[1].strip() == "opdefs/foo_cpu.cc:12:5: note: suggested alternative: 'x'"
    # One error for two instantiations, no include chain, no source excerpt, the log named.
    assert sum("error:" in line for line in lines) == 1
    assert not any("In file included" in line or "required from" in line or "|" in line
                   for line in lines)
    assert lines[-1] == "(full compiler output: build/cpu/foo/last_error.log)"


def test_glue_error_gets_the_expected_signature(tmp_path):
    (tmp_path / "generated" / "cpp").mkdir(parents=True)
    (tmp_path / "generated" / "cpp" / "foo_op.h").write_text(OP_HEADER)
    text = summarize_failure(GLUE_FAILURE.replace("/ws", str(tmp_path)), tmp_path, "foo", "cpu",
                             "log")
    assert text.startswith("generated/cpp/foo_binding.cc:80:29: error: no matching function")
    assert "hint:" in text and "generated/cpp/foo_op.h" in text
    assert "template <typename T>" in text
    assert "void cpu(const Inputs<T>& in, Outputs<T>& out," in text
    assert "const Dims& dims, const Attrs& attrs);" in text


def test_kernel_error_gets_no_glue_hint(tmp_path):
    text = summarize_failure(GCC_TEMPLATE_FAILURE, ROOT, "foo", "cpu", "log")
    assert "hint:" not in text


def test_nvcc_errors_are_parsed():
    diags = parse_diagnostics(NVCC_FAILURE, ROOT)
    assert [(d.file, d.line, d.col, d.kind) for d in diags] == [("opdefs/foo_cuda.cu", 7, None, "error")]
    text = summarize_failure(NVCC_FAILURE, ROOT, "foo", "cuda", "log")
    assert text.splitlines()[0] == (
        "opdefs/foo_cuda.cu:7: error: identifier \"blockIdx_x\" is undefined [op 'foo', cuda]")


def test_linker_failure_without_location_is_still_shown():
    output = "/usr/bin/ld: foo.o: undefined reference to `opsdk_op_foo::helper()'\ncollect2: error: ld returned 1 exit status\n"
    text = summarize_failure(output, ROOT, "foo", "cpu", "log")
    assert "undefined reference to" in text.splitlines()[0]
    assert "[op 'foo', cpu]" in text


def test_many_errors_are_capped():
    output = "".join(f"/ws/opdefs/foo_cpu.cc:{i}:1: error: bad thing {i}\n" for i in range(1, 30))
    text = summarize_failure(output, ROOT, "foo", "cpu", "log")
    assert sum(": error:" in line for line in text.splitlines()) == 8
    assert "... and 21 more error(s)" in text


def test_expected_signature_missing_header(tmp_path):
    assert expected_signature(tmp_path / "nope_op.h", "cpu") == []


def test_depfile_paths_are_workspace_relative(tmp_path):
    dep = tmp_path / "x.d"
    dep.write_text(f"out.so: generated/cpp/foo_binding.cc {tmp_path}/opdefs/foo_cpu.cc \\\n"
                   f" /usr/include/py/Python.h {tmp_path}/opdefs/my\\ header.h\n")
    assert read_depfile(dep, tmp_path) == (
        "/usr/include/py/Python.h", "generated/cpp/foo_binding.cc", "opdefs/foo_cpu.cc",
        "opdefs/my header.h")


def test_key_changes_with_each_input():
    tc = Toolchain("cpu", "/usr/bin/g++", "g++ 12")
    base = build_key({"a.cc": "1"}, ["-O3"], tc, "py3.11")
    assert base == build_key({"a.cc": "1"}, ["-O3"], tc, "py3.11")
    assert base != build_key({"a.cc": "2"}, ["-O3"], tc, "py3.11")
    assert base != build_key({"a.cc": "1", "b.h": "1"}, ["-O3"], tc, "py3.11")
    assert base != build_key({"a.cc": "1"}, ["-O2"], tc, "py3.11")
    assert base != build_key({"a.cc": "1"}, ["-O3"], Toolchain("cpu", "g++", "g++ 13"), "py3.11")
    assert base != build_key({"a.cc": "1"}, ["-O3"], tc, "py3.12")


def test_uninstantiated_kernels_are_read_from_the_kernel_unit():
    out = ("generated/cpp/foo_kernel.cc:9:90: error: explicit instantiation of 'void opsdk_op_foo"
           "::cpu(const Inputs<T>&, Outputs<T>&, const Dims&, const Attrs&) [with T = float]' but "
           "no definition available [-fpermissive]\n") * 2
    assert uninstantiated_kernels(out) == (
        "opsdk_op_foo::cpu(const Inputs<T>&, Outputs<T>&, const Dims&, const Attrs&) "
        "[with T = float]",)
    assert uninstantiated_kernels("opdefs/foo_cpu.cc:3:1: error: expected ';'") == ()


def test_a_kernel_including_the_header_of_its_ops_old_name_is_told_the_new_one():
    # `opsdk new probe`, then `op: add` in opdefs/probe.yaml: the kernel still includes probe_op.h.
    output = ("opdefs/probe_cpu.cc:12:10: fatal error: probe_op.h: No such file or directory\n"
              "compilation terminated.\n")
    text = summarize_failure(output, ROOT, "add", "cpu", "build/cpu/add/last_error.log")
    assert text.splitlines()[1] == (
        "hint: probe_op.h would be the generated header of an op named 'probe', and no op has "
        "that name; this is the kernel of op 'add': include \"add_op.h\" and define the kernel "
        "in namespace opsdk_op_add (or name the op 'probe' again in its declaration)")
    own = "opdefs/add_cpu.cc:1:10: fatal error: add_op.h: No such file or directory\n"
    assert "hint" not in summarize_failure(own, ROOT, "add", "cpu", "log")
