"""The `opsdk` command: exit codes and messages, through `main(argv)` and as a process."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opsdk.cli import main as cli_main
from opsdk.cli.main import main

PY_OP_YAML = """\
op: cli_scale
summary: y = k * x, a Python kernel (nothing to compile).
type_attrs:
  T: [float32, float64]
attrs:
  k: {type: float, default: 2.0}
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  python: cli_kernels.py:scale
reference: "k * x"
"""

BROKEN_CPU_YAML = """\
op: cli_broken
summary: a cpu kernel with a mistake on line 5.
inputs:
  x: {dtype: float64, shape: [n]}
outputs:
  y: {dtype: float64, shape: [n]}
kernels:
  cpu: cli_broken_cpu.cc
"""

BROKEN_CPU = """\
#include "cli_broken_op.h"
namespace opsdk_op_cli_broken {
void cpu(const Inputs& in, Outputs& out, const Dims& dims, const Attrs&) {
    for (int64_t i = 0; i < dims.n; ++i)
        out.y[i] = in.x[i] * not_declared;
}
}  // namespace opsdk_op_cli_broken
"""


@pytest.fixture
def ws(tmp_path):
    """A workspace with one Python-kernel op: building it compiles nothing."""
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs/cli_scale.yaml").write_text(PY_OP_YAML)
    (tmp_path / "opdefs/cli_kernels.py").write_text("def scale(xp, x, k):\n    return k * x\n")
    return tmp_path


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_not_a_workspace(capsys, tmp_path):
    code, _, err = run_cli(capsys, "-C", tmp_path, "build")
    assert code == 1
    assert err.startswith("opsdk build: error: ") and "no opdefs/ folder" in err
    assert "Traceback" not in err


def test_workspace_found_from_cwd_and_minus_c_after_the_command(capsys, ws, monkeypatch):
    monkeypatch.chdir(ws / "opdefs")
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and "cli_scale" in out
    monkeypatch.chdir(ws.parent)
    code, out, _ = run_cli(capsys, "list", "-C", ws)
    assert code == 0 and "cli_scale" in out


def test_list_shows_own_ops_and_counts_builtins(capsys, ws):
    code, out, _ = run_cli(capsys, "-C", ws, "list")
    assert code == 0
    assert f"1 op(s) in {ws}, namespace '{ws.name}'" in out
    row = next(line for line in out.splitlines() if line.startswith(f"{ws.name}::cli_scale"))
    assert row.split()[1:] == ["T:", "float32,", "float64", "python", "-"]
    assert "builtin ops in 'opsdk::'; `opsdk list --all`" in out
    code, out_all, _ = run_cli(capsys, "-C", ws, "list", "--all")
    assert code == 0 and len(out_all.splitlines()) > len(out.splitlines()) + 5


def test_list_all_outside_a_workspace_lists_the_builtin_ops(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no opdefs/ here or above
    code, out, err = run_cli(capsys, "list", "--all")
    assert code == 0, err
    assert "namespace 'opsdk'" in out and any(line.startswith("opsdk::pairwise_manhattan ")
                                              for line in out.splitlines())
    code, _, err = run_cli(capsys, "list")  # without --all the workspace is still required
    assert code == 1 and "no opdefs/ folder" in err
    code, _, err = run_cli(capsys, "-C", tmp_path, "list", "--all")  # so is an explicit -C
    assert code == 1 and "not an opsdk workspace" in err


def test_build_unknown_op_and_bad_jobs_are_user_errors(capsys, ws):
    code, _, err = run_cli(capsys, "-C", ws, "build", "cli_scal")
    assert code == 1
    assert "no op named 'cli_scal'" in err and "did you mean 'cli_scale'" in err
    code, _, err = run_cli(capsys, "-C", ws, "build", "-j", "0")
    assert code == 1 and "-j needs a positive number" in err


def test_build_with_nothing_to_compile(capsys, ws):
    code, out, _ = run_cli(capsys, "-C", ws, "build")
    assert code == 0
    assert "0 compiled, 0 up to date" in out
    assert (ws / "generated/python/ops.py").is_file()


def test_generate_check_fails_until_generated(capsys, ws):
    code, _, err = run_cli(capsys, "-C", ws, "generate", "--check")
    assert code == 1
    assert "generated/python/ops.py" in err and "run `opsdk generate`" in err
    code, out, _ = run_cli(capsys, "-C", ws, "generate")
    assert code == 0 and "wrote generated/python/ops.py" in out
    code, out, _ = run_cli(capsys, "-C", ws, "generate", "--check")
    assert code == 0 and "up to date" in out


def test_declaration_error_is_one_message_without_traceback(capsys, ws):
    (ws / "opdefs/cli_scale.yaml").write_text(PY_OP_YAML.replace("dtype: T, shape: [n]}\noutputs",
                                                                 "dtyp: T, shape: [n]}\noutputs"))
    code, _, err = run_cli(capsys, "-C", ws, "generate")
    assert code == 1
    assert "opdefs/cli_scale.yaml:8: error: op 'cli_scale': unknown key 'dtyp'" in err
    assert "Traceback" not in err


def test_new_scaffolds_an_op_and_rejects_a_bad_name(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "-C", tmp_path, "new", "my_op")
    assert code == 0
    assert "created opdefs/my_op.yaml" in out and "next steps" in out
    assert (tmp_path / "opdefs/my_op_cpu.cc").is_file()
    code, _, err = run_cli(capsys, "-C", tmp_path, "new", "My-Op")
    assert code == 1 and "Traceback" not in err
    code, _, err = run_cli(capsys, "-C", tmp_path, "new", "my_op")
    assert code == 1 and "already exist" in err


def test_doctor_reports_and_exits_zero(capsys):
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 0
    assert "g++" in out and "nvcc" in out and "CuPy + GPU" in out and "ray" in out


def test_doctor_reports_the_compiler_launcher_and_a_missing_one(capsys, monkeypatch, tmp_path):
    launcher = tmp_path / "fake-ccache"
    launcher.write_text('#!/bin/sh\nexec "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setenv("OPSDK_CXX", f"{launcher} g++")
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 0 and "OPSDK_CXX: fake-ccache g++" in out
    monkeypatch.setenv("OPSDK_CXX", "no-such-ccache g++")
    monkeypatch.chdir(tmp_path)  # not a workspace: nothing needs g++
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 0
    assert "no-such-ccache not found on PATH (OPSDK_CXX='no-such-ccache g++')" in out


def test_doctor_tries_the_compiler_and_fails_where_the_workspace_needs_it(capsys, monkeypatch,
                                                                         tmp_path):
    fake = tmp_path / "fake-g++"  # answers --version, exits 0 and writes nothing
    fake.write_text('#!/bin/sh\n[ "$1" = "--version" ] && { echo "fake 1.0"; exit 0; }\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("OPSDK_CXX", str(fake))
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "doctor")
    row = next(line for line in out.splitlines() if line.startswith("g++"))
    assert code == 0 and " missing " in row
    assert "fake-g++ cannot compile a one-line cpu library" in row
    assert "fake-g++ exited with status 0 but wrote no .so file" in row
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "cli_broken.yaml").write_text(BROKEN_CPU_YAML)
    (tmp_path / "opdefs" / "cli_broken_cpu.cc").write_text(BROKEN_CPU)
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 1 and "NEEDED" in out
    assert out.rstrip().endswith("not usable but needed here: g++ (see what each disables)")
    garbage = tmp_path / "garbage-g++"  # writes its output, but not a library
    garbage.write_text('#!/bin/sh\n[ "$1" = "--version" ] && { echo "fake 1.0"; exit 0; }\n'
                       'while [ $# -gt 0 ]; do [ "$1" = "-o" ] && echo nonsense > "$2"; shift; done\n')
    garbage.chmod(0o755)
    monkeypatch.setenv("OPSDK_CXX", str(garbage))
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 1 and "garbage-g++ wrote a library that does not load" in out


def test_a_bug_shows_a_traceback(monkeypatch, ws):
    def broken(args):
        raise RuntimeError("a bug in opsdk")

    parser = cli_main.make_parser()
    monkeypatch.setattr(cli_main, "make_parser", lambda: _with_run(parser, broken))
    with pytest.raises(RuntimeError, match="a bug in opsdk"):
        main(["-C", str(ws), "list"])


def _with_run(parser, fn):
    original = parser.parse_args

    def parse_args(argv=None):
        args = original(argv)
        args._run = fn
        return args

    parser.parse_args = parse_args
    return parser


def test_a_second_build_waits_for_the_lock(ws):
    from filelock import FileLock

    (ws / "build").mkdir()
    lock = FileLock(str(ws / "build/.lock"))
    lock.acquire()
    proc = subprocess.Popen([sys.executable, "-m", "opsdk.cli", "-C", str(ws), "build"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        waited = _wait_for_line(proc.stderr, "waiting for another opsdk build", timeout=30)
        assert waited
        assert proc.poll() is None
    finally:
        lock.release()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "0 compiled" in out


def _wait_for_line(stream, text: str, timeout: float) -> bool:
    """Read lines until one holds `text`; never blocks past the deadline (select on the pipe)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([stream], [], [], left)
        if not ready:
            return False
        line = stream.readline()
        if text in line:
            return True
        if not line:
            return False
    return False


@pytest.mark.slow
def test_compile_error_exits_1_with_the_kernel_line(capsys, ws):
    (ws / "opdefs/cli_broken.yaml").write_text(BROKEN_CPU_YAML)
    (ws / "opdefs/cli_broken_cpu.cc").write_text(BROKEN_CPU)
    code, _, err = run_cli(capsys, "-C", ws, "build", "--no-progress")
    assert code == 1
    lines = err.splitlines()
    assert any(line.startswith("opdefs/cli_broken_cpu.cc:5:") and ": error: " in line
               and "not_declared" in line and line.endswith("[op 'cli_broken', cpu]")
               for line in lines), err
    assert "Traceback" not in err and "build/cpu/cli_broken/last_error.log" in err
    assert "0 compiled, 0 up to date, 1 failed" in err


def test_cuda_on_without_nvcc_is_a_user_error(capsys, tmp_path, monkeypatch):
    assert run_cli(capsys, "-C", tmp_path, "new", "cuda_op")[0] == 0
    monkeypatch.setenv("OPSDK_NVCC", "no-such-nvcc")
    code, _, err = run_cli(capsys, "-C", tmp_path, "build", "--cuda=on")
    assert code == 1
    assert "--cuda=on but nvcc is not usable: no-such-nvcc not found on PATH" in err
    assert not (tmp_path / "build/cpu/cuda_op").exists()  # refused before compiling anything


def test_cuda_auto_compiles_whenever_nvcc_is_present_gpu_or_not(monkeypatch):
    from opsdk.build import driver as build

    monkeypatch.setenv("OPSDK_NVCC", "no-such-nvcc")
    toolchain, note = build._cuda_toolchain("auto")
    assert toolchain is None
    assert note.startswith("cuda kernels skipped: nvcc not found (install the CUDA toolkit to build "
                           "them); those that declare `launch:` compile through NVRTC at first use")
    assert build._cuda_toolchain("off") == (None, None)
    monkeypatch.setenv("OPSDK_NVCC", sys.executable)  # any program answering --version
    toolchain, note = build._cuda_toolchain("auto")  # no GPU is asked for: CI compiles CUDA
    assert note is None and toolchain.path == sys.executable
    assert build._cuda_toolchain("on") == (toolchain, None)


SCALE_BODY = """    const int64_t size = dims.n * dims.p;
    for (int64_t i = 0; i < size; ++i) out.y[i] = static_cast<T>(attrs.scale) * in.x[i] + OFFSET;
"""


def _new_user_op(capsys, root, offset: int):
    """`opsdk new pairwise_manhattan` in a fresh folder, the kernel body written, `opsdk build`."""
    root.mkdir()
    code, out, err = run_cli(capsys, "-C", root, "new", "pairwise_manhattan")
    assert code == 0 and "created opdefs/pairwise_manhattan.yaml" in out, err
    kernel = root / "opdefs/pairwise_manhattan_cpu.cc"
    text = kernel.read_text()
    stub = text[text.index("    // For example:"):text.index("    OPSDK_NOT_IMPLEMENTED();\n")]
    kernel.write_text(text.replace(stub, "").replace("    OPSDK_NOT_IMPLEMENTED();\n",
                                                     SCALE_BODY.replace("OFFSET", str(offset))))
    code, out, err = run_cli(capsys, "-C", root, "build", "--cuda", "off", "--no-progress")
    assert code == 0, err


def test_new_builds_and_runs_an_op_named_like_a_builtin_in_two_workspaces(capsys, tmp_path):
    import numpy as np

    import opsdk

    _new_user_op(capsys, tmp_path / "first", offset=0)
    _new_user_op(capsys, tmp_path / "second", offset=100)
    first, second = opsdk.load_ops(tmp_path / "first"), opsdk.load_ops(tmp_path / "second")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(first.pairwise_manhattan(x, scale=2.0), 2 * x)
    np.testing.assert_array_equal(second.pairwise_manhattan(x, scale=2.0), 2 * x + 100)
    builtin = opsdk.load_ops(opsdk.load_registry().get("pairwise_manhattan").workspace)
    np.testing.assert_array_equal(builtin.pairwise_manhattan(x, x), [[0, 9], [9, 0]])
    code, out, _ = run_cli(capsys, "-C", tmp_path / "first", "list")
    assert code == 0 and "first::pairwise_manhattan" in out
    assert "the builtin op is 'opsdk::pairwise_manhattan'" in out


def test_every_help_ends_with_examples_that_parse(capsys):
    import shlex

    from opsdk.cli.main import command_modules, make_parser

    parser = make_parser()
    helps = {"": parser.format_help()}
    helps.update({m.__name__.rsplit("cmd_", 1)[1]: None for m in command_modules()})
    for command in [c for c in helps if c]:
        with pytest.raises(SystemExit):
            make_parser().parse_args([command, "--help"])
        helps[command] = capsys.readouterr().out
    for command, text in helps.items():
        examples = text.split("examples:\n", 1)[1].splitlines()
        lines = [shlex.split(line.split("#", 1)[0].replace(">", "#"), comments=True)
                 for line in examples if line.strip()]
        assert lines and all(words[0] == "opsdk" for words in lines), (command, text)
        assert not command or any(command in words for words in lines), command
        for words in lines:
            if "--help" not in words:
                parser.parse_args(words[1:])  # each example is a valid command line
