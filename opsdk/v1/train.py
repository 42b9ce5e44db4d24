"""`tf.train`: opsdk's optimizers and Saver under TF's names, `get_global_step`,
`get_checkpoint_state`, checkpoint readers (`list_variables`, `load_variable`,
`load_checkpoint`, `NewCheckpointReader`, `checkpoint_exists`), the learning-rate schedule
`exponential_decay` and `ExponentialMovingAverage` (`opsdk/v1/averages.py`)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.train.saver import read_checkpoint
from opsdk.v1 import errors, scopes
from opsdk.v1.averages import ExponentialMovingAverage
from opsdk.v1 import graph_def as _graph_def, schedules as _schedules
from opsdk.v1.misc import Namespace
from opsdk.v1.tensors import Variable, convert_to_tensor


class Saver(opsdk.Saver):
    """`tf.train.Saver(var_list=None, max_to_keep=5)`; var_list may be a dict (name -> var),
    and holds a partitioned variable's shards where it names the variable."""

    def __init__(self, var_list: Any = None, reshape: bool = False, sharded: bool = False,
                 max_to_keep: Optional[int] = 5, **unused: Any):
        if isinstance(var_list, dict):
            var_list = list(var_list.values())
        if var_list is not None:  # a partitioned variable (partitioned.py) as its shards
            var_list = [part for v in var_list for part in (
                v._get_variable_list() if hasattr(v, "_get_variable_list") else [v])]
        super().__init__(var_list, max_to_keep=max_to_keep or 1_000_000)

    def save(self, sess: Any, save_path: Any, global_step: Any = None, **unused: Any) -> str:
        if global_step is not None and not isinstance(global_step, (int, np.integer)):
            global_step = int(sess.run(global_step))
        return super().save(sess, save_path, global_step=global_step)


def get_checkpoint_state(checkpoint_dir: Any, latest_filename: Any = None) -> Any:
    """The checkpoint state of a folder (`.model_checkpoint_path`), or None when it has none."""
    found = getattr(opsdk, "get_checkpoint_state", None)
    if found is None:
        try:  # the runtime's own, where this version has it
            from opsdk.runtime.train.saver import get_checkpoint_state as found
        except ImportError:
            found = None
    if found is not None:
        return found(checkpoint_dir)
    latest = opsdk.latest_checkpoint(os.fspath(checkpoint_dir))
    if latest is None:
        return None
    return SimpleNamespace(model_checkpoint_path=latest, all_model_checkpoint_paths=[latest])


def _checkpoint_path(who: str, ckpt_dir_or_file: Any) -> Path:
    """The checkpoint a folder's newest one or a file names (OpsdkError where there is none)."""
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = opsdk.latest_checkpoint(path)
        if latest is None:
            raise OpsdkError(f"{who}: no checkpoint in folder {path!r}")
        path = latest
    return Path(path)


class CheckpointReader:
    """TF's checkpoint reader over one checkpoint of this project's format: `get_tensor`,
    `has_tensor`, `get_variable_to_shape_map`, `get_variable_to_dtype_map`."""

    def __init__(self, path: Path):
        self._path = path
        self._arrays = read_checkpoint(path)

    def get_tensor(self, tensor_str: str) -> np.ndarray:
        name = tensor_str[:-2] if tensor_str.endswith(":0") else tensor_str
        if name not in self._arrays:
            raise errors.NotFoundError(None, None, f"Key {name} not found in checkpoint "
                                       f"{self._path}")
        return self._arrays[name].copy()

    def has_tensor(self, tensor_str: str) -> bool:
        return tensor_str in self._arrays

    def get_variable_to_shape_map(self) -> dict[str, list]:
        return {name: list(a.shape) for name, a in self._arrays.items()}

    def get_variable_to_dtype_map(self) -> dict[str, Any]:
        return {name: a.dtype for name, a in self._arrays.items()}


def load_checkpoint(ckpt_dir_or_file: Any) -> CheckpointReader:
    """A reader of the checkpoint given, or of a folder's newest one."""
    return CheckpointReader(_checkpoint_path("tf.train.load_checkpoint", ckpt_dir_or_file))


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list]]:
    """(name, shape) of each variable of the checkpoint (or a folder's newest), by name."""
    reader = load_checkpoint(ckpt_dir_or_file)
    return sorted(reader.get_variable_to_shape_map().items())


def load_variable(ckpt_dir_or_file: Any, name: str) -> np.ndarray:
    """The value of variable `name` in the checkpoint (or a folder's newest)."""
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def checkpoint_exists(checkpoint_prefix: Any) -> bool:
    """Whether a checkpoint of this project's format is at that path."""
    path = Path(os.fspath(checkpoint_prefix))
    try:
        read_checkpoint(path)
    except OpsdkError:
        return False
    return True


def get_or_create_global_step(graph: Any = None) -> Any:
    found = get_global_step()
    if found is not None:
        return found
    step = Variable(np.int64(0), trainable=False, name="global_step")
    opsdk.get_default_graph().add_to_collection(scopes.GraphKeys.GLOBAL_STEP, step)
    return step


def create_global_step(graph: Any = None) -> Any:
    """A new global step (int64 0, in the GLOBAL_STEP collection); an error where the graph has
    one already, as TF's."""
    if get_global_step() is not None:
        raise ValueError("create_global_step: the graph has a global step already "
                         "(get_or_create_global_step returns it)")  # TF's ValueError
    return get_or_create_global_step()


def assert_global_step(global_step_tensor: Any) -> None:
    """TF's check of a global step: a scalar integer variable or tensor."""
    value = getattr(global_step_tensor, "_as_graph_element", lambda: global_step_tensor)()
    if not isinstance(value, opsdk.Tensor):
        raise TypeError(f"Existing \"global_step\" must be a Variable or Tensor: "
                        f"{global_step_tensor}.")
    if not value.dtype.startswith(("int", "uint")):
        raise TypeError(f"Existing \"global_step\" does not have integer type: {value.dtype}")
    if value.shape is not None and len(value.shape) != 0:
        raise TypeError(f"Existing \"global_step\" is not scalar: {list(value.shape)}")


def get_global_step(graph: Any = None) -> Any:
    """The graph's global step, as TensorFlow finds it: the one of the GLOBAL_STEP collection,
    else a variable named `global_step` (`tf.Variable(0, name='global_step')`); None where
    there is neither."""
    found = scopes.get_collection(scopes.GraphKeys.GLOBAL_STEP)
    if found:
        return found[0]
    for variable in scopes.global_variables():
        if variable.name.split(":")[0] == "global_step":
            return variable
    return None


def exponential_decay(learning_rate: float, global_step: Any, decay_steps: int,
                      decay_rate: float, staircase: bool = False, name: Any = None) -> Any:
    """learning_rate * decay_rate ** (global_step / decay_steps), as a float32 tensor; with
    staircase the exponent is floored (the rate drops every decay_steps steps)."""
    if float(decay_steps) <= 0:
        raise OpsdkError(f"exponential_decay: decay_steps must be > 0, got {decay_steps}")
    step = _ops.cast(convert_to_tensor(global_step), dtype="float32")
    ratio = step / float(decay_steps)
    if staircase:  # the step never goes below 0, so truncation is the floor
        ratio = _ops.cast(_ops.cast(ratio, dtype="int64"), dtype="float32")
    rate = opsdk.constant(np.float32(decay_rate))
    return _ops.mul(opsdk.constant(np.float32(learning_rate)), _ops.pow(rate, ratio), name=name)


train = Namespace(
    "train",
    Optimizer=opsdk.GradientDescentOptimizer.__mro__[1],
    GradientDescentOptimizer=opsdk.GradientDescentOptimizer,
    MomentumOptimizer=opsdk.MomentumOptimizer, AdagradOptimizer=opsdk.AdagradOptimizer,
    AdamOptimizer=opsdk.AdamOptimizer, RMSPropOptimizer=opsdk.RMSPropOptimizer, Saver=Saver,
    AdadeltaOptimizer=opsdk.AdadeltaOptimizer, FtrlOptimizer=opsdk.FtrlOptimizer,
    ProximalGradientDescentOptimizer=opsdk.ProximalGradientDescentOptimizer,
    ProximalAdagradOptimizer=opsdk.ProximalAdagradOptimizer,
    latest_checkpoint=opsdk.latest_checkpoint, get_checkpoint_state=get_checkpoint_state,
    get_global_step=get_global_step, get_or_create_global_step=get_or_create_global_step,
    create_global_step=create_global_step, assert_global_step=assert_global_step,
    global_step=lambda sess, step: int(sess.run(step)), exponential_decay=exponential_decay,
    ExponentialMovingAverage=ExponentialMovingAverage, write_graph=_graph_def.write_graph,
    piecewise_constant_decay=_schedules.piecewise_constant,
    load_checkpoint=load_checkpoint, list_variables=list_variables, load_variable=load_variable,
    NewCheckpointReader=lambda filepattern: CheckpointReader(Path(os.fspath(filepattern))),
    checkpoint_exists=checkpoint_exists,
    **{name: getattr(_schedules, name) for name in _schedules.NAMES},
)
