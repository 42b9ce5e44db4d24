"""Fixtures of the runtime tests: a registry of the builtin ops plus a few test ops whose Python
kernels count their calls, meet at barriers or fail, declared in a temporary workspace.

The registry is assembled from `parse_opdef` of the builtin declarations and the test workspace,
so these tests exercise the runtime on exactly those ops, whatever else the repository's own
`opdefs/` holds at the moment.
"""

from __future__ import annotations

import textwrap

import pytest

from opsdk.registry import BUILTIN_ROOT, Registry, load_callable, parse_opdef
from opsdk.runtime.ir.graph import Graph

TEST_OPS = """
op: counted_add
summary: x + y, counting kernel calls.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: [n]}
  y: {dtype: T, shape: [n]}
outputs:
  z: {dtype: T, shape: [n]}
kernels:
  python: test_kernels.py:counted_add
---
op: rendezvous
summary: Waits at the shared barrier (both nodes must run at once), then returns x.
stateful: true
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: any}
outputs:
  y: {dtype: T}
shape_fn: like_x
kernels:
  python: test_kernels.py:rendezvous
---
op: explode
summary: Raises ValueError (a kernel failure).
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: any}
outputs:
  y: {dtype: T}
shape_fn: like_x
kernels:
  python: test_kernels.py:explode
---
op: l1_dist
summary: Pairwise L1 distance (a python stand-in with symbolic dims n, m, p).
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: [n, p]}
  y: {dtype: T, shape: [m, p]}
outputs:
  z: {dtype: T, shape: [n, m]}
kernels:
  python: test_kernels.py:l1_dist
---
op: split_sum
summary: Two outputs, sum and difference.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: [n]}
  y: {dtype: T, shape: [n]}
outputs:
  s: {dtype: T, shape: [n]}
  d: {dtype: T, shape: [n]}
kernels:
  python: test_kernels.py:split_sum
"""

TEST_KERNELS = '''
import threading

calls = {"counted_add": 0}
barrier = threading.Barrier(2, timeout=10)
lock = threading.Lock()


def counted_add(xp, x, y):
    with lock:
        calls["counted_add"] += 1
    return xp.asarray(x + y)


def rendezvous(xp, x):
    barrier.wait()  # raises BrokenBarrierError after 10 s if the other node never comes
    return x


def explode(xp, x):
    raise ValueError("bad input")


def l1_dist(xp, x, y):
    return xp.abs(x[:, None, :] - y[None, :, :]).sum(-1)


def split_sum(xp, x, y):
    return xp.asarray(x + y), xp.asarray(x - y)
'''


@pytest.fixture(scope="session")
def registry(tmp_path_factory) -> Registry:
    """Builtin ops + the test ops above."""
    root = tmp_path_factory.mktemp("ws")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "test_ops.yaml").write_text(textwrap.dedent(TEST_OPS))
    (root / "opdefs" / "test_kernels.py").write_text(textwrap.dedent(TEST_KERNELS))
    specs = {}
    for path in sorted((BUILTIN_ROOT / "opdefs" / "builtin").glob("*.yaml")):
        specs.update({s.name: s for s in parse_opdef(path, BUILTIN_ROOT)})
    specs.update({s.name: s for s in parse_opdef(root / "opdefs" / "test_ops.yaml", root)})
    return Registry(specs)


@pytest.fixture
def hooks(registry):
    """The test kernels' module globals (call counters, the barrier), reset for each test."""
    spec = registry.get("counted_add")
    module_globals = load_callable(spec, spec.kernel("python").source).__globals__
    module_globals["calls"]["counted_add"] = 0
    module_globals["barrier"].reset()
    return module_globals


@pytest.fixture
def graph(registry) -> Graph:
    """An empty graph resolving operators through the test registry, made the default."""
    g = Graph()
    with g.as_default():
        yield g
