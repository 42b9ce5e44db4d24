"""`tf.summary`: scalar, histogram, image, merge, merge_all and FileWriter, writing TensorBoard
event files (events.py).

A summary is a float64 vector tensor `[count, values...]` per summarized tensor (merged ones are
concatenated); `Session.run` turns a fetched summary into the serialized Summary protobuf, as
TensorFlow hands it out, and `FileWriter.add_summary` writes it with its step.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import events, graph_state, scopes, session as _session
from opsdk.v1.tensors import convert_to_tensor as _t
from opsdk.v1 import math_ops as _math, misc as _misc


def _layouts(graph: Any) -> dict[str, list[tuple[str, str]]]:
    """The graph's summary tensors, by name: [(kind, tag)] of the pieces they concatenate."""
    return graph_state.table(graph, "summary_layouts")


def _piece(values: Any) -> Any:
    flat = _ops.reshape(_ops.cast(_t(values), dtype="float64"), shape=[-1])
    count = _ops.reshape(_ops.reduce_sum(_ops.ones_like(flat)), shape=[1])
    return _ops.concat([count, flat], axis=0)


def _register(tensor: Any, layout: list, collections: Any) -> Any:
    _layouts(tensor.graph)[tensor.name] = layout
    _session.register_decoder(tensor, lambda array: decode(layout, array))
    for key in (collections if collections is not None else [scopes.GraphKeys.SUMMARIES]):
        opsdk.get_default_graph().add_to_collection(key, tensor)
    return tensor


def _tag(name: str) -> str:
    scope = opsdk.get_default_graph()._stacks.names  # TF prefixes the open name scopes
    return "/".join([*scope, name])


def scalar(name: str, tensor: Any, collections: Any = None, family: Any = None) -> Any:
    """A summary of one number (the tensor must hold exactly one value)."""
    return _register(_piece(tensor), [("scalar", _tag(name))], collections)


def histogram(name: str, values: Any, collections: Any = None, family: Any = None) -> Any:
    """A summary of the distribution of a tensor's values."""
    return _register(_piece(values), [("histogram", _tag(name))], collections)


def image(name: str, tensor: Any, max_outputs: int = 3, collections: Any = None,
          family: Any = None) -> Any:
    """A summary of the first `max_outputs` images of a [batch, height, width, channels] tensor
    (1, 3 or 4 channels), each a PNG as TensorFlow writes them: uint8 values as they are; float
    images scaled per image, so that the largest value is 255 where none is negative, else so
    that 0 is 128 and the largest magnitude 127 away from it. Tags: `name/image` for one image,
    else `name/image/0`, `name/image/1`, ..."""
    if isinstance(max_outputs, bool) or not isinstance(max_outputs, (int, np.integer)) \
            or max_outputs < 1:
        raise OpsdkError(f"summary.image '{name}': max_outputs must be a whole number >= 1, "
                         f"got {max_outputs!r}")
    images = _t(tensor)
    shape = tuple(images.shape)
    if len(shape) != 4 or shape[3] not in (1, 3, 4):
        raise OpsdkError(f"summary.image '{name}': give a [batch, height, width, channels] "
                         f"tensor with 1, 3 or 4 channels, got shape {_shape_text(shape)}")
    kind = "image/uint8" if np.dtype(images.dtype) == np.uint8 else "image/float"
    first = images[:int(max_outputs)]
    dims = _ops.cast(_math.shape(first), dtype="float64")
    piece = _piece(_ops.concat([dims, _ops.reshape(_ops.cast(first, dtype="float64"),
                                                   shape=[-1])], axis=0))
    tag = _tag(name)
    return _register(piece, [(kind, tag if max_outputs == 1 else tag + "/")], collections)


def _shape_text(shape: tuple) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _pixels(kind: str, image: np.ndarray) -> np.ndarray:
    """One image's uint8 pixels, scaled as TensorFlow's image summary scales it."""
    if kind == "image/uint8":
        return image.astype(np.uint8)
    image = np.where(np.isfinite(image), image, 0.0)
    low, high = float(image.min(initial=0.0)), float(image.max(initial=0.0))
    bound = max(abs(low), abs(high))
    if low < 0:
        scale, offset = (127.0 / bound if bound > 0 else 0.0), 128.0
    else:
        scale, offset = (255.0 / bound if bound > 0 else 0.0), 0.0
    return np.clip(np.rint(image * scale + offset), 0, 255).astype(np.uint8)


def merge(inputs: list, collections: Any = None, name: Optional[str] = None) -> Any:
    """One summary holding all of `inputs`."""
    layout = []
    for tensor in inputs:
        found = _layouts(tensor.graph).get(tensor.name) \
            if isinstance(tensor, opsdk.Tensor) else None
        if found is None:
            raise OpsdkError(f"summary.merge: '{getattr(tensor, 'name', tensor)}' is not a "
                             "summary made by tf.summary.scalar/histogram/image/merge")
        layout.extend(found)
    merged = _ops.concat(list(inputs), axis=0, name=name)
    return _register(merged, layout, collections if collections is not None else [])


def merge_all(key: str = scopes.GraphKeys.SUMMARIES, scope: Any = None,
              name: Optional[str] = None) -> Any:
    """All summaries of the collection, merged; None when there are none (as in TF)."""
    found = scopes.get_collection(key, scope)
    return merge(found, name=name) if found else None


def decode(layout: list, array: np.ndarray) -> bytes:
    """The serialized Summary of a fetched summary vector."""
    values, at = [], 0
    for kind, tag in layout:
        count = int(array[at])
        data = array[at + 1:at + 1 + count]
        at += 1 + count
        if kind == "scalar":
            if count != 1:
                raise OpsdkError(f"summary.scalar '{tag}': the tensor has {count} values, not one")
            values.append(events.scalar_value(tag, float(data[0])))
        elif kind.startswith("image/"):
            batch, height, width, channels = (int(d) for d in data[:4])
            images = data[4:].reshape(batch, height, width, channels)
            for i in range(batch):  # a tag ending in "/" names several images: tag/image/i
                name = f"{tag}image/{i}" if tag.endswith("/") else f"{tag}/image"
                values.append(events.image_value(name, _pixels(kind, images[i])))
        else:
            values.append(events.histogram_value(tag, data))
    return events.summary(values)


class FileWriter:
    """Writes summaries, traced runs' metadata and the graph (given here or to `add_graph`) to
    an event file in `logdir`."""

    def __init__(self, logdir: Any, graph: Any = None, max_queue: int = 10,
                 flush_secs: int = 120, **unused: Any):
        self._writer = events.EventFileWriter(logdir)
        self.path = self._writer.path
        self._run_metadata_tags: set[str] = set()
        if graph is not None:
            self.add_graph(graph)

    def add_summary(self, summary: Any, global_step: Optional[int] = None) -> None:
        if not isinstance(summary, (bytes, bytearray)):
            raise OpsdkError("FileWriter.add_summary: give the value that sess.run returned for "
                             "a summary (serialized bytes)")
        self._writer.write(events.event(int(global_step or 0), summary_bytes=bytes(summary)))

    def add_run_metadata(self, run_metadata: Any, tag: str,
                         global_step: Optional[int] = None) -> None:
        """Write a traced run's metadata (TensorBoard shows it beside the graph) under `tag`,
        which this writer has not used for run metadata before."""
        from opsdk.v1.run_options import RunMetadata

        if not isinstance(run_metadata, RunMetadata):
            raise OpsdkError("FileWriter.add_run_metadata: give a tf.RunMetadata, got "
                             f"{type(run_metadata).__name__}")
        if not isinstance(tag, str) or not tag:
            raise OpsdkError(f"FileWriter.add_run_metadata: tag must be a non-empty string, "
                             f"got {tag!r}")
        if tag in self._run_metadata_tags:
            raise OpsdkError(f"FileWriter.add_run_metadata: the tag {tag!r} was already used "
                             "for run metadata in this writer; give each run its own tag")
        self._run_metadata_tags.add(tag)
        self._writer.write(events.event(int(global_step or 0), tagged_run_metadata=(
            tag, run_metadata.SerializeToString())))

    def add_graph(self, graph: Any, global_step: Any = None, graph_def: Any = None) -> None:
        """Write `graph` (or a GraphDef of one, `graph.as_graph_def()`) as the GraphDef
        TensorBoard's graph dashboard draws (its nodes, inputs, devices and output shapes; no
        attribute values: opsdk/v1/graph_def.py)."""
        from opsdk.v1.graph_def import GraphDef

        given = graph_def if graph is None else graph
        if isinstance(given, opsdk.Graph):
            given = GraphDef.of(given)
        if not isinstance(given, GraphDef):
            raise OpsdkError(f"FileWriter.add_graph: give a tf.Graph (sess.graph) or its "
                             f"as_graph_def(), got {type(given).__name__}")
        self._writer.write(events.event(int(global_step or 0),
                                        graph_bytes=given.SerializeToString()))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


SummaryWriter = FileWriter


__getattr__ = _misc.refuse_missing("summary")  # other tf.summary names: a clear refusal
