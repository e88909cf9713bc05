"""DP-CDA's mechanism (Saha et al. 2024, Algorithm 1): class-centric mixing plus Gaussian noise, in
JAX.

For class k with pool X_k (N_k records, features already normalised with fixed statistics and
L2-clipped to c), each of the T_k synthetic samples is the mean of l records drawn uniformly
*without replacement* from the pool, plus N(0, σx² I); its label vector is the mean of the l
one-hot labels (always e_k under class-centric mixing) plus N(0, σy² I_K), and the released label
is its argmax. The privacy of this is :mod:`maskdp_jax.accounting.dpcda`.

One jitted call makes a whole class: each l-subset is the l pool rows with the smallest
64-bit random keys (two fresh ``uint32`` words per row, compared lexicographically), i.e. the
first l rows of a uniform random order. Sorting by keys is uniform up to ties, and a tie keeps
index order: with 32-bit keys (``jax.random.permutation``'s) that is a deviation of about
n²/2³³ per draw, with 64-bit keys about n²/2⁶⁵ (below 1e-11 for a pool of 10⁴), far below
anything the accountant's δ could notice; the subsampling theorems assume exactly uniform
subsets. The means are one matrix product of the ``[T_k, N]`` selection weights with the pool.
Pools are padded to the largest class so every class runs the same compiled program (padding
rows get the last keys and are never drawn).

Privacy meaning of the key: it must be secret in a release (``randomness="secret"``, the same
policy as training, :mod:`maskdp_jax.core.randomness`): whoever knows it can recompute every draw
and noise vector and subtract the noise.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np


def clip_rows(features: np.ndarray, clip_norm: float) -> np.ndarray:
    """Scales each row to L2 norm at most ``clip_norm`` (the seed's x / max(1, ‖x‖/c))."""
    features = np.asarray(features, dtype=np.float32)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return features / np.maximum(1.0, norms / clip_norm)


@dataclasses.dataclass(frozen=True)
class Mixture:
    """A synthetic set and, for tests and audits only, the records behind it.

    Attributes:
      features: ``[K·T_k, d]`` float32 noised means (the release).
      label_scores: ``[K·T_k, K]`` float32 noised one-hot means (the release keeps their argmax).
      labels: ``[K·T_k]`` int32 argmax labels (the release).
      classes: ``[K·T_k]`` int32 the class each sample was mixed from (equal to ``labels``
        without label noise); not released.
      members: ``[K·T_k, l]`` int64 indices into the private dataset of the mixed records;
        **private**, never written to a release.
    """

    features: np.ndarray
    label_scores: np.ndarray
    labels: np.ndarray
    classes: np.ndarray
    members: np.ndarray


@functools.partial(jax.jit, static_argnames=("order", "per_class", "num_classes"))
def _mix_class(key, pool, pool_size, class_index, *, order, per_class, num_classes,
               sigma_x, sigma_y):
    """One class: ``pool [N_max, d]`` (rows ≥ ``pool_size`` are padding) -> its T_k samples."""
    draw_key, x_key, y_key = jax.random.split(key, 3)
    n_max = pool.shape[0]

    def draw(k):  # the l real rows with the smallest 64-bit keys: a uniform l-subset
        high, low = jax.random.bits(k, (2, n_max), jnp.uint32)
        return jnp.lexsort((low, high, jnp.arange(n_max) >= pool_size))[:order]

    chosen = jax.vmap(draw)(jax.random.split(draw_key, per_class))  # [T_k, l]
    weights = jnp.zeros((per_class, n_max), pool.dtype)
    weights = weights.at[jnp.arange(per_class)[:, None], chosen].set(1.0 / order)
    features = weights @ pool + sigma_x * jax.random.normal(x_key, (per_class, pool.shape[1]))
    one_hot_mean = jnp.broadcast_to(jax.nn.one_hot(class_index, num_classes), (per_class,
                                                                                 num_classes))
    scores = one_hot_mean + sigma_y * jax.random.normal(y_key, (per_class, num_classes))
    return features, scores, chosen


def mix(
    key: jax.Array,
    features: np.ndarray,
    labels: np.ndarray,
    *,
    num_classes: int,
    order: int,
    num_synthetic: int,
    sigma_x: float,
    sigma_y: float,
) -> Mixture:
    """Algorithm 1 of Saha et al. 2024 on clipped features.

    Args:
      key: the release's secret key (class k uses ``fold_in(key, k)``).
      features: ``[N, d]`` private features, normalised with fixed statistics and clipped.
      labels: ``[N]`` int labels in ``[0, num_classes)``; every class must hold more than
        ``order`` records (checked by :class:`maskdp_jax.accounting.dpcda.MixingSetup` upstream).
      num_classes: K.
      order: l, records per synthetic sample.
      num_synthetic: T; ⌊T/K⌋ samples per class.
      sigma_x, sigma_y: noise stds (σy = 0: the label mean is released as is).

    Returns:
      :class:`Mixture`, class-major (all of class 0, then class 1, ...).
    """
    features = np.asarray(features, dtype=np.float32)
    labels = np.asarray(labels)
    per_class = num_synthetic // num_classes
    pools = [np.flatnonzero(labels == k) for k in range(num_classes)]
    n_max = max(len(p) for p in pools)
    outs = []
    for k, rows in enumerate(pools):
        padded = np.zeros((n_max, features.shape[1]), np.float32)
        padded[: len(rows)] = features[rows]
        x, s, chosen = _mix_class(
            jax.random.fold_in(key, k), padded, len(rows), k, order=order, per_class=per_class,
            num_classes=num_classes, sigma_x=float(sigma_x), sigma_y=float(sigma_y))
        outs.append((np.asarray(x), np.asarray(s), rows[np.asarray(chosen)]))
    scores = np.concatenate([o[1] for o in outs])
    classes = np.repeat(np.arange(num_classes, dtype=np.int32), per_class)
    return Mixture(
        features=np.concatenate([o[0] for o in outs]),
        label_scores=scores,
        labels=np.argmax(scores, axis=1).astype(np.int32),
        classes=classes,
        members=np.concatenate([o[2] for o in outs]),
    )
