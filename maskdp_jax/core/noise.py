"""Gaussian noise for the sum of clipped gradients (the Gaussian mechanism).

Noise is added **once per logical batch**, to the sum of clipped private gradients accumulated over
all physical batches of that logical batch, with standard deviation ``noise_multiplier *
l2_clip_norm`` per coordinate. The key of a logical step is :func:`step_key` of the run's base
key (the one place the per-step key is derived: :class:`maskdp_jax.core.mechanism.Mechanism` and
:func:`maskdp_jax.core.train_step.make_train_step` both call it), identical on every replica, so
that all replicas add the same noise and apply the same update.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

PyTree = Any


def step_key(base_key: jax.Array, step: jnp.ndarray | int) -> jax.Array:
    """The noise key of logical step ``step``: ``fold_in(base_key, step)``.

    Privacy: the same base key at two steps must give independent noise (the accountant composes
    independent Gaussian mechanisms); a key reused across steps would add the same vector twice,
    which an adversary who sees two updates can cancel.

    Args:
      base_key: the run's secret base key (:meth:`maskdp_jax.core.randomness.Randomness.noise_key`).
      step: the logical step, a Python int or a traced integer scalar.
    """
    return jax.random.fold_in(base_key, step)


def standard_normal_flat(tree: PyTree, key: jax.Array) -> jnp.ndarray:
    """``[size]`` float32 standard normal, one coordinate per element of ``tree``'s leaves.

    One draw for the whole tree, cut into the leaves by :func:`unflatten_like`: every coordinate
    is an independent N(0, 1) either way, and one threefry program compiles far faster than one
    per leaf (benchmarks/results/first_run.md).
    """
    size = sum(int(x.size) for x in jax.tree.leaves(tree))
    return jax.random.normal(key, (size,), jnp.float32)


def unflatten_like(flat: jnp.ndarray, tree: PyTree) -> PyTree:
    """``flat`` (``[size]``) cut into ``tree``'s leaves, each cast to its leaf's dtype."""
    leaves, treedef = jax.tree.flatten(tree)
    out, offset = [], 0
    for x in leaves:
        out.append(flat[offset:offset + x.size].reshape(x.shape).astype(x.dtype))
        offset += x.size
    return jax.tree.unflatten(treedef, out)


def gaussian_noise_like(
    tree: PyTree, key: jax.Array, *, noise_multiplier: float, l2_clip_norm: float
) -> PyTree:
    """``N(0, (noise_multiplier * l2_clip_norm)^2 I)`` with the structure of ``tree``.

    Args:
      tree: pytree whose shapes and dtypes the noise takes.
      key: PRNG key of this logical step.
      noise_multiplier: sigma; 0 gives an all-zero tree (no privacy).
      l2_clip_norm: C, the L2 sensitivity of the clipped sum.

    Returns:
      A pytree like ``tree`` (drawn in float32, cast to each leaf's dtype).
    """
    std = noise_multiplier * l2_clip_norm
    return unflatten_like(std * standard_normal_flat(tree, key), tree)


def add_gaussian_noise(
    grad_sum: PyTree, key: jax.Array, *, noise_multiplier: float, l2_clip_norm: float
) -> PyTree:
    """Privatise a sum of clipped gradients: ``grad_sum + N(0, sigma^2 C^2 I)``.

    >>> import jax, jax.numpy as jnp
    >>> g = {"w": jnp.zeros((10000,))}
    >>> noisy = add_gaussian_noise(g, jax.random.key(0), noise_multiplier=2.0, l2_clip_norm=0.5)
    >>> round(float(jnp.std(noisy["w"])), 1)
    1.0
    """
    noise = gaussian_noise_like(
        grad_sum, key, noise_multiplier=noise_multiplier, l2_clip_norm=l2_clip_norm
    )
    return jax.tree.map(jnp.add, grad_sum, noise)
