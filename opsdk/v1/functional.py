"""TF1's higher-order functions over the leading dimension: `map_fn`, `scan`, `foldl`, `foldr`;
and `tf.while_loop` and `tf.cond` with TF1's signatures (at the end).

Each is one opsdk `while_loop` over a count read at run time, as TensorFlow builds them, and each
is differentiable. TensorFlow collects the per-element results in a TensorArray; here they are the
loop's recorded history (`loop_intermediates`: h[i] is the value iteration i received), whose
gradient the loop's gradient carries back through the iterations. So `map_fn` runs `fn` on the
first element before the loop, which starts at the second: every element is mapped exactly once,
and `fn` is traced twice (a variable it creates must be one the second call reuses).

`elems` (and `initializer`) may be a tensor or nested lists/tuples of tensors; every tensor of
`elems` is unpacked along its first dimension, and all must have the same length. Zero elements
are an error (TensorFlow returns an empty result for `map_fn` and `scan` with an initializer).
`parallel_iterations`, `swap_memory` and `infer_shape` are accepted and change nothing: the loop
runs its iterations one after another, in memory.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

import opsdk
from opsdk.registry.dtypes import is_differentiable_dtype
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.control_flow.builders import loop_intermediates, with_final
from opsdk.runtime.ir.nest import flatten, pack, structure_text
from opsdk.v1.composed import logical_and as _logical_and, reverse as _reverse
from opsdk.v1.dtypes import as_dtype
from opsdk.v1 import math_ops as _m
from opsdk.v1 import tensor_array as _tensor_array
from opsdk.v1.tensors import convert_to_tensor as _t

__all__ = ["map_fn", "scan", "foldl", "foldr"]


def _elems(who: str, elems: Any) -> tuple[list, Any, Any]:
    """(the tensors of elems, their tree, their common length as a scalar tensor)."""
    leaves, tree = flatten(elems)
    if not leaves:
        raise OpsdkError(f"{who}: elems holds no tensor; give a tensor or a list/tuple of them")
    tensors = [_t(e) for e in leaves]
    for k, e in enumerate(tensors):
        if e.shape is not None and len(e.shape) == 0:
            raise OpsdkError(f"{who}: elems{'' if tree == '*' else f' leaf {k}'} ('{e.name}') "
                             "is a scalar; each tensor of elems is unpacked along its first "
                             "dimension")
    lengths = {e.shape[0] for e in tensors if e.shape is not None and e.shape[0] is not None}
    if len(lengths) > 1:
        raise OpsdkError(f"{who}: the tensors of elems differ in their first dimension "
                         f"({sorted(lengths)}); they are unpacked together")
    zero = opsdk.constant(0, dtype="int32")
    count = _m.gather(_m.shape(tensors[0]), zero)
    return tensors, tree, count


def _element(tensors: list, tree: Any, i: Any) -> Any:
    return pack(tree, [_m.gather(e, i) for e in tensors])


def _leaves(value: Any) -> tuple[list, Any]:
    leaves, tree = flatten(value)
    return [_t(v) for v in leaves], tree


def _loop(who: str, fn: Callable[..., Any], tensors: list, tree: Any, start: int, count: Any,
          init: list, acc_tree: Any, reverse: bool, history: bool, name: str) -> list:
    """Run acc = fn(acc, elems[t]) for t = start .. count-1 (from the end when reverse); the final
    accumulators, or with `history` each one's [init, after t = start, ..., final] stacked."""
    def body(i: Any, *acc: Any) -> list:
        t = count - 1 - i if reverse else i
        out = fn(pack(acc_tree, list(acc)), _element(tensors, tree, t))
        leaves, out_tree = _leaves(out)
        if len(leaves) != len(acc):
            raise OpsdkError(f"{who}: fn returns {structure_text(out_tree)}, but the accumulator "
                             f"is {structure_text(acc_tree)}")
        return [i + 1, *leaves]

    first = opsdk.constant(start, dtype="int32")
    _, *final = opsdk.while_loop(lambda i, *acc: _m.less(i, count), body, [first, *init],
                                 keep_intermediates=history, name=name)
    if not history:
        return final
    # per accumulator: what each iteration received, then the value the loop ended with
    _, histories = loop_intermediates(final[0].op)
    return [with_final(h, a) for h, a in zip(histories[len(histories) - len(final):], final)]


def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None,
           parallel_iterations: Optional[int] = None, back_prop: bool = True,
           swap_memory: bool = False, infer_shape: bool = True, name: Optional[str] = None) -> Any:
    """`fn` applied to each element of `elems` (unpacked along dimension 0), the results
    stacked along dimension 0. `dtype`: the structure and dtypes of `fn`'s result where they
    differ from `elems`'; every element's result must have one shape."""
    who = "tf.map_fn"
    with opsdk.name_scope(name or "map"):
        tensors, tree, count = _elems(who, elems)
        zero = opsdk.constant(0, dtype="int32")
        first, first_tree = _leaves(fn(_element(tensors, tree, zero)))
        if dtype is not None:
            declared, dtype_tree = flatten(dtype)
            if len(declared) != len(first):
                raise OpsdkError(f"{who}: fn returns {structure_text(first_tree)}, but dtype "
                                 f"declares {structure_text(dtype_tree)}")
            for k, (d, v) in enumerate(zip(declared, first)):
                if as_dtype(d).name != v.dtype:
                    raise OpsdkError(f"{who}: fn's result {k} is {v.dtype}, but dtype declares "
                                     f"{as_dtype(d).name}")
        elif len(first) != len(tensors):
            raise OpsdkError(f"{who}: fn returns {structure_text(first_tree)}, unlike elems "
                             f"{structure_text(tree)}; give dtype= with the result's structure")

        def step(acc: Any, x: Any) -> Any:
            return fn(x)

        stacked = _loop(who, step, tensors, tree, 1, count, first, first_tree, False, True,
                        "map")
        return pack(first_tree, _maybe_stopped(stacked, back_prop))


def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
         parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
         infer_shape: bool = True, reverse: bool = False, name: Optional[str] = None) -> Any:
    """The successive values of `acc = fn(acc, x)` over the elements x of `elems`, stacked along
    dimension 0 (row t is the accumulator after element t). `initializer`: the accumulator's
    start (its structure is the result's); without it the first element is, and is row 0.
    `reverse`: from the last element to the first (rows stay in the elements' order)."""
    who = "tf.scan"
    with opsdk.name_scope(name or "scan"):
        tensors, tree, count = _elems(who, elems)
        init, acc_tree, start = _start(who, tensors, tree, count, initializer, reverse)
        stacked = _loop(who, fn, tensors, tree, start, count, init, acc_tree, reverse, True,
                        "scan")
        if initializer is not None:  # row 0 is the initializer itself
            stacked = [s[1:] for s in stacked]
        if reverse:
            stacked = [_reverse(s, axis=[0]) for s in stacked]
        return pack(acc_tree, _maybe_stopped(stacked, back_prop))


def _start(who: str, tensors: list, tree: Any, count: Any, initializer: Any,
           reverse: bool) -> tuple[list, Any, int]:
    if initializer is not None:
        init, acc_tree = _leaves(initializer)
        return init, acc_tree, 0
    first = count - 1 if reverse else opsdk.constant(0, dtype="int32")
    return [_m.gather(e, first) for e in tensors], tree, 1


def foldl(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
          parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
          name: Optional[str] = None) -> Any:
    """The last value of `acc = fn(acc, x)` over the elements of `elems`, first to last
    (`initializer` as in `scan`)."""
    return _fold("tf.foldl", fn, elems, initializer, back_prop, False, name or "foldl")


def foldr(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
          parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
          name: Optional[str] = None) -> Any:
    """`foldl` from the last element to the first."""
    return _fold("tf.foldr", fn, elems, initializer, back_prop, True, name or "foldr")


def _fold(who: str, fn: Callable, elems: Any, initializer: Any, back_prop: bool,
          reverse: bool, name: str) -> Any:
    with opsdk.name_scope(name):
        tensors, tree, count = _elems(who, elems)
        init, acc_tree, start = _start(who, tensors, tree, count, initializer, reverse)
        final = _loop(who, fn, tensors, tree, start, count, init, acc_tree, reverse, False,
                      name)
        return pack(acc_tree, _maybe_stopped(final, back_prop))


def _maybe_stopped(values: list, back_prop: bool) -> list:
    return values if back_prop else [_m.stop_gradient(v) for v in values]


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any,
               shape_invariants: Any = None, parallel_iterations: int = 10,
               back_prop: bool = True, swap_memory: bool = False, name: Optional[str] = None,
               maximum_iterations: Any = None, return_same_structure: bool = False) -> Any:
    """TF1's `tf.while_loop`, its arguments in TF's order. `parallel_iterations` and
    `swap_memory` change nothing (iterations run one after another, values stay in memory);
    `back_prop=False` passes no gradient back through the loop; `maximum_iterations` may be a
    tensor. A one-element list of loop variables gives its one result, unless
    `return_same_structure`, as TF1's does."""
    who = "tf.while_loop"
    if isinstance(parallel_iterations, bool) or not isinstance(parallel_iterations, int) \
            or parallel_iterations < 1:
        raise OpsdkError(f"{who}: parallel_iterations must be a positive int, not "
                         f"{parallel_iterations!r}")
    loop_vars = _numbers_as_tensors(loop_vars)
    template = loop_vars
    loop_vars, arrays = _tensor_array.to_leaves(loop_vars)
    if arrays:  # TensorArrays travel as their buffers (opsdk/v1/tensor_array.py)
        if _tensor_array.unwidened(arrays):
            # The first write gives an array's rows the elements' width, a shape change that
            # the recording of iterations (for a gradient) cannot take: that first iteration
            # runs before the loop, when cond holds (the loop then finds cond as it would).
            template = _first_iteration(cond, body, template)
            loop_vars, arrays = _tensor_array.to_leaves(template)
        shape_invariants = _tensor_array.invariants(template, shape_invariants)
        cond, body = _over_arrays(cond, template), _over_arrays(body, template, results=True)
    limit = maximum_iterations
    if limit is not None and not (isinstance(limit, (int, np.integer))
                                  and not isinstance(limit, bool)):
        result = _bounded(cond, body, loop_vars, shape_invariants, _t(limit), name)
    else:
        result = opsdk.while_loop(cond, body, loop_vars, shape_invariants=shape_invariants,
                                  maximum_iterations=limit, name=name)
    if not back_prop:
        leaves, tree = flatten(result)
        result = pack(tree, [_m.stop_gradient(t) if is_differentiable_dtype(t.dtype) else t
                             for t in leaves])
    if arrays:
        result = _tensor_array.from_leaves(result, template)
    if not return_same_structure and isinstance(loop_vars, (list, tuple)) and len(loop_vars) == 1:
        return result[0]
    return result


def _first_iteration(cond_fn: Callable[..., Any], body_fn: Callable[..., Any],
                     values: Any) -> Any:
    """values after one run of body_fn where cond_fn holds for them, else values."""
    spread = isinstance(values, (list, tuple))

    def call(fn: Callable[..., Any]) -> Any:
        return fn(*values) if spread else fn(values)

    def ran() -> Any:
        out = call(body_fn)
        if spread:
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            out = out if isinstance(values, list) else tuple(out)
        return _tensor_array.to_leaves(_tensor_array.relaxed(out))[0]

    def skipped() -> Any:
        return _tensor_array.to_leaves(_tensor_array.relaxed(values))[0]
    taken = cond(call(cond_fn), ran, skipped)
    peeled = _tensor_array.from_leaves(taken, values)
    return _tensor_array.mark_widened(peeled)


def _over_arrays(fn: Callable[..., Any], template: Any, results: bool = False
                 ) -> Callable[..., Any]:
    """fn over loop values whose arrays come as buffers: it gets TensorArrays where template has
    them and (results) gives its arrays back as buffers."""
    spread = isinstance(template, (list, tuple))

    def call(*args: Any) -> Any:
        values = _tensor_array.from_leaves(list(args) if spread else args[0],
                                           list(template) if spread else template)
        out = fn(*values) if spread else fn(values)
        return _tensor_array.to_leaves(out)[0] if results else out
    return call


def _numbers_as_tensors(value: Any) -> Any:
    """Python and NumPy numbers among loop variables as tensors by TF's rules (ints int32,
    floats float32), at any depth of lists and tuples (namedtuples kept)."""
    if isinstance(value, (bool, int, float, np.number)):
        return _t(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_numbers_as_tensors(v) for v in value))
    if isinstance(value, (list, tuple)):
        items = [_numbers_as_tensors(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _bounded(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any,
             shape_invariants: Any, limit: Any, name: Optional[str]) -> Any:
    """The loop with a run-time bound on its iterations: a counter beside the loop variables."""
    if limit.dtype not in ("int32", "int64") or (limit.shape is not None and limit.shape != ()):
        raise OpsdkError(f"tf.while_loop: maximum_iterations must be a scalar int tensor, not "
                         f"{limit.dtype}{list(limit.shape or [])}")
    spread = isinstance(loop_vars, (list, tuple))

    def call(fn: Callable[..., Any], inner: Any) -> Any:
        return fn(*inner) if spread else fn(inner)

    def bounded_cond(k: Any, inner: Any) -> Any:
        return _logical_and(_m.less(k, limit), call(cond, inner))

    def bounded_body(k: Any, inner: Any) -> Any:
        out = call(body, inner)
        if spread:  # as the loop variables: a list or a tuple (one value may come bare)
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            out = out if isinstance(loop_vars, list) else tuple(out)
        return [k + 1, out]
    invariants = None if shape_invariants is None else [[], shape_invariants]
    _, result = opsdk.while_loop(bounded_cond, bounded_body,
                                 [opsdk.constant(0, dtype=limit.dtype), loop_vars],
                                 shape_invariants=invariants, name=name)
    return result


def cond(pred: Any, true_fn: Optional[Callable[[], Any]] = None,
         false_fn: Optional[Callable[[], Any]] = None, strict: bool = False,
         name: Optional[str] = None, fn1: Optional[Callable[[], Any]] = None,
         fn2: Optional[Callable[[], Any]] = None) -> Any:
    """TF1's `tf.cond`, with its deprecated `fn1`/`fn2` names. The branches' results keep their
    structure (`strict` changes nothing), as TensorFlow 2's compat.v1 gives them."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if true_fn is None or false_fn is None:
        raise OpsdkError("tf.cond: give both true_fn and false_fn")
    return opsdk.cond(pred, true_fn, false_fn, name=name)


def case(pred_fn_pairs: Any, default: Optional[Callable[[], Any]] = None,
         exclusive: bool = False, strict: bool = False, name: str = "case") -> Any:
    """TF1's `tf.case`: the result of the fn of the first pair whose predicate (a bool scalar
    tensor) is true, else of `default`, built as nested `cond`s. Without `default`, the last
    pair's fn is the default, run only when its own predicate holds: when none holds the step
    fails with InvalidArgumentError, as TF's. `exclusive=True` fails the step when more than one
    predicate holds. `strict` changes nothing (as in `cond`)."""
    from opsdk.v1.asserts import Assert

    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) else pred_fn_pairs
    if not isinstance(pairs, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise OpsdkError("tf.case: pred_fn_pairs must be a list of (predicate, fn) pairs or a "
                         f"dict, got {pred_fn_pairs!r}")
    preds = []
    for i, (pred, fn) in enumerate(pairs):
        if not callable(fn):
            raise OpsdkError(f"tf.case: the fn of pair {i} is not callable: {fn!r}")
        p = _t(pred)
        if p.dtype != "bool" or (p.shape is not None and len(p.shape) != 0):
            raise OpsdkError(f"tf.case: the predicate of pair {i} ('{p.name}') must be a bool "
                             f"scalar, got {p.dtype} of shape {p.shape}")
        preds.append(p)
    if not pairs:
        if default is None:
            raise OpsdkError("tf.case: give at least one (predicate, fn) pair or a default")
        return default()
    with opsdk.name_scope(name):
        checks = []
        all_preds = opsdk.ops.stack(preds, axis=0)
        if exclusive:
            count = _m.reduce_sum(_m.cast(all_preds, "int32"))
            checks.append(Assert(_m.less_equal(count, 1), [
                f"Input error: exclusive=True: more than 1 conditions "
                f"({', '.join(p.name for p in preds)}) evaluated as True:", all_preds]))
        fns = [fn for _, fn in pairs]
        if default is None:
            last, last_fn = preds[-1], fns[-1]
            preds, fns = preds[:-1], fns[:-1]

            def default() -> Any:
                with opsdk.control_dependencies([Assert(last, [
                        "Input error: None of conditions evaluated as True:", all_preds])]):
                    return _identities(last_fn())
        chain = default
        for p, fn in reversed(list(zip(preds, fns))):
            chain = (lambda p=p, fn=fn, rest=chain: cond(p, fn, rest))
        if not checks:
            return chain()
        with opsdk.control_dependencies(checks):
            return _identities(chain())


def _identities(value: Any) -> Any:
    """`value` (a structure of tensors) as new identity nodes, which take the control
    dependencies in force where they are made."""
    leaves, tree = flatten(value)
    return pack(tree, [opsdk.ops.identity(_t(v)) for v in leaves])
