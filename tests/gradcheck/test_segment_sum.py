"""Every gradient can be written in C++: an attr-sized output and free dims, built and gradchecked.

`segment_sum(data [n, d], segment_ids [n], num_segments) -> [num_segments, d]` has a C++ forward
kernel and a C++ gradient op whose `grad_y` is declared `[num_segments, d]` (an expression over the
forward op's attr, which the gradient op also declares): the generated glue checks that size.
`row_sum(x [_, d]) -> [d]` takes a free dim (`_`: the rank is fixed, the size is not), which its
C++ kernel reads as `dims.x_0`. Both are built once into a temporary workspace, gradchecked, and
once more with the gradient kernel negated, which gradcheck must refuse.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

import opsdk
from opsdk.build.driver import build_workspace
from opsdk.gradcheck import check_op
from opsdk.registry import load_registry
from opsdk.runtime.kernels.loader import load_kernel

pytestmark = pytest.mark.slow

DECLARATIONS = """
op: segment_sum
summary: Sums the rows of data that share a segment id.
doc: y[s, :] is the sum of the rows data[i, :] with segment_ids[i] == s (zeros for an empty segment).
type_attrs:
  T: [float32, float64]
attrs:
  num_segments: {type: int, default: 4, min: 1, doc: "rows of the output"}
inputs:
  data: {dtype: T, shape: [n, d]}
  segment_ids: {dtype: int64, shape: [n], doc: "in [0, num_segments)"}
outputs:
  y: {dtype: T, shape: [num_segments, d]}
gradient: segment_sum_grad
kernels:
  cpu: segment_sum_cpu.cc
reference: "(np.arange(num_segments)[:, None] == segment_ids[None, :]).astype(data.dtype) @ data"
gradcheck: {dims: [1, 4], stress_dims: [d], attrs: {num_segments: [4, 6]}}
---
op: segment_sum_grad
summary: Gradient of segment_sum; each row of data gets its segment's row of grad_y.
type_attrs:
  T: [float32, float64]
attrs:
  num_segments: {type: int, default: 4, min: 1}
inputs:
  data: {dtype: T, shape: [n, d]}
  segment_ids: {dtype: int64, shape: [n]}
  grad_y: {dtype: T, shape: [num_segments, d]}
outputs:
  grad_data: {dtype: T, shape: [n, d]}
kernels:
  cpu: segment_sum_grad_cpu.cc
---
op: row_sum
summary: The sum of the rows of x, whatever their number.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [_, d]}
outputs:
  y: {dtype: T, shape: [d]}
gradient: row_sum_grad
kernels:
  cpu: row_sum_cpu.cc
reference: "x.sum(0)"
gradcheck: {dims: [0, 4]}
---
op: row_sum_grad
summary: Gradient of row_sum.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [n, d]}
  grad_y: {dtype: T, shape: [d]}
outputs:
  grad_x: {dtype: T, shape: [n, d]}
kernels:
  cpu: row_sum_grad_cpu.cc
"""

KERNELS = {
    "segment_sum_cpu.cc": """
        #include "segment_sum_op.h"

        namespace opsdk_op_segment_sum {

        template <typename T>
        void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
            for (int64_t j = 0; j < attrs.num_segments * dims.d; ++j) out.y[j] = T(0);
            for (int64_t i = 0; i < dims.n; ++i) {
                const int64_t s = in.segment_ids[i];
                OPSDK_REQUIRE(s >= 0 && s < attrs.num_segments, "segment_ids[" << i << "] is " << s
                              << ", outside [0, " << attrs.num_segments << ")");
                for (int64_t k = 0; k < dims.d; ++k) out.y[s * dims.d + k] += in.data[i * dims.d + k];
            }
        }

        }  // namespace opsdk_op_segment_sum
        """,
    "segment_sum_grad_cpu.cc": """
        #include "segment_sum_grad_op.h"

        namespace opsdk_op_segment_sum_grad {

        // grad_y arrives with num_segments rows (the glue checked it): every id indexes a row.
        template <typename T>
        void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
            for (int64_t i = 0; i < dims.n; ++i) {
                const int64_t s = in.segment_ids[i];
                OPSDK_REQUIRE(s >= 0 && s < attrs.num_segments, "segment_ids[" << i << "] is " << s);
                for (int64_t k = 0; k < dims.d; ++k) out.grad_data[i * dims.d + k] = in.grad_y[s * dims.d + k];
            }
        }

        }  // namespace opsdk_op_segment_sum_grad
        """,
    "row_sum_cpu.cc": """
        #include "row_sum_op.h"

        namespace opsdk_op_row_sum {

        template <typename T>
        void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
            (void)attrs;
            for (int64_t k = 0; k < dims.d; ++k) out.y[k] = T(0);
            for (int64_t i = 0; i < dims.x_0; ++i)
                for (int64_t k = 0; k < dims.d; ++k) out.y[k] += in.x[i * dims.d + k];
        }

        }  // namespace opsdk_op_row_sum
        """,
    "row_sum_grad_cpu.cc": """
        #include "row_sum_grad_op.h"

        namespace opsdk_op_row_sum_grad {

        template <typename T>
        void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
            (void)attrs;
            for (int64_t i = 0; i < dims.n; ++i)
                for (int64_t k = 0; k < dims.d; ++k) out.grad_x[i * dims.d + k] = in.grad_y[k];
        }

        }  // namespace opsdk_op_row_sum_grad
        """,
}

# The gradient kernel with its one assignment negated.
GRAD_TEXT = "= in.grad_y[s * dims.d + k];"
NEGATED = "= -in.grad_y[s * dims.d + k];"


def _write(root: Path) -> Path:
    opdefs = root / "opdefs"
    opdefs.mkdir(parents=True)
    (opdefs / "ops.yaml").write_text(DECLARATIONS.lstrip())
    for name, text in KERNELS.items():
        (opdefs / name).write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The workspace as written, and a copy whose segment_sum gradient is negated, both built."""
    top = tmp_path_factory.mktemp("segment_sum")
    base = _write(top / "base")
    build_workspace(base, jobs=2, progress=False)
    negated = top / "negated"
    shutil.copytree(base, negated)
    source = negated / "opdefs" / "segment_sum_grad_cpu.cc"
    assert source.read_text().count(GRAD_TEXT) == 1
    source.write_text(source.read_text().replace(GRAD_TEXT, NEGATED))
    build_workspace(negated, ops=["segment_sum_grad"], jobs=1, progress=False)
    return {"base": base, "negated": negated}


def _outcome(root: Path, op: str):
    registry = load_registry(root)
    outcome = check_op(registry, registry.get(op), max_examples=15)
    assert outcome.results and all(r.status != "error" for r in outcome.results), outcome
    return outcome


def test_segment_sum_with_a_cpp_gradient_op_passes_gradcheck(built):
    outcome = _outcome(built["base"], "segment_sum")
    assert outcome.ok, outcome
    assert [r.device for r in outcome.results] == ["cpu"]


def test_a_negated_cpp_gradient_fails_gradcheck(built):
    assert not _outcome(built["negated"], "segment_sum").ok


def test_the_gradient_ops_computed_dim_is_checked_by_the_glue(built):
    registry = load_registry(built["base"])
    kernel = load_kernel(registry.get("segment_sum_grad"), "cpu")
    data, ids = np.ones((3, 2)), np.array([0, 3, 1], np.int64)
    grad = kernel(data, ids, np.arange(8.0).reshape(4, 2), 4)
    np.testing.assert_array_equal(grad, [[0, 1], [6, 7], [2, 3]])
    with pytest.raises(ValueError, match=r"^segment_sum_grad: input 'grad_y' must have 4 rows \(num_segments\), "
                                         r"got 5$"):
        kernel(data, ids, np.zeros((5, 2)), 4)
    with pytest.raises(ValueError, match=r"input 'grad_y' has 3 columns but data has 2 \(dim d\)"):
        kernel(data, ids, np.zeros((4, 3)), 4)


def test_segment_sum_trains_in_a_graph(built):
    ops = opsdk.load_ops(built["base"])
    data = np.arange(12.0).reshape(6, 2)
    ids = np.array([0, 2, 2, 1, 0, 4], np.int64)
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [None, 2], name="x")
        y = ops.segment_sum(x, ids, num_segments=5)
        assert tuple(y.shape) == (5, 2)
        (gx,) = opsdk.gradients(opsdk.ops.reduce_sum(y * np.arange(10.0).reshape(5, 2)), [x])
    with opsdk.Session(g) as sess:
        value, grad = sess.run([y, gx], {x: data})
    want = np.zeros((5, 2))
    np.add.at(want, ids, data)
    np.testing.assert_array_equal(value, want)
    np.testing.assert_array_equal(grad, np.arange(10.0).reshape(5, 2)[ids])


def test_a_free_dim_reaches_the_cpp_kernel(built):
    header = (built["base"] / "generated" / "cpp" / "row_sum_op.h").read_text()
    assert "    int64_t x_0 = 0;  // the '_' at dim 0 of input 'x' [_, d]\n" in header
    ops = opsdk.load_ops(built["base"])
    x = np.arange(15.0).reshape(5, 3)
    np.testing.assert_array_equal(ops.row_sum(x), x.sum(0))
    np.testing.assert_array_equal(ops.row_sum(np.zeros((0, 3))), np.zeros(3))
    with pytest.raises(ValueError, match=r"row_sum: input 'x' must have rank 2 \(\[_, d\]\), got rank 1"):
        ops.row_sum(np.zeros(3))
    outcome = _outcome(built["base"], "row_sum")
    assert outcome.ok, outcome


FOLD = """
op: fold
summary: Sums the k columns of x; w, of any length, is ignored.
attrs:
  k: {type: int, default: 3, min: 1, max: 5}
inputs:
  x: {dtype: float64, shape: [n, k]}
  w: {dtype: float64, shape: [_]}
outputs:
  y: {dtype: float64, shape: [n]}
gradient: fold_grad
kernels: {python: kernels.py:fold}
reference: "x.sum(1) + 0 * w.sum()"
---
op: fold_grad
summary: Gradient of fold.
attrs:
  k: {type: int, default: 3, min: 1, max: 5}
inputs:
  x: {dtype: float64, shape: [n, k]}
  w: {dtype: float64, shape: [m]}
  grad_y: {dtype: float64, shape: [n]}
outputs:
  grad_x: {dtype: float64, shape: [n, k]}
  grad_w: {dtype: float64, shape: [m]}
kernels: {python: kernels.py:fold_grad}
"""

FOLD_KERNELS = """
def fold(xp, x, w, k):
    return x.sum(1)


def fold_grad(xp, x, w, grad_y, k):
    return SCALE * xp.repeat(grad_y[:, None], k, axis=1), xp.zeros_like(w)
"""


@pytest.mark.parametrize("scale, ok", [(1, True), (-1, False)])
def test_gradcheck_draws_attr_sized_and_free_input_dims(tmp_path, scale, ok):
    # x's columns are the attr k and w's length is free: the drawn inputs must have those shapes.
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "fold.yaml").write_text(FOLD.lstrip())
    (tmp_path / "opdefs" / "kernels.py").write_text(FOLD_KERNELS.replace("SCALE", str(scale)))
    registry = load_registry(tmp_path)
    outcome = check_op(registry, registry.get("fold"), max_examples=15)
    assert outcome.results and all(r.status != "error" for r in outcome.results), outcome
    assert outcome.ok is ok
