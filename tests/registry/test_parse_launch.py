"""`kernels: cuda: {source, launch}`: what a declared CUDA launch reads, and each mistake's message."""

from __future__ import annotations

import pytest

from opsdk.registry import OpDefErrors, parse_opdef
from opsdk.registry.shapes import BinOp, Name, Num

F = "opdefs/op.yaml"
HEAD = """op: foo
summary: Foo.
type_attrs:
  T: [float32, float64]
attrs:
  scale: {type: float, default: 1.0}
  flip: {type: bool, default: false}
  k: {type: int, default: 2}
  mode: {type: str, default: a}
inputs:
  x: {dtype: T, shape: [n, p]}
  xs: {dtype: T, shape: [n], list: N}
outputs:
  y: {dtype: T, shape: [n, p]}
kernels:
  cuda:
    source: foo_cuda.cu
"""  # the launch starts at line 18


def _parse(ws, launch: str):
    (ws.opdefs / "foo_cuda.cu").write_text("// device code\n")
    path = ws.opdefs / "op.yaml"
    path.write_text(HEAD + launch)
    return parse_opdef(path, ws.root)


def _errors(ws, launch: str) -> str:
    with pytest.raises(OpDefErrors) as info:
        _parse(ws, launch)
    return str(info.value)


def test_a_launch_reads_kernel_sizes_and_typed_arguments(ws):
    (spec,) = _parse(ws, """    launch:
      - kernel: detail::scale<T, true>
        grid: ["(n * p + 255) // 256"]
        block: 256
        shared: "k * 8"
        args: [x, y, "n * p", scale, flip, k, -1]
""")
    (launch,) = spec.kernel("cuda").launches
    assert launch.kernel == "detail::scale<T, true>" and launch.location.line == 19
    assert launch.grid == (BinOp("//", BinOp("+", BinOp("*", Name("n"), Name("p")), Num(255)), Num(256)),)
    assert launch.block == (Num(256),) and launch.shared == BinOp("*", Name("k"), Num(8))
    assert [(a.kind, a.name) for a in launch.args] == [
        ("input", "x"), ("output", "y"), ("int", "n * p"), ("attr", "scale"), ("attr", "flip"),
        ("int", "k"), ("int", "-1")]


@pytest.mark.parametrize("launch, message", [
    ("    launch:\n      - kernel: 'scale(); system(\"x\")'\n        grid: [1]\n        block: [1]\n"
     "        args: []\n",
     f"{F}:19: op 'foo': launch 1 kernel 'scale(); system(\"x\")' must name a __global__ function "
     "of the op's namespace, like 'forward' or 'detail::forward<T, true>' (names, ::, and one <...> "
     "of type attrs, names, integers, true or false)"),
    ("    launch:\n      - kernel: k<T, \"a\">\n        grid: [1]\n        block: [1]\n        args: []\n",
     None),
    ("    launch:\n      - kernel: scale\n        grid: [1, 1, 1, 1]\n        block: [1]\n        args: []\n",
     f"{F}:20: op 'foo': launch 1 grid must list 1 to 3 sizes (x, y, z), got 4"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        block: [64, 32]\n        args: []\n",
     f"{F}:21: op 'foo': launch 1 block has 2048 threads; a block holds 1 to 1024"),
    ("    launch:\n      - kernel: scale\n        grid: [\"n +\"]\n        block: [1]\n        args: []\n",
     None),
    ("    launch:\n      - kernel: scale\n        grid: [nn]\n        block: [1]\n        args: []\n",
     f"{F}:20: op 'foo': launch 1 grid uses dim 'nn' that no input binds (did you mean 'n'?)"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        block: [1]\n        args: [xz]\n",
     f"{F}:22: op 'foo': launch 1 args: 'xz' is no input, output, attr or dim (did you mean 'x'?)"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        block: [1]\n        args: [\"x + 1\"]\n",
     f"{F}:22: op 'foo': launch 1 args uses dim 'x' that no input binds; an argument is an input, "
     "an output, an attr, or an int dim expression"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        block: [1]\n        args: [xs]\n",
     f"{F}:22: op 'foo': launch 1 args: input 'xs' is a list of tensors, which a launch cannot pass; "
     "write the host side in the .cu file instead"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        block: [1]\n        args: [mode]\n",
     f"{F}:22: op 'foo': launch 1 args: attr 'mode' is a str; a launch passes int, float and bool "
     "attrs only"),
    ("    launch:\n      - kernel: scale\n        grid: [-1]\n        block: [1]\n        args: []\n",
     f"{F}:20: op 'foo': launch 1 grid must not be negative, got -1"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        args: []\n",
     f"{F}:19: op 'foo': launch 1 misses 'block' (a launch needs kernel, grid, block and args; "
     "shared is optional)"),
    ("    launch:\n      - kernel: scale\n        grid: [1]\n        block: [1]\n        args: []\n"
     "        blocks: 3\n",
     f"{F}:23: op 'foo': unknown key 'blocks' in launch 1 (did you mean 'block'?)"),
    ("    launch: []\n",
     f"{F}:18: op 'foo': launch is empty; list at least one {{kernel, grid, block, args}}"),
    ("", f"{F}:17: op 'foo': the cuda kernel misses 'launch'; without launches write it as "
         "`cuda: file.cu` with the host function cuda() in the file"),
])
def test_each_launch_mistake_is_one_located_message(ws, launch, message):
    text = _errors(ws, launch)
    if message is None:  # the exact wording is the expression parser's or the name rule's
        assert text.startswith(f"{F}:") and "op 'foo': launch 1" in text, text
    else:
        assert text == message


def test_a_huge_launch_list_is_refused_not_expanded(ws):
    one = "      - {kernel: scale, grid: [1], block: [1], args: []}\n"
    assert _errors(ws, "    launch:\n" + one * 17) == (
        f"{F}:19: op 'foo': launch lists 17 launches; at most 16 are allowed (write the host side "
        "in the .cu file instead)")
