"""A stand-in for TensorFlow's `tensorflow.examples.tutorials.mnist.input_data`, with synthetic
MNIST-shaped data (no download): 28x28 images in [0, 1] drawn around one random prototype per
digit class, so the tutorial's models can learn them. Same interface: `read_data_sets(dir,
one_hot=True)` gives `.train`, `.validation`, `.test`, each with `images`, `labels`, `num_examples`
and `next_batch(n)`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


class DataSet:
    """Images (n, 784) float32 (or uint8 0..255) and labels (one-hot (n, 10) float32, or class
    ids)."""

    def __init__(self, n: int, rng: np.random.Generator, prototypes: np.ndarray, one_hot: bool,
                 raw: bool = False):
        classes = rng.integers(0, 10, size=n)
        noise = rng.normal(0.0, 0.35, size=(n, 784))
        images = np.clip(prototypes[classes] + noise, 0.0, 1.0)
        # dtype=uint8 (TensorFlow's argument): the pixels as stored, 0..255
        self.images = np.rint(images * 255).astype(np.uint8) if raw else images.astype(np.float32)
        self.labels = np.eye(10, dtype=np.float32)[classes] if one_hot else classes.astype(np.uint8)
        self.num_examples = n
        self._rng = rng

    def next_batch(self, batch_size: int, fake_data: bool = False,
                   shuffle: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """`batch_size` examples drawn at random; with `fake_data` (TensorFlow's test mode)
        every image is ones and every label class 0, as TensorFlow's fake batches are."""
        if fake_data:
            label = self.labels[:1] * 0
            if label.ndim == 2:
                label[0, 0] = 1
            return (np.ones((batch_size, 784), np.float32),
                    np.repeat(label, batch_size, axis=0))
        pick = self._rng.integers(0, self.num_examples, size=batch_size)
        return self.images[pick], self.labels[pick]


def read_data_sets(train_dir: str = "", fake_data: bool = False, one_hot: bool = False,
                   dtype: object = "float32", seed: int = 0, **unused: object) -> SimpleNamespace:
    """Train (5000), validation (500) and test (1000) sets sharing the class prototypes, in
    TensorFlow's argument order (`fake_data` only changes what `next_batch(n, True)` gives;
    `dtype=uint8` keeps the pixels 0..255 as uint8, float32 scales them into [0, 1])."""
    raw = str(getattr(dtype, "name", dtype)) == "uint8"
    rng = np.random.default_rng(seed)
    prototypes = (rng.random((10, 784)) < 0.2).astype(np.float64)
    return SimpleNamespace(train=DataSet(5000, rng, prototypes, one_hot, raw),
                           validation=DataSet(500, rng, prototypes, one_hot, raw),
                           test=DataSet(1000, rng, prototypes, one_hot, raw))
