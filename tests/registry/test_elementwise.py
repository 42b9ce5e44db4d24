"""`elementwise:` formulas: parsed once into a typed expression, checked with file:line errors."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry import OpDefErrors, load_registry, parse_opdef
from opsdk.registry.elementwise import (Apply, FusedKernel, Num, Var, evaluate, kernel_problem,
                                        output_formulas, parse_expression)

HEAD = "op: foo\nsummary: Foo.\ntype_attrs: {T: [float32, float64]}\n"
SIG = ("inputs:\n  x: {dtype: T, shape: [n]}\n  y: {dtype: T, shape: [n]}\n"
       "attrs:\n  a: {type: float, default: 1.0}\n  mode: {type: str, default: s}\n"
       "outputs:\n  z: {dtype: T, shape: [n]}\n")
PY = "kernels: {python: kernels.py:foo}\n"
F = "opdefs/op.yaml"


def test_a_formula_becomes_a_typed_expression():
    expr = parse_expression("a * tanh(x) + -y", frozenset({"x", "y", "a"}))
    assert expr == Apply("+", (Apply("*", (Var("a"), Apply("tanh", (Var("x"),)))),
                               Apply("neg", (Var("y"),))))
    assert parse_expression("2", frozenset()) == Num(2.0)


@pytest.mark.parametrize("formula, message", [
    ('"x + w"', "unknown name 'w' (inputs and number attrs: a, x, y)"),
    ('"x + mode"', "unknown name 'mode' (inputs and number attrs: a, x, y)"),
    ('"log(x)"', "unknown function 'log' (functions: abs, exp, max, min, sigmoid, sqrt, tanh, "
                 "where)"),
    ('"max(x)"', "max() takes 2 argument(s), got 1"),
    ('"x ** 2"', "'x ** 2' is not part of the formula language (numbers, names, + - * /, "
                 "comparisons, and the functions abs, exp, max, min, sigmoid, sqrt, tanh, where)"),
    ('"x +"', "cannot read 'x +': invalid syntax"),
    ('"__import__(\'os\')"', "unknown function '__import__' (functions: abs, exp, max, min, "
                             "sigmoid, sqrt, tanh, where)"),
    ("[x]", "elementwise must be a non-empty string, got a list"),
])
def test_a_wrong_formula_is_a_located_error(ws, formula, message):
    path = ws.write("op.yaml", HEAD + SIG + PY + f"elementwise: {formula}\n")
    with pytest.raises(OpDefErrors) as info:
        parse_opdef(path, ws.root)
    line = (HEAD + SIG + PY).count("\n") + 1
    text = str(info.value)
    assert text.startswith(f"{F}:{line}: op 'foo': "), text
    assert text.endswith(message) or message in text, text


def test_an_op_with_two_outputs_gives_a_formula_per_output(ws):
    two = SIG + "  w: {dtype: T, shape: [n]}\n"
    path = ws.write("op.yaml", HEAD + two + PY + 'elementwise: "x"\n')
    with pytest.raises(OpDefErrors, match=r"gives a formula per output, as a mapping \(z: \.\.\., "
                                          r"w: \.\.\.\)"):
        parse_opdef(path, ws.root)
    path = ws.write("op.yaml", HEAD + two + PY + 'elementwise: {z: "x", v: "x"}\n')
    with pytest.raises(OpDefErrors, match="it must name each output once: z, w"):
        parse_opdef(path, ws.root)
    path = ws.write("op.yaml", HEAD + two + PY + 'elementwise: {z: "x", w: "x + q"}\n')
    with pytest.raises(OpDefErrors, match="elementwise: w: unknown name 'q'"):
        parse_opdef(path, ws.root)
    path = ws.write("op.yaml", HEAD + two + PY + 'elementwise: {w: "-x", z: "x * 2"}\n')
    spec = parse_opdef(path, ws.root)[0]
    assert output_formulas(spec.elementwise) == (parse_expression("x * 2", frozenset("x")),
                                                 parse_expression("-x", frozenset("x")))


def test_builtin_elementwise_formulas_agree_with_their_references():
    """Each builtin formula computes what the op's declared reference computes."""
    registry = load_registry()
    rng = np.random.default_rng(0)
    checked = several = 0
    for name in registry.names():
        spec = registry.get(name)
        if spec.elementwise is None:
            continue
        env = {t.name: rng.uniform(0.1, 2.0, size=7) * rng.choice([-1, 1], size=7)
               for t in spec.inputs}
        if name in ("sqrt", "sqrt_grad"):
            env = {k: np.abs(v) for k, v in env.items()}
        got = [evaluate(f, env, np) for f in output_formulas(spec.elementwise)]
        if spec.reference is not None:
            want = eval(spec.reference, {"np": np}, dict(env))  # noqa: S307 - the repo's own
            np.testing.assert_allclose(got[0], want, rtol=1e-12, err_msg=name)
        else:  # a gradient op: the python kernel is its meaning (every output)
            from opsdk.runtime.frontend.api import apply_op  # noqa: F401 - registers kernels
            from opsdk.runtime.kernels.choice import bind_kernel, choose_kernel
            from opsdk.runtime.devices import host
            call = bind_kernel(spec, choose_kernel(spec, host()), {}, {})
            want = call([env[t.name] for t in spec.inputs])
            assert len(want) == len(got), name
            for j, (a, b) in enumerate(zip(got, want)):
                np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=f"{name} output {j}")
            several += len(got) > 1
        checked += 1
    assert checked >= 20
    assert several >= 6  # add, sub, mul, div, maximum and minimum's gradients


def test_a_fused_kernel_description_is_checked():
    ok = FusedKernel("float32", ("array",), (("t0", Var("in0")),), ("t0",))
    assert kernel_problem(ok) is None
    assert "before it is computed" in kernel_problem(
        FusedKernel("float32", ("array",), (("t0", Var("t1")),), ("t0",)))
    assert "float32 or float64" in kernel_problem(
        FusedKernel("int32", ("array",), (("t0", Var("in0")),), ("t0",)))
    assert ok.key() == FusedKernel("float32", ("array",), (("t0", Var("in0")),), ("t0",)).key()
