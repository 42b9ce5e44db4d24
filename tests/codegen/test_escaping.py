"""Text from declarations reaches generated C++ and Python only in forms that carry it intact.

A doc ending in a backslash must not splice the next line into a C++ comment; a path with a
newline must not break the do-not-edit header; a non-BMP character must survive a C++ string
literal; kernel paths that `#include "..."` cannot name are refused by the parser.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from opsdk.codegen.generate import render_workspace
from opsdk.codegen.messages import cpp_string_literal
from opsdk.codegen.render import comment_text, generated_header
from opsdk.registry import BUILTIN_ROOT, OpDefErrors, parse_opdef

from codegen_fixtures import write_workspace

GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="no g++ on this machine")
TRICKY = ['plain', 'quote " and backslash \\', 'tab\tnewline\nend\\', 'nul\x00bell\x07del\x7f',
          'octal after control \x01' + '7', 'caf\u00e9 \u2028 \U0001F600 \U0010FFFF', '??/ trigraph', '']


@needs_gxx
def test_cpp_string_literals_hold_any_text(tmp_path):
    program = ['#include <cstdio>', '#include <cstring>', 'int main() {']
    for i, text in enumerate(TRICKY):
        program.append(f'  {{ static const char s[] = {cpp_string_literal(text)}; '
                       f'fwrite(s, 1, sizeof(s) - 1, stdout); fputc(0xff, stdout); }}')
    program.append('  return 0;\n}\n')
    (tmp_path / "t.cc").write_text("\n".join(program))
    subprocess.run([GXX, "-std=c++17", "-Werror", "t.cc", "-o", "t"], cwd=tmp_path, check=True)
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, check=True).stdout
    assert out.split(b"\xff")[:-1] == [t.encode("utf-8") for t in TRICKY]


@pytest.mark.parametrize("text, expected", [
    ("ends in a backslash \\", "ends in a backslash \\."),
    ("two\nlines\r\nand\u2028more\x0cend", "two lines and more end"),
    ("C:\\path\\", "C:\\path\\."),
    ("fine", "fine"),
])
def test_comment_text_is_one_line_that_never_ends_in_a_splice(text, expected):
    assert comment_text(text) == expected


def test_the_generated_header_names_odd_paths_on_one_line():
    header = generated_header(['opdefs/a\nb/op.yaml', 'opdefs/c"\\'], "#")
    assert "\n" not in header and not header.endswith("\\")
    compile(header + "\nx = 1\n", "ops.py", "exec")


DOC_OP = """
    op: doc_op
    summary: Ends in a backslash \\\\
    doc: "C:\\\\temp\\\\"
    attrs:
      k: {type: int, default: 2, doc: "a count \\\\"}
    inputs:
      x: {dtype: float64, shape: [n], doc: "ends in a backslash \\\\"}
    outputs:
      y: {dtype: float64, shape: [n], doc: "also \\\\"}
    gradient: null
    kernels:
      cpu: doc_op_cpu.cc
    reference: "x * k"
"""
DOC_KERNEL = """
    #include "doc_op_op.h"
    namespace opsdk_op_doc_op {
    void cpu(const Inputs& in, Outputs& out, const Dims& dims, const Attrs& attrs) {
        for (int64_t i = 0; i < dims.n; ++i) out.y.data[i] = in.x.data[i] * attrs.k;
    }
    }  // namespace opsdk_op_doc_op
"""


@needs_gxx
def test_docs_ending_in_backslashes_keep_the_header_intact(tmp_path):
    root = write_workspace(tmp_path / "ws", {"doc_op": DOC_OP})
    [spec] = parse_opdef(root / "opdefs" / "doc_op.yaml", root)
    assert spec.doc.endswith("\\") and spec.inputs[0].doc.endswith("\\")
    files = render_workspace(root, [spec])
    header = files["generated/cpp/doc_op_op.h"]
    assert all(not line.rstrip().endswith("\\") for line in header.splitlines())
    (tmp_path / "use.cc").write_text(header + "\nint main() { opsdk_op_doc_op::Inputs in; "
                                              "opsdk_op_doc_op::Outputs out; opsdk_op_doc_op::Attrs a; "
                                              "return int(a.k) + (in.x.data == nullptr) + (out.y.data == nullptr); }\n")
    include = BUILTIN_ROOT / "opsdk" / "include"
    subprocess.run([GXX, "-std=c++17", "-fsyntax-only", f"-I{include}", "use.cc"], cwd=tmp_path, check=True)
    compile(files["generated/python/ops.py"], "ops.py", "exec")


@pytest.mark.slow
@needs_gxx
def test_a_workspace_under_a_non_bmp_folder_builds_and_runs(tmp_path):
    """The sample of the declaration fuzz that is built and imported: odd text, odd paths."""
    from opsdk.build.driver import build_workspace
    from opsdk.runtime.frontend.ops_module import load_ops

    root = tmp_path / "ws \U0001F600 caf\u00e9"
    opdefs = root / "opdefs" / "sub \U0001F600"
    opdefs.mkdir(parents=True)
    (opdefs / "doc_op.yaml").write_text(textwrap.dedent(DOC_OP).lstrip())
    (opdefs / "doc_op_cpu.cc").write_text(textwrap.dedent(DOC_KERNEL).lstrip())
    build_workspace(root, jobs=2, progress=False)
    ops = load_ops(root)
    np.testing.assert_array_equal(ops.doc_op(np.arange(3.0), k=3), [0.0, 3.0, 6.0])
    assert "C:\\temp\\" in ops.doc_op.__doc__


@pytest.mark.parametrize("folder", ['quo"te', "back\\slash", "new\nline"])
def test_kernel_paths_an_include_cannot_name_are_refused(tmp_path, folder):
    root = tmp_path / "ws"
    (root / "opdefs" / folder).mkdir(parents=True)
    (root / "opdefs" / folder / "k_cpu.cc").write_text("")
    path = root / "opdefs" / "op.yaml"
    path.write_text(f"op: foo\nsummary: Foo.\ninputs:\n  x: {{dtype: float32, shape: [n]}}\n"
                    f"outputs:\n  z: {{dtype: float32, shape: [n]}}\nkernels: {{cpu: {folder!r}}}\n"
                    .replace(repr(folder), '"' + folder.replace("\\", "\\\\").replace("\n", "\\n")
                             .replace('"', '\\"') + '/k_cpu.cc"'))
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, root)
    shown = repr(f"opdefs/{folder}/k_cpu.cc")
    assert str(info.value) == (f"opdefs/op.yaml:7: op 'foo': cpu kernel file path {shown} holds a quote, a "
                               f"backslash or a control character, which the generated #include cannot "
                               f"name; rename the file or its folder")
