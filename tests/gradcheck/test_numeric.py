"""Finite differences, the error measure and the sandbox of reference expressions."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.gradcheck.numeric import central_difference, eval_reference, worst_element


def test_central_difference_of_a_contraction_is_its_gradient():
    x = np.array([[0.5, -1.5], [2.0, 0.25]])
    cot = np.array([[1.0, -2.0], [0.5, 3.0]])

    def objective(values):
        return float(np.sum(cot * np.sin(values["x"])))

    numeric = central_difference(objective, {"x": x}, ("x", None), 1e-6)
    np.testing.assert_allclose(numeric, cot * np.cos(x), rtol=1e-8)


def test_central_difference_divides_by_the_step_a_float32_input_really_took():
    x = np.array([1.0], dtype=np.float32)
    numeric = central_difference(lambda v: float(v["x"][0]), {"x": x}, ("x", None), 1e-3)
    # The float32 step is not exactly 2e-3; dividing by 2e-3 would be off by ~1e-5.
    assert numeric[0] == pytest.approx(1.0, abs=1e-12)


def test_central_difference_on_one_tensor_of_a_list_input():
    xs = (np.array([1.0, 2.0]), np.array([3.0]))
    numeric = central_difference(lambda v: float(v["xs"][0] @ v["xs"][0] + 5 * v["xs"][1][0]),
                                 {"xs": xs}, ("xs", 1), 1e-6)
    assert numeric.tolist() == pytest.approx([5.0])


def test_worst_element_is_the_largest_error_relative_to_tolerance():
    actual = np.array([1.0, 100.5, 0.011])
    expected = np.array([1.0, 100.0, 0.010])
    worst = worst_element(actual, expected, rtol=1e-2, atol=1e-4)
    # 100.5 vs 100 is within 1 % (ratio ~0.5); 0.011 vs 0.010 is not (ratio ~5).
    assert worst.index == (2,) and worst.ratio == pytest.approx(0.001 / (1e-4 + 1e-4))
    assert worst_element(np.zeros(0), np.zeros(0), 1e-4, 1e-6) is None


def test_nan_is_the_worst_element():
    worst = worst_element(np.array([1.0, np.nan]), np.array([1.0, 2.0]), 1e-4, 1e-6)
    assert worst.index == (1,) and worst.ratio == np.inf


def test_reference_sees_np_inputs_and_attrs_in_float64():
    x = np.zeros((0, 3), dtype=np.float32)  # an empty sum makes NumPy import its helpers
    (value,) = eval_reference("np.abs(x).sum(-1) * k", {"x": x}, {"k": 2})
    assert value.shape == (0,) and value.dtype == np.float64


def test_reference_is_plain_python_not_a_sandbox():
    # docs/trust.md: a reference is the op author's code, run with Python's builtins. Nothing
    # pretends otherwise (an earlier namespace without builtins was escapable through np).
    assert eval_reference("len(x) + abs(-k)", {"x": np.ones(2)}, {"k": 3}) == (5,)
