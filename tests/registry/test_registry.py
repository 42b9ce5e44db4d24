"""load_registry: builtin + workspace ops, registry-wide checks, caching; workspaces."""

from __future__ import annotations

import time

import pytest

from opsdk.registry import (BUILTIN_ROOT, OpDefErrors, OpsdkError, Workspace, find_workspace, load_registry)
from opsdk.registry import registry as registry_module

FWD = """
op: {name}
summary: Forward.
type_attrs: {{T: [float32, float64]}}
attrs: {{k: {{type: int, default: 1}}}}
inputs:
  x: {{dtype: T, shape: [n, p]}}
  i: {{dtype: int32, shape: [n]}}
outputs:
  z: {{dtype: T, shape: [n]}}
gradient: {name}_grad
kernels: {{python: kernels.py:foo}}
"""

GRAD = """
op: {name}_grad
summary: Gradient.
type_attrs: {{T: [float32, float64]}}
attrs: {{k: {{type: int, default: 1}}}}
inputs:
  x: {{dtype: T, shape: [n, p]}}
  i: {{dtype: int32, shape: [n]}}
  grad_z: {{dtype: T, shape: [n]}}
outputs:
  grad_x: {{dtype: T, shape: [n, p]}}
kernels: {{python: kernels.py:foo}}
"""


def pair(name: str, grad_edit=lambda text: text) -> str:
    return FWD.format(name=name) + "---\n" + grad_edit(GRAD.format(name=name))


def test_builtin_and_workspace_ops(fake_builtin, ws):
    fake_builtin.write("math.yaml", pair("add"))
    ws.write("mine.yaml", pair("mine"))
    registry = load_registry(ws.root)
    assert registry.names() == ("add", "add_grad", "mine", "mine_grad")
    assert [s.name for s in registry] == list(registry.names()) and len(registry) == 4 and "mine" in registry
    assert registry.gradient_of("mine").name == "mine_grad" and registry.gradient_of("mine_grad") is None
    assert registry.workspace_of("add") == fake_builtin.root.resolve()
    assert [s.name for s in registry.ops_in_workspace(ws.root)] == ["mine", "mine_grad"]
    assert registry.get("mine").differentiable == ("x",)
    assert load_registry().names() == ("add", "add_grad")
    with pytest.raises(OpsdkError, match=r"^no op named 'mien' \(did you mean 'mine'\?\)$"):
        registry.get("mien")


def test_user_op_may_share_a_builtin_name_and_wins_in_its_workspace(fake_builtin, ws):
    fake_builtin.write("math.yaml", pair("add"))
    ws.write("add.yaml", FWD.format(name="add").replace("gradient: add_grad", "gradient: stop"))
    registry = load_registry(ws.root)
    assert registry.get("add").qualified_name == "ws::add" and registry.get("add").gradient == "stop"
    assert registry.get("opsdk::add").workspace == fake_builtin.root.resolve()
    assert registry.qualified_names() == ("opsdk::add", "opsdk::add_grad", "ws::add")
    assert load_registry().get("add").qualified_name == "opsdk::add"


def test_duplicate_ops_across_files(fake_builtin, ws):
    ws.write("a.yaml", pair("dup"))
    ws.write("b/kernels.py", "def foo(xp, x, i, **attrs):\n    return x\n")
    ws.write("b/b.yaml", FWD.format(name="dup").replace("gradient: dup_grad", "gradient: null"))
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value) == "opdefs/b/b.yaml:1: op 'dup': declared twice: also at opdefs/a.yaml:1; rename one"


def test_missing_gradient_op(fake_builtin, ws):
    ws.write("a.yaml", FWD.format(name="solo"))
    ws.write("b.yaml", GRAD.format(name="sol"))
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value) == ("opdefs/a.yaml:10: op 'solo': gradient op 'solo_grad' does not exist (did you mean "
                               "'sol_grad'?); declare it, or write 'gradient: stop' (no gradient) or null")


W = "opdefs/a.yaml:10: op 'f': gradient op 'f_grad' (opdefs/a.yaml:14)"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("  i: {dtype: int32, shape: [n]}\n", ""),
     f"{W} must take inputs (x, i, grad_z) or (x, i, z, grad_z); it takes (x, grad_z)"),
    (lambda t: t.replace("grad_z: {dtype: T, shape: [n]}", "z: {dtype: T, shape: [n]}\n  grad_z: {dtype: T, shape: [n]}"),
     None),  # also passing the forward outputs is fine
    (lambda t: t.replace("grad_x: {dtype: T, shape: [n, p]}", "grad_x: {dtype: T, shape: [n, p]}\n"
                         "  grad_i: {dtype: int32, shape: [n]}"),
     f"{W} must return (grad_x), one per differentiable input of 'f'; it returns (grad_x, grad_i)"),
    (lambda t: t.replace("grad_x: {dtype: T, shape: [n, p]}", "grad_x: {dtype: T, shape: [p, n]}"),
     f"{W}: output 'grad_x' has shape [p, n]; expected [n, p] (the shape of input 'x' of 'f'); "
     "write the dims of that input"),
    (lambda t: t.replace("grad_z: {dtype: T,", "grad_z: {dtype: float32,"),
     f"{W}: input 'grad_z' has dtype float32; expected T (the dtype of output 'z' of 'f')"),
    (lambda t: t.replace("T: [float32, float64]", "T: [float32]"),
     f"{W}: type attr T does not allow float64, which 'f' allows"),
    (lambda t: t.replace("attrs: {k: {type: int, default: 1}}", "attrs: {k: {type: float, default: 1.0}, s: {type: int}}"),
     f"{W}: attr 'k' is float but int in 'f'\n"
     f"{W} requires attr 's', which 'f' does not have; give it a default or remove it"),
])
def test_gradient_signature_rule(fake_builtin, ws, edit, message):
    ws.write("a.yaml", pair("f", edit))
    if message is None:
        assert load_registry(ws.root).gradient_of("f").inputs[2].name == "z"
        return
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value) == message


def test_cache_is_reused_and_invalidated_by_edits(fake_builtin, ws):
    path = ws.write("a.yaml", pair("f"))
    first = load_registry(ws.root)
    assert load_registry(ws.root) is first
    path.write_text(path.read_text().replace("summary: Forward.", "summary: Forward, edited at length."))
    second = load_registry(ws.root)
    assert second is not first and second.get("f").summary == "Forward, edited at length."
    path.write_text("op: [broken\n")
    with pytest.raises(OpDefErrors):
        load_registry(ws.root)
    with pytest.raises(OpDefErrors):  # failures are not cached
        load_registry(ws.root)


def test_eighty_ops_load_fast(fake_builtin):
    for index in range(10):
        fake_builtin.write(f"ops{index}.yaml", "---\n".join(pair(f"op{index}_{j}") for j in range(4)))
    registry_module._registries.clear()
    registry_module._files.clear()
    start = time.perf_counter()
    registry = load_registry()
    cold = time.perf_counter() - start
    start = time.perf_counter()
    load_registry()
    warm = time.perf_counter() - start
    assert len(registry) == 80
    assert cold < 0.3 and warm < 0.01, (cold, warm)


def test_the_repository_builtin_registry_loads():
    registry = load_registry()
    assert {"add", "pairwise_manhattan", "stop_gradient"} <= set(registry.names())
    assert registry.get("stop_gradient").stops_gradient


def test_workspaces(tmp_path, ws):
    (ws.root / "src" / "deep").mkdir(parents=True)
    assert find_workspace(ws.root / "src" / "deep") == ws.root.resolve()
    assert find_workspace(ws.opdefs / "kernels.py") == ws.root.resolve()
    with pytest.raises(OpsdkError, match=r"no opdefs/ folder in .* or any folder above it"):
        find_workspace(tmp_path)
    with pytest.raises(OpsdkError, match=r"is not a workspace \(no opdefs/ folder in it\)"):
        load_registry(tmp_path)
    parts = Workspace(ws.root)
    assert (parts.opdefs_dir, parts.generated_dir, parts.build_dir) == (
        ws.root / "opdefs", ws.root / "generated", ws.root / "build")
    assert (BUILTIN_ROOT / "opsdk" / "registry").is_dir()


def test_shapes_that_print_alike_say_which_dim_differs(fake_builtin, ws):
    # The forward's x has dim k; the gradient op computes its grad_x as [k] from an attr k: the
    # same text, another meaning. The message must not read "has shape [k]; expected [k]" alone.
    ws.write("f.yaml", """
        op: f
        summary: F.
        inputs:
          x: {dtype: float64, shape: [k]}
        outputs:
          z: {dtype: float64, shape: [k]}
        gradient: f_grad
        kernels: {python: kernels.py:foo}
        ---
        op: f_grad
        summary: F grad.
        attrs:
          k: {type: int, default: 1}
        inputs:
          x: {dtype: float64, shape: [n]}
          grad_z: {dtype: float64, shape: [n]}
        outputs:
          grad_x: {dtype: float64, shape: [k]}
        gradient: null
        kernels: {python: kernels.py:foo}
        """)
    with pytest.raises(OpDefErrors) as info:
        load_registry(ws.root)
    assert str(info.value).splitlines()[-1] == (
        "opdefs/f.yaml:7: op 'f': gradient op 'f_grad' (opdefs/f.yaml:10): output 'grad_x' has shape [k]; "
        "expected [k] (the shape of input 'x' of 'f'): 'k' is computed from int attrs and dims here but a dim "
        "bound from an input there; write the dims of that input")
