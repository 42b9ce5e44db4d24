"""`tf.nn.nce_loss` and `tf.nn.sampled_softmax_loss`: losses over the true class and a few
classes drawn from the log-uniform sampler (classes sorted by decreasing frequency, as the
word2vec tutorials arrange them), with the logits corrected by log(expected count).

Built from declared ops (gather, matmul, the sampler, the cross-entropies), so their gradients
are the checked gradients of those ops. One true class per example (num_true=1).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1.tensors import convert_to_tensor as _t, graph_node, op_seed


def _log_expected(ids: Any, num_sampled: int, range_max: int, dtype: str) -> Any:
    """log(num_sampled * P(id)) under the log-uniform distribution."""
    k = _ops.cast(ids, dtype=dtype)
    one = opsdk.constant(np.asarray(1.0, dtype=dtype))
    p = _ops.log(_ops.div(k + 2.0, k + one)) / float(np.log(range_max + 1.0))
    return _ops.log(p * float(num_sampled))


def _logits(who: str, weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int,
            num_classes: int, num_true: int, seed: Optional[int]) -> tuple[Any, Any]:
    """(true logits [batch], sampled logits [batch, num_sampled]), corrected."""
    if num_true != 1:
        raise OpsdkError(f"{who}: opsdk.v1 supports num_true=1 only, got {num_true}")
    if isinstance(weights, (list, tuple)):
        if len(weights) != 1:
            raise OpsdkError(f"{who}: opsdk.v1 supports one weight table, not a sharded list")
        weights = weights[0]
    weights, biases, inputs = _t(weights), _t(biases), _t(inputs)
    labels = _ops.reshape(_t(labels), shape=[-1])
    sampled = graph_node(_ops.log_uniform_candidate_sampler, num_sampled=int(num_sampled),
                         range_max=int(num_classes), seed=op_seed(seed), sequence=True)
    true_w = _ops.gather(weights, labels)
    true_logits = (_ops.reduce_sum(inputs * true_w, axes=[1]) + _ops.gather(biases, labels)
                   - _log_expected(labels, num_sampled, num_classes, inputs.dtype))
    sampled_w = _ops.gather(weights, sampled)
    sampled_logits = (_ops.matmul(inputs, _ops.transpose(sampled_w, perm=[1, 0]))
                      + _ops.gather(biases, sampled)
                      - _log_expected(sampled, num_sampled, num_classes, inputs.dtype))
    return true_logits, sampled_logits


def _sigmoid_xent(logits: Any, target: float) -> Any:
    x = logits
    return _ops.relu(x) - x * target + _ops.log(_ops.exp(_ops.neg(_ops.abs(x))) + 1.0)


def nce_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int,
             num_classes: int, num_true: int = 1, sampled_values: Any = None,
             remove_accidental_hits: bool = False, partition_strategy: str = "mod",
             name: str = "nce_loss", seed: Optional[int] = None) -> Any:
    """Noise-contrastive estimation loss per example: logistic loss of the true class against
    num_sampled sampled classes."""
    if sampled_values is not None:
        raise OpsdkError("nce_loss: sampled_values is not supported by opsdk.v1")
    true_logits, sampled_logits = _logits("nce_loss", weights, biases, labels, inputs,
                                          num_sampled, num_classes, num_true, seed)
    return _ops.add(_sigmoid_xent(true_logits, 1.0),
                    _ops.reduce_sum(_sigmoid_xent(sampled_logits, 0.0), axes=[1]), name=name)


def sampled_softmax_loss(weights: Any, biases: Any, labels: Any, inputs: Any, num_sampled: int,
                         num_classes: int, num_true: int = 1, sampled_values: Any = None,
                         remove_accidental_hits: bool = True, partition_strategy: str = "mod",
                         name: str = "sampled_softmax_loss", seed: Optional[int] = None) -> Any:
    """Softmax cross-entropy over the true class and num_sampled sampled classes, per example."""
    if sampled_values is not None:
        raise OpsdkError("sampled_softmax_loss: sampled_values is not supported by opsdk.v1")
    true_logits, sampled_logits = _logits("sampled_softmax_loss", weights, biases, labels,
                                          inputs, num_sampled, num_classes, num_true, seed)
    logits = _ops.concat([_ops.reshape(true_logits, shape=[-1, 1]), sampled_logits], axis=1)
    target = _ops.zeros_like(_ops.reshape(true_logits, shape=[-1]))
    return _ops.sparse_softmax_cross_entropy_with_logits(_ops.cast(target, dtype="int32"), logits,
                                                         name=name)
