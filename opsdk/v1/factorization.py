"""`tf.contrib.factorization.KMeans`: TF1's k-means graph on builtin ops, which TensorFlow 2 can
no longer run (docs/tf1.md).

    kmeans = tf.contrib.factorization.KMeans(x, num_clusters=25, distance_metric="cosine")
    (all_scores, cluster_idx, scores, initialized, init_op, train_op) = kmeans.training_graph()

As TF's: `init_op` picks the initial centers once (later runs keep them), `train_op` runs one
Lloyd iteration (full batch: every center becomes the mean of its points; an empty cluster's
center becomes 0, as TF's sums / (counts + 1e-6) gives) or one mini-batch step (each center moves
toward its new points by 1 / the points it has seen). `all_scores`, `cluster_idx` and `scores`
are lists with one entry per input tensor. Distances: squared Euclidean (TF's default), cosine
(inputs and centers L2-normalised, 1 - dot), and Manhattan (the flagship `pairwise_manhattan`
op; the centers are still means, as TF's update rule makes them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import scopes
from opsdk.v1.tensors import Variable, convert_to_tensor as _t, op_seed

SQUARED_EUCLIDEAN_DISTANCE = "squared_euclidean"
COSINE_DISTANCE = "cosine"
MANHATTAN_DISTANCE = "manhattan"  # opsdk's own: TF had only the two above
RANDOM_INIT = "random"
KMEANS_PLUS_PLUS_INIT = "kmeans_plus_plus"
KMC2_INIT = "kmc2"
CLUSTERS_VAR_NAME = "clusters"

_METRICS = (SQUARED_EUCLIDEAN_DISTANCE, COSINE_DISTANCE, MANHATTAN_DISTANCE)


def _const(value: Any, like: Any) -> Any:
    return opsdk.constant(np.asarray(value, dtype=like.dtype))


def _normalized(x: Any) -> Any:
    """Rows scaled to unit L2 norm (rows of zeros stay zeros, as TF's l2_normalize leaves them)."""
    norm2 = _ops.reduce_sum(_ops.square(x), axes=[1], keepdims=True)
    return x / _ops.sqrt(_ops.maximum(norm2, _const(1e-12, x)))


def distances(x: Any, centers: Any, metric: str) -> Any:
    """[n, k]: the distance of each row of x to each center (cosine: both already normalised)."""
    if metric == MANHATTAN_DISTANCE:
        return _ops.pairwise_manhattan(x, centers)
    cross = _ops.matmul(x, _ops.transpose(centers, perm=[1, 0]))
    if metric == COSINE_DISTANCE:
        return _const(1.0, x) - cross
    x2 = _ops.reduce_sum(_ops.square(x), axes=[1], keepdims=True)
    c2 = _ops.reshape(_ops.reduce_sum(_ops.square(centers), axes=[1]), shape=[1, -1])
    return _ops.relu(x2 - 2.0 * cross + c2)  # >= 0 although the expansion may round below


class KMeans:
    """The graph of k-means clustering over `inputs` ([n, d], or a list of such shards)."""

    def __init__(self, inputs: Any, num_clusters: Any, initial_clusters: Any = RANDOM_INIT,
                 distance_metric: str = SQUARED_EUCLIDEAN_DISTANCE, use_mini_batch: bool = False,
                 mini_batch_steps_per_iteration: int = 1, random_seed: int = 0,
                 kmeans_plus_plus_num_retries: int = 2, kmc2_chain_length: int = 200):
        who = "contrib.factorization.KMeans"
        if distance_metric not in _METRICS:
            raise OpsdkError(f"{who}: distance_metric must be one of {', '.join(_METRICS)}, got "
                             f"{distance_metric!r}")
        if use_mini_batch and int(mini_batch_steps_per_iteration) != 1:
            raise OpsdkError(f"{who}: opsdk.v1 supports mini_batch_steps_per_iteration=1 only "
                             "(centers updated at every step)")
        self._inputs = [_t(x) for x in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        for x in self._inputs:
            if x.shape is None or len(x.shape) != 2 or x.shape[1] is None:
                raise OpsdkError(f"{who}: inputs must be [n, d] with d known when the graph is "
                                 f"built, got shape {x.shape}")
        if len({x.shape[1] for x in self._inputs}) != 1:
            raise OpsdkError(f"{who}: the input shards have different dims "
                             f"{[x.shape[1] for x in self._inputs]}")
        self._initial = initial_clusters
        self._k = _num_clusters(who, num_clusters, initial_clusters)
        self._metric, self._mini_batch = distance_metric, bool(use_mini_batch)
        self._seed, self._retries = int(random_seed), max(int(kmeans_plus_plus_num_retries), 0)
        if isinstance(initial_clusters, str) and initial_clusters == KMC2_INIT:
            raise OpsdkError(f"{who}: initial_clusters='kmc2' is not supported by opsdk.v1; use "
                             "'random', 'kmeans_plus_plus', a tensor or a callable")

    def _data(self) -> list:
        return [_normalized(x) for x in self._inputs] if self._metric == COSINE_DISTANCE \
            else list(self._inputs)

    def training_graph(self) -> tuple:
        """(all_scores, cluster_idx, scores, cluster_centers_initialized, init_op, training_op),
        TF 1.15's tuple; the first three are lists with one tensor per input shard."""
        data = self._data()
        dtype, dim = data[0].dtype, data[0].shape[1]
        with scopes.variable_scope(None, default_name="kmeans"):
            centers = Variable(np.zeros((self._k, dim), dtype=dtype), trainable=False,
                               name=CLUSTERS_VAR_NAME)
            initialized = Variable(np.asarray(False), trainable=False, name="initialized")
            counts = Variable(np.zeros((self._k,), dtype=dtype), trainable=False,
                              name="cluster_counts")
        init_op = self._init_op(data, centers, initialized)
        all_scores, cluster_idx, scores = self._infer(data, centers.value())
        update = self._mini_batch_update if self._mini_batch else self._full_batch_update
        training_op = update(data, cluster_idx, centers, counts)
        return all_scores, cluster_idx, scores, initialized.value(), init_op, training_op

    def _infer(self, data: list, centers: Any) -> tuple:
        all_scores = [distances(x, centers, self._metric) for x in data]
        cluster_idx = [_ops.argmin(s, axis=1) for s in all_scores]
        scores = [_ops.reduce_min(s, axes=[1]) for s in all_scores]
        return all_scores, cluster_idx, scores

    # ---------------------------------------------------------------------------- training
    def _sums(self, data: list, cluster_idx: list) -> tuple:
        """Per cluster, the sum of its points [k, d] and their number [k], over every shard
        (a one-hot [n, k] matrix: the builtin ops have no segment sum)."""
        ids = _const(np.arange(self._k).reshape(1, -1), cluster_idx[0])
        sums = counts = None
        for x, idx in zip(data, cluster_idx):
            hot = _ops.cast(_ops.equal(_ops.reshape(idx, shape=[-1, 1]), ids), dtype=x.dtype)
            s = _ops.matmul(_ops.transpose(hot, perm=[1, 0]), x)
            c = _ops.reduce_sum(hot, axes=[0])
            sums, counts = (s, c) if sums is None else (sums + s, counts + c)
        return sums, counts

    def _full_batch_update(self, data: list, cluster_idx: list, centers: Any, counts: Any) -> Any:
        sums, n = self._sums(data, cluster_idx)
        new = sums / _ops.reshape(n + _const(1e-6, n), shape=[-1, 1])
        if self._metric == COSINE_DISTANCE:
            new = _normalized(new)
        return scopes.group(centers.assign(new))

    def _mini_batch_update(self, data: list, cluster_idx: list, centers: Any, counts: Any) -> Any:
        sums, n = self._sums(data, cluster_idx)
        total = counts.value() + n
        rate = _ops.reshape(n / _ops.maximum(total, _const(1.0, total)), shape=[-1, 1])
        old = centers.value()
        mean = sums / _ops.reshape(_ops.maximum(n, _const(1.0, n)), shape=[-1, 1])
        new = old + rate * (mean - old)  # each point moves its center by 1 / points seen
        if self._metric == COSINE_DISTANCE:
            new = _normalized(new)
        return scopes.group(centers.assign(new), counts.assign(total))

    # ------------------------------------------------------------------------ initialisation
    def _init_op(self, data: list, centers: Any, initialized: Any) -> Any:
        """Picks the centers while `initialized` is False; a later run keeps them."""
        points = data[0] if len(data) == 1 else _ops.concat(data, axis=0)
        chosen = self._initial_centers(points)
        if self._metric == COSINE_DISTANCE:
            chosen = _normalized(chosen)
        keep = _ops.cast(initialized.value(), dtype=points.dtype)
        new = keep * centers.value() + (1.0 - keep) * chosen  # exactly one of them
        # `done` depends on no read: without the edge, a step could set the flag before `keep`
        # reads it, and keep the zero centers (all points in one cluster).
        with opsdk.control_dependencies([new]):
            done = opsdk.constant(np.asarray(True).reshape(initialized.shape))
            return scopes.group(centers.assign(new), initialized.assign(done))

    def _initial_centers(self, points: Any) -> Any:
        init = self._initial
        if callable(init):
            return _t(init(points, self._k))
        if isinstance(init, str):
            rows = points.shape[0]
            if rows is not None and rows < self._k:  # known now; fed inputs are not checked
                raise OpsdkError(f"contrib.factorization.KMeans: {rows} input rows cannot give "
                                 f"{self._k} initial clusters ({init!r} picks input rows)")
            if init == RANDOM_INIT:
                return _ops.gather(points, _ops.stack(self._random_rows(points)))
            if init == KMEANS_PLUS_PLUS_INIT:
                return self._kmeans_plus_plus(points)
            raise OpsdkError(f"contrib.factorization.KMeans: initial_clusters {init!r} is "
                             "not one of 'random', 'kmeans_plus_plus'")
        return _ops.cast(_t(init), dtype=points.dtype)

    def _uniform(self, points: Any, salt: int) -> Any:
        """[n] uniform values, a fixed draw for the seed and salt (TF's init is seeded too)."""
        column = _ops.reshape(_ops.slice(points, begin=[0, 0], size=[-1, 1]), shape=[-1])
        return _ops.random_uniform_like(column, seed=op_seed(self._seed * 1009 + salt))

    def _random_rows(self, points: Any) -> list:
        """k distinct rows, uniformly: the k smallest of n uniform keys, taken one at a time (a
        taken key is pushed past every other, as keys are below 1)."""
        keys, rows = self._uniform(points, 0), []
        for _ in range(self._k):
            rows.append(_ops.argmin(keys, axis=0))
            keys = keys + 2.0 * _ops.cast(_ops.equal(keys, _ops.reduce_min(keys)), dtype=keys.dtype)
        return rows

    def _weights(self, points: Any, row: Any) -> Any:
        """[n]: each point's k-means++ weight against the point at `row`: the squared distance
        (what TF samples by: the squared Euclidean one, for cosine that of the normalised
        points, which is twice the cosine distance; for Manhattan the square of the L1 one)."""
        center = _ops.reshape(_ops.gather(points, row), shape=[1, -1])
        d = _ops.reshape(distances(points, center, self._metric), shape=[-1])
        return _ops.square(d) if self._metric == MANHATTAN_DISTANCE else d

    def _kmeans_plus_plus(self, points: Any) -> Any:
        """k-means++ (Arthur and Vassilvitskii) with TF's greedy retries: the first center
        uniform; then 1 + kmeans_plus_plus_num_retries candidates, each drawn with probability
        proportional to its weight against the nearest center so far (Gumbel-max: argmax of
        log weight + Gumbel noise), of which the one leaving the smallest total weight is taken."""
        rows = [_ops.argmin(self._uniform(points, 0), axis=0)]
        nearest = self._weights(points, rows[0])
        tries = 1 + self._retries
        for j in range(1, self._k):
            # Floors keep log finite: a chosen point (weight 0) gets about -69, below any other
            # point's log weight plus noise unless every point is a chosen one.
            log_w = _ops.log(_ops.maximum(nearest, _const(1e-30, points)))
            picks, after = [], []
            for r in range(tries):
                u = _ops.maximum(self._uniform(points, j * tries + r), _const(1e-30, points))
                picks.append(_ops.argmax(log_w - _ops.log(-_ops.log(u)), axis=0))
                after.append(_ops.minimum(nearest, self._weights(points, picks[-1])))
            best = _ops.argmin(_ops.stack([_ops.reduce_sum(a) for a in after]), axis=0)
            rows.append(_ops.gather(_ops.stack(picks), best))
            nearest = _ops.gather(_ops.stack(after), best)
        return _ops.gather(points, _ops.stack(rows))


def _num_clusters(who: str, num_clusters: Any, initial: Any) -> int:
    if not isinstance(initial, str) and not callable(initial):
        shape = _t(initial).shape
        if shape is None or len(shape) != 2 or shape[0] is None:
            raise OpsdkError(f"{who}: initial_clusters must be [num_clusters, d], got {shape}")
        return int(shape[0])
    if isinstance(num_clusters, opsdk.Tensor) or not isinstance(num_clusters, (int, np.integer)):
        raise OpsdkError(f"{who}: num_clusters must be an int known when the graph is built, "
                         f"got {num_clusters!r}")
    if num_clusters < 1:
        raise OpsdkError(f"{who}: num_clusters must be >= 1, got {num_clusters}")
    return int(num_clusters)
