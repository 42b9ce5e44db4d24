"""A small JAX model with opsdk's flagship op inside: the same prototype classifier.

`pairwise_manhattan` is a JAX function made from its declaration (shapes from the declaration,
VJP from the declared gradient op), so `jax.jit(jax.value_and_grad(...))` trains through it.

    python examples/jax_prototypes.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from opsdk.jax import ops

CENTERS = jnp.array([[0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 0.0, 0.0], [0.0, 3.0, 3.0, 3.0]])


def blobs(key: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    k1, k2 = jax.random.split(key)
    labels = jax.random.randint(k1, (n,), 0, 3)
    return CENTERS[labels] + jax.random.normal(k2, (n, 4)), labels


def loss_fn(prototypes: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    logits = -ops.pairwise_manhattan(x, prototypes)
    log_probs = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(log_probs, y[:, None], axis=1).mean()


@jax.jit
def step(prototypes: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    loss, grad = jax.value_and_grad(loss_fn)(prototypes, x, y)
    return prototypes - 0.5 * grad, loss


def main(steps: int = 150) -> float:
    key = jax.random.PRNGKey(0)
    key, init = jax.random.split(key)
    prototypes = jax.random.normal(init, (3, 4))
    for _ in range(steps):
        key, sub = jax.random.split(key)
        prototypes, loss = step(prototypes, *blobs(sub, 128))
    x, y = blobs(key, 1000)
    accuracy = float((jnp.argmax(-ops.pairwise_manhattan(x, prototypes), 1) == y).mean())
    print(f"final loss {float(loss):.3f}, test accuracy {accuracy:.3f}")
    return accuracy


if __name__ == "__main__":
    main()
