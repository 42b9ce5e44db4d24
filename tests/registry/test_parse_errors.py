"""Every declaration mistake gets one exact, located message (file:line: op 'name': what to do)."""

from __future__ import annotations

import pytest

from opsdk.registry import OpDefErrors, parse_opdef

HEAD = "op: foo\nsummary: Foo.\n"
X_IN = "inputs:\n  x: {dtype: float32, shape: [n]}\n"
Z_OUT = "outputs:\n  z: {dtype: float32, shape: [n]}\n"
PY = "kernels: {python: kernels.py:foo}\n"
F = "opdefs/op.yaml"
ATTRS = ("attrs:\n  k: {type: int, default: 1, min: 1, max: 8}\n  axes: {type: list(int), default: []}\n"
         "  mode: {type: str, default: sum, choices: [sum, mean]}\n")



def _alias_bomb(levels: int, width: int) -> str:
    """A value whose level i repeats level i-1 `width` times through aliases: width**levels values."""
    value = "&a0 [" + ", ".join(["0"] * width) + "]"
    for i in range(1, levels):
        value = f"&a{i} [{value}" + f", *a{i - 1}" * (width - 1) + "]"
    return value


# (id, declaration, the exact text of the OpDefErrors raised)
CASES = [
    ("unknown-top-key", HEAD + X_IN + Z_OUT + PY + "gradiant: null\n",
     f"{F}:8: op 'foo': unknown key 'gradiant' in the declaration (did you mean 'gradient'?)"),
    ("unknown-tensor-key", HEAD + "inputs:\n  x: {dtyp: float32, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': unknown key 'dtyp' in input 'x' (did you mean 'dtype'?)\n"
     f"{F}:4: op 'foo': input 'x' needs a dtype (a type attr like T, or a dtype like float32)"),
    ("wrong-type-summary", "op: foo\nsummary: [a, b]\n" + X_IN + Z_OUT + PY,
     f"{F}:2: op 'foo': summary must be a non-empty string, got a list"),
    ("undefined-type-attr", HEAD + "type_attrs: {T: [float32]}\ninputs:\n  x: {dtype: U, shape: [n]}\n"
     "outputs:\n  z: {dtype: T, shape: [n]}\n" + PY,
     f"{F}:5: op 'foo': input 'x': dtype 'U' is neither a type attr nor a dtype name (declare it under type_attrs)"),
    ("bad-dtype-name", HEAD + "inputs:\n  x: {dtype: flot32, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': unknown dtype 'flot32' (did you mean 'float32'?)"),
    ("dtype-group-on-tensor", HEAD + "inputs:\n  x: {dtype: floats, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': dtype 'floats' is a group; declare a type attr (type_attrs: {{T: [floats]}}) "
     f"and write dtype: T"),
    ("bad-dtype-in-type-attr", HEAD + "type_attrs:\n  T: [float32, flaot64]\ninputs:\n  x: {dtype: T, shape: [n]}\n"
     "outputs:\n  z: {dtype: T, shape: [n]}\n" + PY,
     f"{F}:4: op 'foo': type attr 'T': unknown dtype 'flaot64' (did you mean 'float64'?)\n"
     f"{F}:6: op 'foo': input 'x': dtype 'T' is neither a type attr nor a dtype name (declare it under type_attrs)\n"
     f"{F}:8: op 'foo': output 'z': dtype 'T' is neither a type attr nor a dtype name (declare it under type_attrs)"),
    ("type-attr-default-not-allowed", HEAD + "type_attrs:\n  D: {allowed: [float32, float64], default: int32}\n"
     + X_IN + "outputs:\n  z: {dtype: D, shape: [n]}\n" + PY,
     f"{F}:4: op 'foo': type attr 'D': default 'int32' is not one of its dtypes (float32, float64)"),
    ("unused-type-attr", HEAD + "type_attrs:\n  T: [float32]\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': type attr 'T' is used by no input or output; remove it"),
    ("undefined-output-dim", HEAD + "inputs:\n  x: {dtype: float32, shape: [rows, cols]}\n"
     "outputs:\n  z: {dtype: float32, shape: [rows, col]}\n" + PY,
     f"{F}:6: op 'foo': output 'z' uses dim 'col' that no input binds (did you mean 'cols'?)"),
    ("name-collision", HEAD + "attrs:\n  x: {type: int, default: 1}\n" + X_IN + Z_OUT + PY,
     f"{F}:6: op 'foo': input 'x' has the name of attr 'x' (line 4); rename one"),
    ("duplicate-op-in-file", HEAD + X_IN + Z_OUT + PY + "---\n" + HEAD + X_IN + Z_OUT + PY,
     f"{F}:9: op 'foo': declared twice in this file (first at line 1); rename one"),
    ("default-wrong-type", HEAD + "attrs:\n  k: {type: int, default: 1.5}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 'k': default 1.5 must be an int"),
    ("default-below-min", HEAD + "attrs:\n  k: {type: int, default: 0, min: 1}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 'k': default 0 must be >= 1"),
    ("default-not-a-choice", HEAD + "attrs:\n  mode: {type: str, default: max, choices: [sum, mean]}\n"
     + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 'mode': default 'max' must be one of sum, mean"),
    ("unknown-attr-type", HEAD + "attrs:\n  k: {type: integer}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 'k': unknown type 'integer' (did you mean 'int'?); "
     f"use one of int, float, bool, str, list(int), list(float)"),
    ("min-above-max", HEAD + "attrs:\n  k: {type: int, min: 5, max: 1}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 'k': min 5 is above max 1"),
    ("bad-op-name", "op: PairwiseL1\nsummary: Foo.\n" + X_IN + Z_OUT + PY,
     f"{F}:1: op name 'PairwiseL1' must be lower_snake_case ([a-z][a-z0-9_]*), like 'pairwise_l1'"),
    ("reserved-op-name", "op: stop\nsummary: Foo.\n" + X_IN + Z_OUT + PY,
     f"{F}:1: op name 'stop' is reserved ('gradient: stop' means no gradient)"),
    ("ellipsis-not-leading", HEAD + "inputs:\n  x: {dtype: float32, shape: [n, ...]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': '...' may only lead a shape, as in [..., n]"),
    ("ellipsis-twice", HEAD + "inputs:\n  x: {dtype: float32, shape: [..., ..., n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': '...' may only lead a shape, as in [..., n]"),
    ("output-ellipsis-without-input", HEAD + X_IN + "outputs:\n  z: {dtype: float32, shape: [..., n]}\n" + PY,
     f"{F}:6: op 'foo': output 'z' uses '...' but no input has '...'"),
    ("bad-dim-expression", HEAD + X_IN + "outputs:\n  z: {dtype: float32, shape: [\"n ** 2\"]}\n" + PY,
     f"{F}:6: op 'foo': output 'z': dim expression 'n ** 2' may use only integers, dim and attr names, "
     f"+ - * // %, max()/min() and 'a if cond else b' (cond: comparisons, and/or/not)"),
    ("unparsable-dim-expression", HEAD + X_IN + "outputs:\n  z: {dtype: float32, shape: [\"n +\"]}\n" + PY,
     f"{F}:6: op 'foo': output 'z': cannot parse dim expression 'n +': invalid syntax"),
    ("expression-in-input", HEAD + "inputs:\n  x: {dtype: float32, shape: [\"n + 1\"]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x' uses dim 'n' that no input binds; name it alone in an input shape to bind "
     f"it (an input's expression checks a size, it binds nothing)\n"
     f"{F}:6: op 'foo': output 'z' uses dim 'n' that no input binds"),
    ("float-attr-in-expression", HEAD + "attrs:\n  s: {type: float, default: 1.0}\n" + X_IN
     + "outputs:\n  z: {dtype: float32, shape: [\"n * s\"]}\n" + PY,
     f"{F}:8: op 'foo': output 'z': attr 's' is a float; dim expressions may use only int attrs "
     f"(and, in conditions, bool attrs and str attrs with choices)"),
    ("negative-size", HEAD + "inputs:\n  x: {dtype: float32, shape: [-1]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': a size must be >= 0, got -1\n"
     f"{F}:6: op 'foo': output 'z' uses dim 'n' that no input binds"),
    ("missing-required-keys", "op: foo\n" + X_IN + Z_OUT,
     f"{F}:1: op 'foo': missing key 'summary'\n{F}:1: op 'foo': missing key 'kernels'"),
    ("missing-op-key", "summary: Foo.\n" + X_IN + Z_OUT + PY,
     f"{F}:1: missing key 'op' (the op's name, like 'op: pairwise_manhattan')"),
    ("no-inputs-or-outputs", HEAD + PY,
     f"{F}:1: op 'foo': missing keys 'inputs' and 'outputs' (an op needs at least one of them)"),
    ("unknown-device", HEAD + X_IN + Z_OUT + "kernels: {gpu: foo_gpu.cu}\n",
     f"{F}:7: op 'foo': unknown kernel device 'gpu' (did you mean 'cpu'?); devices are cpu, cuda, python"),
    ("missing-kernel-file", HEAD + X_IN + Z_OUT + "kernels: {cpu: missing_cpu.cc}\n",
     f"{F}:7: op 'foo': cpu kernel file 'opdefs/missing_cpu.cc' does not exist (create it, or fix the path: "
     f"it is relative to the declaration's folder)"),
    ("missing-python-kernel-file", HEAD + X_IN + Z_OUT + "kernels: {python: nope.py:foo}\n",
     f"{F}:7: op 'foo': python kernel file 'opdefs/nope.py' does not exist (create it, or fix the path: "
     f"it is relative to the declaration's folder)"),
    ("kernel-outside-workspace", HEAD + X_IN + Z_OUT + "kernels: {cpu: ../../elsewhere.cc}\n",
     None),  # the message names the tmp path; checked for its start below
    ("cuda-kernel-suffix", HEAD + X_IN + Z_OUT + "kernels: {cuda: foo_cpu.cc}\n",
     f"{F}:7: op 'foo': a cuda kernel must be a .cu file, got 'foo_cpu.cc'"),
    ("cpu-kernel-with-shape-fn", HEAD + "shape_fn: f.py:g\n" + X_IN + "outputs:\n  z: {dtype: float32}\n"
     + "kernels: {cpu: foo_cpu.cc}\n",
     f"{F}:3: op 'foo': shape_fn file 'opdefs/f.py' does not exist (create it, or fix the path: it is relative "
     f"to the declaration's folder)\n"
     f"{F}:8: op 'foo': a cpu kernel needs declared shapes, not a shape_fn (the generated glue checks inputs "
     f"and allocates outputs from them)"),
    ("cpu-kernel-with-any-shape", HEAD + "inputs:\n  x: {dtype: float32, shape: any}\n"
     "outputs:\n  z: {dtype: float32, shape: [3]}\n" + "kernels: {cpu: foo_cpu.cc}\n",
     f"{F}:7: op 'foo': a cpu kernel needs declared shapes, and 'x' has none; write them as lists like [n, p]"),
    ("output-without-shape", HEAD + X_IN + "outputs:\n  z: {dtype: float32, shape: any}\n" + PY,
     f"{F}:6: op 'foo': output 'z' needs a shape (a list like [n, m]), or give the op a shape_fn"),
    ("output-shape-with-shape-fn", HEAD + "shape_fn: kernels.py:foo\n" + X_IN + Z_OUT + PY,
     f"{F}:7: op 'foo': output 'z' declares a shape but the op has a shape_fn, which gives output shapes; "
     f"remove one"),
    ("bad-shape-fn-form", HEAD + "shape_fn: a:b:c\n" + X_IN + "outputs:\n  z: {dtype: float32}\n" + PY,
     f"{F}:3: op 'foo': shape_fn 'a:b:c' must be 'file.py:function' (a file of the workspace, relative to the "
     f"declaration's folder)"),
    # Python run by generate, gradcheck and the runtime comes only from the workspace's own files.
    ("shape-fn-names-an-installed-module", HEAD + "shape_fn: this:x\n" + X_IN + "outputs:\n  z: {dtype: float32}\n"
     + PY,
     f"{F}:3: op 'foo': shape_fn 'this:x' names a module, not a file: a shape_fn resolves only to a .py file "
     f"inside the workspace; write 'file.py:x'"),
    ("python-kernel-names-a-module", HEAD + X_IN + Z_OUT + "kernels: {python: os.path:join}\n",
     f"{F}:7: op 'foo': python kernel 'os.path:join' names a module, not a file: a python kernel resolves only "
     f"to a .py file inside the workspace; write 'file.py:join'"),
    ("shape-fn-file-outside-the-workspace", HEAD + "shape_fn: ../../x.py:f\n" + X_IN
     + "outputs:\n  z: {dtype: float32}\n" + PY, None),
    ("list-length-not-int", HEAD + "attrs:\n  N: {type: float, default: 1.0}\n"
     "inputs:\n  xs: {dtype: float32, shape: [n], list: N}\n" + Z_OUT + PY,
     f"{F}:6: op 'foo': input 'xs': list length 'N' is a float attr; it must be an int attr"),
    ("gradient-not-an-op-name", HEAD + X_IN + Z_OUT + PY + "gradient: Foo-Grad\n",
     f"{F}:8: op 'foo': gradient 'Foo-Grad' is not an op name; write an op name, 'stop' (no gradient flows) "
     f"or null (not differentiable)"),
    ("differentiable-not-an-input", HEAD + X_IN + Z_OUT + PY + "gradient: foo_grad\ndifferentiable: [xx]\n",
     f"{F}:9: op 'foo': differentiable names 'xx', which is not an input (did you mean 'x'?)"),
    ("differentiable-integer-input", HEAD + "inputs:\n  i: {dtype: int32, shape: [n]}\n" + Z_OUT + PY
     + "gradient: foo_grad\ndifferentiable: [i]\n",
     f"{F}:9: op 'foo': differentiable names 'i', whose dtype can only be an integer or bool; "
     f"no gradient flows into it"),
    ("differentiable-without-gradient-op", HEAD + X_IN + Z_OUT + PY + "gradient: stop\ndifferentiable: [x]\n",
     f"{F}:9: op 'foo': differentiable is set but the op has no gradient op; remove it or name one under "
     f"'gradient:'"),
    ("gradcheck-unknown-key", HEAD + X_IN + Z_OUT + PY + "gradcheck: {rtoll: 1e-3}\n",
     f"{F}:8: op 'foo': unknown key 'rtoll' in gradcheck (did you mean 'rtol'?)"),
    ("gradcheck-bad-domain", HEAD + X_IN + Z_OUT + PY + "gradcheck: {domain: [2, -2]}\n",
     f"{F}:8: op 'foo': gradcheck domain must have low < high, got [2, -2]"),
    ("gradcheck-wrong-type", HEAD + X_IN + Z_OUT + PY + "gradcheck: {max_examples: many}\n",
     f"{F}:8: op 'foo': gradcheck max_examples must be an integer, got 'many'"),
    # gradcheck attrs: the values to check each attr with, each fitting the attr's declaration.
    ("gradcheck-attrs-unknown-attr", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {axis: [[0]]}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'axis' is not an attr of the op (did you mean 'axes'?); its attrs "
     f"are k, axes, mode"),
    ("gradcheck-attrs-op-has-none", HEAD + X_IN + Z_OUT + PY + "gradcheck: {attrs: {k: [1]}}\n",
     f"{F}:8: op 'foo': gradcheck attrs: 'k' is not an attr of the op; the op declares no attrs"),
    ("gradcheck-attrs-out-of-bounds", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {k: [1, 9]}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'k': value 9 must be <= 8"),
    ("gradcheck-attrs-wrong-type", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {k: [two]}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'k': value 'two' must be an int"),
    ("gradcheck-attrs-not-a-choice", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {mode: [sum, max]}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'mode': value 'max' must be one of sum, mean"),
    ("gradcheck-attrs-list-value-not-nested", HEAD + ATTRS + X_IN + Z_OUT + PY
     + "gradcheck:\n  attrs:\n    axes: [0, [1, 2]]\n",
     f"{F}:14: op 'foo': gradcheck attrs: 'axes': value 0 must be a list of ints (each value of a list(int) "
     f"attr is a list: [[0, 1]])"),
    ("gradcheck-attrs-list-item-wrong-type", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {axes: [[0, x]]}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'axes': value [0, 'x'] must be a list of ints"),
    ("gradcheck-attrs-not-a-list", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {k: 3}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'k' must be a list of values to draw from, got 3"),
    ("gradcheck-attrs-empty", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {k: []}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'k' lists no values; give at least one, or remove it"),
    ("gradcheck-attrs-twice", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: {axes: [[0], [-1], [0]]}}\n",
     f"{F}:12: op 'foo': gradcheck attrs: 'axes': value [0] is listed twice"),
    ("gradcheck-attrs-list-length", HEAD + "inputs:\n  xs: {dtype: float32, shape: [n], list: N}\n" + Z_OUT + PY
     + "gradcheck: {attrs: {N: [2]}}\n",
     f"{F}:8: op 'foo': gradcheck attrs: 'N' is the length of list input 'xs', drawn from its bounds; remove it"),
    ("gradcheck-attrs-not-a-mapping", HEAD + ATTRS + X_IN + Z_OUT + PY + "gradcheck: {attrs: [k]}\n",
     f"{F}:12: op 'foo': gradcheck attrs must be a mapping of names to settings, got a list"),
    ("reference-syntax", HEAD + X_IN + Z_OUT + PY + "reference: \"np.abs(x\"\n",
     f"{F}:8: op 'foo': reference is not a Python expression: '(' was never closed (column 7)"),
    ("duplicate-yaml-key", HEAD + X_IN + Z_OUT + PY + "summary: Again.\n",
     f"{F}:8: key 'summary' appears twice (first at line 2); keep one"),
    ("yaml-syntax-error", HEAD + "inputs: {x: [\n",
     f"{F}:4: YAML syntax error: while parsing a flow node, did not find expected node content"),
    ("not-a-mapping", "- op: foo\n- summary: Foo.\n",
     f"{F}:1: a declaration must be a mapping of keys (op: name, summary: ..., inputs: ...)"),
    ("empty-file", "# nothing yet\n",
     f"{F}:1: no op declared here (a declaration is a mapping starting with 'op: name')"),
    # Names codegen cannot carry: keywords of Python or C++, and names past the length limit.
    ("python-keyword-op-name", "op: class\nsummary: Foo.\n" + X_IN + Z_OUT + PY,
     f"{F}:1: op name 'class' is a Python keyword, which the generated wrapper cannot take as a name; "
     f"choose another"),
    ("cpp-keyword-op-name", "op: namespace\nsummary: Foo.\n" + X_IN + Z_OUT + PY,
     f"{F}:1: op name 'namespace' is a C++ keyword, which the generated glue cannot take as a name; "
     f"choose another"),
    ("python-keyword-input", HEAD + "inputs:\n  lambda: {dtype: float32, shape: [n]}\n  y: {dtype: float32, "
     "shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input name 'lambda' is a Python keyword, which the generated wrapper cannot take as a "
     f"name; choose another"),
    ("cpp-keyword-output", HEAD + X_IN + "outputs:\n  delete: {dtype: float32, shape: [n]}\n" + PY,
     f"{F}:6: op 'foo': output name 'delete' is a C++ keyword, which the generated glue cannot take as a name; "
     f"choose another"),
    ("keyword-attr", HEAD + "attrs:\n  import: {type: int, default: 1}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr name 'import' is a Python keyword, which the generated wrapper cannot take as a "
     f"name; choose another"),
    ("keyword-dim", HEAD + "inputs:\n  x: {dtype: float32, shape: [n, struct]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': dim name 'struct' is a C++ keyword, which the generated glue cannot take as "
     f"a name; choose another"),
    ("overlong-op-name", "op: " + "a" * 1000 + "\nsummary: Foo.\n" + X_IN + Z_OUT + PY,
     f"{F}:1: op name '{'a' * 60}...' is 1000 characters long; names may have at most 64; choose another"),
    ("overlong-input-name", HEAD + "inputs:\n  " + "x" * 65 + ": {dtype: float32, shape: [m]}\n"
     + X_IN[len("inputs:\n"):] + Z_OUT + PY,
     f"{F}:4: op 'foo': input name '{'x' * 60}...' is 65 characters long; names may have at most 64; "
     f"choose another"),
    # Text codegen cannot carry, and values with no literal in generated code.
    ("nul-in-summary", "op: foo\nsummary: \"Foo\\0.\"\n" + X_IN + Z_OUT + PY,
     f"{F}:2: text holds the control character U+0000, which generated code cannot carry; remove it"),
    ("escape-in-doc", HEAD + "doc: \"bell\\a\"\n" + X_IN + Z_OUT + PY,
     f"{F}:3: text holds the control character U+0007, which generated code cannot carry; remove it"),
    ("inf-default", HEAD + "attrs:\n  s: {type: float, default: .inf}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 's': default .inf must be a finite number (.inf and .nan have no literal in the "
     f"generated code)"),
    ("nan-in-list-default", HEAD + "attrs:\n  s: {type: list(float), default: [1.0, .nan]}\n" + X_IN + Z_OUT + PY,
     f"{F}:4: op 'foo': attr 's': default a list must be a finite number (.inf and .nan have no literal in the "
     f"generated code)"),
    # YAML that must not be half-read: explicit tags, alias bombs, deep nesting, bad bytes, tabs.
    ("python-tag", "op: foo\nsummary: !!python/object/apply:os.system [echo hi]\n" + X_IN + Z_OUT + PY,
     f"{F}:2: explicit YAML tag '!!python/object/apply:os.system': tags are not read in declarations; remove "
     f"it and write the plain value"),
    ("local-tag-on-mapping", HEAD + "inputs: !custom\n  x: {dtype: float32, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:3: explicit YAML tag '!custom': tags are not read in declarations; remove it and write the plain "
     f"value"),
    ("alias-bomb", HEAD + X_IN + Z_OUT + PY + "attrs:\n  k: {type: list(int), default: []}\ngradcheck:\n"
     "  attrs:\n    k: [" + _alias_bomb(levels=6, width=9) + "]\n",
     f"{F}:12: this value expands to more than 10000 values (each *alias repeats its anchor's values); write it "
     f"out without aliases"),
    ("deep-nesting", HEAD + "doc: " + "[" * 20000 + "]" * 20000 + "\n" + X_IN + Z_OUT + PY,
     f"{F}:3: lists and mappings nest more than 50 deep here; a declaration needs a few levels"),
    ("tab-indentation", HEAD + "inputs:\n\tx: {dtype: float32, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: YAML syntax error: a tab in the indentation (YAML indents with spaces only); replace it with "
     f"spaces"),
    # An unknown dtype with no close match lists the valid ones.
    ("unknown-dtype-lists-dtypes", HEAD + "inputs:\n  x: {dtype: quux, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input 'x': dtype 'quux' is neither a type attr nor a dtype name (declare it under "
     f"type_attrs); dtypes are bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
     f"float32, float64, complex64, complex128"),
    ("unknown-dtype-in-type-attr-lists-dtypes", HEAD + "type_attrs: {T: [quux]}\ninputs:\n  x: {dtype: float32, "
     "shape: [n]}\n" + Z_OUT + PY,
     f"{F}:3: op 'foo': type attr 'T': unknown dtype 'quux'; dtypes are bool, int8, int16, int32, int64, uint8, "
     f"uint16, uint32, uint64, float16, float32, float64, complex64, complex128 (groups: floats, ints, reals, "
     f"numbers, all)"),
    # gradcheck's stress cases: dims of the op, sizes within bounds.
    ("gradcheck-stress-dim-unknown", HEAD + "inputs:\n  x: {dtype: float32, shape: [n, p]}\n" + Z_OUT + PY
     + "gradcheck: {stress_dims: [q]}\n",
     f"{F}:8: op 'foo': gradcheck stress_dims: 'q' is not a dim of the op's inputs; its dims are n, p"),
    ("gradcheck-stress-dim-no-dims", HEAD + "inputs:\n  x: {dtype: float32, shape: [3]}\n"
     "outputs:\n  z: {dtype: float32, shape: [3]}\n" + PY + "gradcheck: {stress_dims: [n]}\n",
     f"{F}:8: op 'foo': gradcheck stress_dims: 'n' is not a dim of the op's inputs; the op's inputs name no dims"),
    ("gradcheck-stress-size-too-large", HEAD + X_IN + Z_OUT + PY + "gradcheck: {stress_sizes: [16, 4096]}\n",
     f"{F}:8: op 'foo': gradcheck stress_sizes: 4096 is above 512 (finite differences cost two calls per "
     f"element); use a smaller size"),
    ("gradcheck-stress-size-negative", HEAD + X_IN + Z_OUT + PY + "gradcheck: {stress_sizes: [-1]}\n",
     f"{F}:8: op 'foo': gradcheck stress_sizes values must be >= 0, got -1"),
    # Root cause first: the misspelt key, then what follows from it.
    ("root-cause-first", HEAD + "type_attrs: {T: [float32]}\ninptus:\n  x: {dtype: T, shape: [n]}\n"
     "outputs:\n  z: {dtype: T, shape: [n]}\n" + PY,
     f"{F}:4: op 'foo': unknown key 'inptus' in the declaration (did you mean 'inputs'?)\n"
     f"{F}:3: op 'foo': type attr 'T' is used by no input or output; remove it\n"
     f"{F}:7: op 'foo': output 'z' uses dim 'n' that no input binds"),
    ("root-cause-first-refused-input", HEAD + "inputs:\n  class: {dtype: float32, shape: [n]}\n" + Z_OUT + PY,
     f"{F}:4: op 'foo': input name 'class' is a Python keyword, which the generated wrapper cannot take as a "
     f"name; choose another\n"
     f"{F}:6: op 'foo': output 'z' uses dim 'n' that no input binds"),
]


@pytest.mark.parametrize("declaration, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mistake_is_reported_exactly(ws, declaration, expected):
    path = ws.write("op.yaml", declaration)
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, ws.root)
    if expected is None and "elsewhere" in declaration:
        assert str(info.value).startswith(f"{F}:7: op 'foo': cpu kernel file '../../elsewhere.cc' lies outside")
    elif expected is None:
        assert str(info.value).startswith(f"{F}:3: op 'foo': shape_fn file '../../x.py' lies outside the workspace")
    else:
        assert str(info.value) == expected


def test_unknown_shape_fn_suggests_a_named_one(ws, monkeypatch):
    from opsdk.registry import shape_fns

    monkeypatch.setitem(shape_fns.SHAPE_FNS, "broadcast", lambda shapes, attrs: [None])
    path = ws.write("op.yaml", HEAD + "shape_fn: brodcast\n" + X_IN + "outputs:\n  z: {dtype: float32}\n" + PY)
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, ws.root)
    assert str(info.value) == (f"{F}:3: op 'foo': unknown shape_fn 'brodcast' (did you mean 'broadcast'?); "
                               f"use a name from opsdk.registry.SHAPE_FNS, or 'file.py:function'")


def test_every_error_of_a_file_is_reported_at_once(ws):
    path = ws.write("op.yaml", HEAD + "inputs:\n  x: {dtype: flot32, shape: [n]}\n" + Z_OUT
                    + "kernels: {gpu: x.cu}\n" + "---\nop: Bar\n")
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, ws.root)
    lines = [str(e) for e in info.value.errors]
    assert [e.location.line for e in info.value.errors] == [4, 7, 9, 9, 9, 9]
    assert lines[0].endswith("unknown dtype 'flot32' (did you mean 'float32'?)")
    assert "unknown kernel device 'gpu'" in lines[1]
    assert lines[2] == f"{F}:9: op name 'Bar' must be lower_snake_case ([a-z][a-z0-9_]*), like 'bar'"


def test_undecodable_bytes_are_reported_on_their_own_line(ws):
    path = ws.opdefs / "op.yaml"
    path.write_bytes((HEAD + X_IN).encode() + b"  # caf\xe9\n" + (Z_OUT + PY).encode())
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, ws.root)
    assert str(info.value) == f"{F}:5: byte 0xe9 is not UTF-8 text; save the file as UTF-8"


@pytest.mark.parametrize("suffix", [".YAML", ".Yml", ".yml"])
def test_declarations_are_read_whatever_the_case_of_their_suffix(ws, suffix):
    from opsdk.registry import Workspace

    path = ws.write("op" + suffix, HEAD + X_IN + Z_OUT + PY)
    assert Workspace(ws.root).declaration_files() == [path]
    [spec] = parse_opdef(path, ws.root)
    assert spec.name == "foo"
