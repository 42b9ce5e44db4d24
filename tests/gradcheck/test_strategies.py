"""The cases drawn from a declaration respect its dims, attrs, domain, kinks and dtypes."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from opsdk.gradcheck.strategies import case_strategy, plan_op
from opsdk.registry.spec import GradCheckSpec

from gc_specs import attr, op, tensor

FAST = settings(max_examples=40, deadline=None, database=None)

PAIRWISE = op("pm", [tensor("x", ["n", "p"]), tensor("y", ["m", "p"])], [tensor("z", ["n", "m"])],
              gradcheck=GradCheckSpec(min_gap=0.05, dim_range=(1, 4), domain=(-1.0, 1.0)))


@FAST
@given(st.data())
def test_symbolic_dims_bind_across_inputs_within_range(data):
    case = data.draw(case_strategy(plan_op(PAIRWISE)))
    dims, x, y = dict(case.dims), case.input_dict()["x"], case.input_dict()["y"]
    assert x.shape == (dims["n"], dims["p"]) and y.shape == (dims["m"], dims["p"])
    assert all(1 <= v <= 4 for v in dims.values())
    assert x.dtype == np.float64  # float64 is allowed, so it is used


@FAST
@given(st.data())
def test_values_stay_in_domain_and_min_gap_apart_across_inputs(data):
    case = data.draw(case_strategy(plan_op(PAIRWISE)))
    values = np.concatenate([a.ravel() for _, a in case.inputs])
    assert np.all((values >= -1.0) & (values <= 1.0))
    gaps = [abs(a - b) for a, b in itertools.combinations(values, 2)]
    assert not gaps or min(gaps) >= 0.05


@FAST
@given(st.data())
def test_values_keep_off_avoided_points(data):
    relu = op("r", [tensor("x", ["n"])], [tensor("y", ["n"])],
              gradcheck=GradCheckSpec(avoid=(0.0, 1.0), domain=(-2.0, 2.0)))
    plan = plan_op(relu)
    x = data.draw(case_strategy(plan)).input_dict()["x"]
    assert np.all(np.abs(x) >= plan.rule.margin) and np.all(np.abs(x - 1.0) >= plan.rule.margin)


@FAST
@given(st.data())
def test_const_dims_and_ellipsis(data):
    spec = op("e", [tensor("x", ["...", 3, "d"]), tensor("b", ["d"])], [tensor("y", ["...", 3, "d"])])
    case = data.draw(case_strategy(plan_op(spec)))
    x, b = case.input_dict()["x"], case.input_dict()["b"]
    assert x.shape[-2] == 3 and x.shape[-1] == b.shape[0]
    assert x.shape[:-2] == case.leading and len(case.leading) <= 2


@FAST
@given(st.data())
def test_attrs_within_bounds_choices_and_defaults(data):
    spec = op("a", [tensor("x", ["n"])], [tensor("y", ["n"])], attrs=[
        attr("k", "int", 1, lo=1, hi=64), attr("mode", "str", "sum", choices=("sum", "mean")),
        attr("alpha", "float", 0.5, lo=0.0, hi=1.0), attr("axes", "list(int)", [0]),
        attr("flag", "bool", False), attr("scale", "float", 2.0)])
    attrs = data.draw(case_strategy(plan_op(spec))).attr_dict()
    assert 1 <= attrs["k"] <= 5  # bounded ints stay small: sizes may depend on them
    assert attrs["mode"] in ("sum", "mean") and 0.0 <= attrs["alpha"] <= 1.0
    assert attrs["axes"] == [0] and attrs["scale"] == 2.0 and attrs["flag"] in (True, False)


@FAST
@given(st.data())
def test_list_inputs_and_integer_indices(data):
    spec = op("g", [tensor("xs", ["n", "p"], list_len="N"), tensor("idx", ["k"], dtype="int64")],
              [tensor("y", ["k", "p"])], attrs=[attr("N", "int", lo=1)],
              differentiable=["xs"])
    case = data.draw(case_strategy(plan_op(spec)))
    xs, idx = case.input_dict()["xs"], case.input_dict()["idx"]
    assert 1 <= len(xs) <= 3 and len({a.shape for a in xs}) == 1
    # Valid as an index into any dim of the float inputs, which are never empty then.
    assert idx.dtype == np.int64 and np.all((idx >= 0) & (idx < min(xs[0].shape)))



def test_float32_only_op_widens_tolerances():
    spec = op("f", [tensor("x", ["n"])], [tensor("y", ["n"])], allowed=("float16", "float32"))
    plan = plan_op(spec)
    assert plan.precision.dtype == "float32" and plan.precision.widened
    assert plan.precision.eps > spec.gradcheck.eps and plan.precision.rtol > spec.gradcheck.rtol


def test_required_string_attr_without_choices_skips_with_reason():
    spec = op("s", [tensor("x", ["n"])], [tensor("y", ["n"])], attrs=[attr("name", "str")])
    assert "attr 'name'" in plan_op(spec).skip


def test_same_seed_draws_the_same_cases():
    def draws(seed_value):
        seen = []

        @settings(max_examples=5, database=None, deadline=None)
        @given(case_strategy(plan_op(PAIRWISE)))
        def collect(case):
            seen.append(case.describe() + str([a.tolist() for _, a in case.inputs]))

        from hypothesis import seed as hseed
        hseed(seed_value)(collect)()
        return seen

    assert draws(3) == draws(3)
    assert draws(3) != draws(4)


def _attr_draws(spec, name: str, count: int = 60) -> list:
    """The values of attr `name` in `count` cases drawn for `spec` (seeded: the same every run)."""
    from hypothesis import seed as hseed

    seen = []

    @settings(max_examples=count, database=None, deadline=None)
    @given(case_strategy(plan_op(spec)))
    def collect(case):
        seen.append(case.attr_dict()[name])

    hseed(0)(collect)()
    return seen


LISTED = op("rs", [tensor("x", ["n", "m"])], [tensor("y", ["n"])], attrs=[
    attr("axes", "list(int)", ()), attr("keepdims", "bool", False), attr("k", "int", 1, lo=1, hi=64)],
    gradcheck=GradCheckSpec(attr_values=(("axes", ((), (0,), (-1,), (0, 1))), ("k", (3, 64)))))


def test_listed_values_are_drawn_and_nothing_else():
    axes, ks = _attr_draws(LISTED, "axes"), _attr_draws(LISTED, "k")
    # Every listed value comes up; a listed int replaces the bounds (64 is beyond the usual span).
    assert set(axes) == {(), (0,), (-1,), (0, 1)}
    assert set(ks) == {3, 64}


def test_unlisted_bool_is_drawn_both_ways_and_bounded_int_stays_in_bounds():
    spec = op("b", [tensor("x", ["n"])], [tensor("y", ["n"])],
              attrs=[attr("flag", "bool", False), attr("k", "int", 2, lo=-3, hi=9)])
    assert set(_attr_draws(spec, "flag")) == {True, False}
    ks = _attr_draws(spec, "k")
    assert min(ks) >= -3 and max(ks) <= 9 and len(set(ks)) > 1


def test_required_list_attr_with_listed_values_is_checked_not_skipped():
    spec = op("z", [tensor("x", ["n"])], [tensor("y", ["n"])], attrs=[attr("shape", "list(int)")],
              gradcheck=GradCheckSpec(attr_values=(("shape", ((2, 3),)),)))
    assert plan_op(spec).skip is None
    assert set(_attr_draws(spec, "shape", 5)) == {(2, 3)}
    unlisted = op("z", [tensor("x", ["n"])], [tensor("y", ["n"])], attrs=[attr("shape", "list(int)")])
    assert "gradcheck: {attrs: {shape: [...]}}" in plan_op(unlisted).skip


def test_coverage_counts_combinations_and_names_unused_listed_values():
    from opsdk.gradcheck.attr_draws import CoverageTally, attr_space

    plans = plan_op(LISTED).attrs
    assert attr_space(plans) == 4 * 2 * 2  # axes x keepdims x k
    tally = CoverageTally(plans)
    for axes, keepdims in [((0,), True), ((0,), True), ((0,), False), ((), True)]:
        tally.add({"axes": axes, "keepdims": keepdims, "k": 3})
    coverage = tally.coverage()
    assert coverage.text() == "3/16"
    assert coverage.unchecked == ("axes=[-1]", "axes=[0, 1]", "k=64")
    plain = op("p", [tensor("x", ["n"])], [tensor("y", ["n"])], attrs=[attr("axes", "list(int)", ())])
    assert CoverageTally(plan_op(plain).attrs).coverage() is None  # nothing drawn: no column value


# -- stress cases: sizes the small range never reaches --------------------------------------------

STRESSED = op("pm", [tensor("x", ["n", "p"]), tensor("y", ["m", "p"])], [tensor("z", ["n", "m"])],
              gradcheck=GradCheckSpec(dim_range=(0, 5), stress_dims=("p",), stress_sizes=(15, 16, 17, 300)))


def test_stress_schedule_gives_every_size_to_the_named_dims_in_turn():
    from opsdk.gradcheck.strategies import stress_schedule

    assert stress_schedule(STRESSED) == (("p", 15), ("p", 16), ("p", 17), ("p", 300))
    every = op("e", [tensor("x", ["n", "p"])], [tensor("z", ["n"])],
               gradcheck=GradCheckSpec(stress_sizes=(7, 8, 9)))
    assert stress_schedule(every) == (("n", 7), ("p", 8), ("n", 9))
    off = op("o", [tensor("x", ["n"])], [tensor("z", ["n"])], gradcheck=GradCheckSpec(stress_dims=()))
    assert stress_schedule(off) == ()


@FAST
@given(st.data())
def test_a_stress_case_fixes_its_dim_keeps_others_non_empty_and_fits_the_budget(data):
    from opsdk.gradcheck.strategies import MAX_STRESS_ELEMENTS

    size = data.draw(st.sampled_from([15, 16, 17, 300]))
    case = data.draw(case_strategy(plan_op(STRESSED), ("p", size)))
    dims = dict(case.dims)
    assert dims["p"] == size and dims["n"] >= 1 and dims["m"] >= 1
    assert all(a.size <= MAX_STRESS_ELEMENTS for _, a in case.inputs)
    if size <= 200:  # room for the others at the top of the range: tiles and their remainders
        assert dims["n"] * size <= MAX_STRESS_ELEMENTS


def test_the_simplest_stress_case_has_the_largest_other_dims():
    from hypothesis import find

    case = find(case_strategy(plan_op(STRESSED), ("p", 16)), lambda c: True)
    assert dict(case.dims) == {"n": 5, "p": 16, "m": 5}


@FAST
@given(st.data())
def test_cotangents_are_never_zero_and_not_all_equal(data):
    # The simplest draw (all zeros) included: hypothesis tries it first.
    from opsdk.gradcheck.values import cotangent, lift

    shape = data.draw(st.sampled_from([(1,), (2, 3), (4, 4)]))
    c = lift(data.draw(cotangent(shape, "float64")))
    assert c.shape == shape and np.all(np.abs(c) >= 0.25) and np.all(np.abs(c) <= 1.25)
    assert c.size == 1 or len(np.unique(np.sign(c))) == 2
