"""Per-example clipped gradients: the one place where DP sensitivity is enforced.

Every private gradient in the project (MaskDP private view, DP full video, and later LiRA shadow
models or feature-cache heads) goes through :func:`clipped_grad_sum`, so the sensitivity argument
lives in a single function:

* the per-example gradient is taken w.r.t. the *trainable* subtree only (frozen parameters are
  closed over by ``loss_fn``, so backprop stops at the lowest trainable layer);
* each per-example gradient is scaled to global L2 norm ``<= l2_clip_norm`` (norm over all
  trainable leaves jointly);
* an example whose gradient has a NaN/inf anywhere, or whose norm overflows float32, is replaced by
  the zero vector (a valid clipped gradient, so sensitivity is unchanged) and counted;
* the function returns the weighted *sum* ``sum_i w_i clip(g_i)`` with ``w_i in {0, 1}``. Adding or
  removing one example changes it by at most ``l2_clip_norm`` in L2 norm, which is what the
  Gaussian noise in :mod:`maskdp_jax.core.noise` is calibrated to.

Per-example gradients are materialised by ``vmap`` (the default), or, given the model's layer
rules (``ghost_rules``), never materialised: the norms and the clipped sum come from one backward's
activations and output gradients (:mod:`maskdp_jax.core.ghost`). Both paths feed the same statistics
and the same sum, so the argument above covers both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from maskdp_jax.accounting import inputs
from maskdp_jax.core import ghost

PyTree = Any


class ClipStats(NamedTuple):
    """Statistics of one physical batch of private examples.

    Computed from private data: they are **not** differentially private and are only logged when
    the user opts in (``config.log_private_metrics``).

    Attributes:
      num_nonfinite: number of real (weight > 0) examples whose gradient or loss was not finite
        (a NaN/inf element, or a norm beyond float32's range) and was zeroed.
      num_clipped: number of real examples whose norm exceeded the clip norm.
      norm_sum: sum of the (finite) pre-clipping norms of real examples.
      loss_sum: sum of real examples' losses (non-finite losses excluded).
      count: number of real examples.
    """

    num_nonfinite: jnp.ndarray
    num_clipped: jnp.ndarray
    norm_sum: jnp.ndarray
    loss_sum: jnp.ndarray
    count: jnp.ndarray

    @classmethod
    def zeros(cls) -> ClipStats:
        """The statistics of no example: int32 counts, float32 sums (distinct buffers)."""
        def izero():
            return jnp.zeros((), jnp.int32)

        def zero():
            return jnp.zeros((), jnp.float32)

        return cls(izero(), izero(), zero(), zero(), zero())


def clipped_grad_sum(
    loss_fn: Callable[[PyTree, Any], jnp.ndarray],
    trainable: PyTree,
    examples: Any,
    weights: jnp.ndarray,
    *,
    l2_clip_norm: float,
    microbatch_size: int | None = None,
    ghost_rules: ghost.Rules | None = None,
) -> tuple[PyTree, ClipStats]:
    """Sum of per-example gradients, each clipped to L2 norm ``<= l2_clip_norm``.

    Args:
      loss_fn: ``loss_fn(trainable, example) -> scalar`` for ONE example (no batch axis). It closes
        over everything that is not trained (frozen parameters, the model's apply function).
      trainable: the pytree the gradient is taken against.
      examples: pytree of arrays with a leading batch axis ``[P, ...]`` (one physical batch).
      weights: ``[P]`` in {0, 1}; 0 marks padding (and examples with nothing private), which then
        contributes exactly zero.
      l2_clip_norm: clip norm C > 0 (the sensitivity of the sum).
      microbatch_size: ``None`` (or ``P``): all ``P`` per-example gradients are materialised at
        once. Otherwise ``m`` dividing ``P``: the batch is processed as ``P / m`` chunks of ``m``
        examples in a ``lax.scan`` that accumulates the clipped sum, so at most ``m`` per-example
        gradients exist at a time (memory ``O(m * #trainable)`` instead of ``O(P * #trainable)``,
        what full fine-tuning of a large model needs). Same sum up to float32 summation order;
        privacy is unchanged (each example is still clipped on its own, the sum is the same).
      ghost_rules: ``None``: per-example gradients by ``vmap``. Otherwise the
        :class:`~maskdp_jax.core.ghost.LayerRule` of every layer kind owning trainable parameters:
        per-example norms and the clipped sum from one ordinary backward, without per-example
        gradients (:mod:`maskdp_jax.core.ghost`; ``trainable`` must be a Flax parameter dict and
        ``loss_fn`` apply a Flax model). The same sum and statistics, to float rounding.

    Returns:
      ``(grad_sum, stats)``: ``grad_sum`` has the structure of ``trainable``;
      ``stats`` is a :class:`ClipStats`.

    >>> import jax.numpy as jnp
    >>> loss = lambda w, x: jnp.sum(w * x)          # gradient of example i is x_i
    >>> xs = jnp.array([[3.0, 4.0], [0.3, 0.4], [1.0, 1.0]])
    >>> g, s = clipped_grad_sum(loss, jnp.zeros(2), xs, jnp.array([1.0, 1.0, 0.0]),
    ...                         l2_clip_norm=1.0)
    >>> [round(float(v), 4) for v in g], int(s.num_clipped)
    ([0.9, 1.2], 1)
    """
    inputs.check_clip_norm(l2_clip_norm)

    def one(example: Any) -> tuple[PyTree, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
        loss, grad = jax.value_and_grad(loss_fn)(trainable, example)
        # One reduction per leaf serves both checks: a NaN or inf element makes the norm NaN or
        # inf. So does a norm beyond float32's range, whose clipping scale would be 0 anyway; it
        # is counted as non-finite too. (A separate all-finite reduction per leaf made the
        # compiled program of full fine-tuning larger and slower to compile;
        # benchmarks/results/history.md, "Full fine-tuning's private pass compiles".)
        norm = optax.tree.norm(grad)
        finite = jnp.isfinite(norm) & jnp.isfinite(loss)
        grad = jax.tree.map(lambda g: jnp.where(finite, g, jnp.zeros_like(g)), grad)
        norm = jnp.where(finite, norm, 0.0)
        # C / max(norm, C): exactly 1 below the threshold, so small gradients pass unchanged.
        scale = l2_clip_norm / jnp.maximum(norm, l2_clip_norm)
        return jax.tree.map(lambda g: g * scale, grad), norm, loss, finite

    def chunk_sum(chunk: Any, chunk_weights: jnp.ndarray) -> tuple[PyTree, ClipStats]:
        if ghost_rules is None:
            grads, norms, losses, finite = jax.vmap(one)(chunk)
            grad_sum = jax.tree.map(
                lambda g: jnp.tensordot(chunk_weights.astype(jnp.float32), g, axes=1), grads)
        else:
            grad_sum, norms, losses, finite = ghost.clipped_sum(
                loss_fn, trainable, chunk, chunk_weights, l2_clip_norm=l2_clip_norm,
                rules=ghost_rules)
        real = chunk_weights > 0
        stats = ClipStats(
            num_nonfinite=jnp.sum(real & ~finite),
            num_clipped=jnp.sum(real & finite & (norms > l2_clip_norm)),
            norm_sum=jnp.sum(jnp.where(real & finite, norms, 0.0)),
            loss_sum=jnp.sum(jnp.where(real & finite, losses, 0.0)),
            count=jnp.sum(real),
        )
        return grad_sum, stats

    size = weights.shape[0]
    if microbatch_size is None or microbatch_size == size:
        return chunk_sum(examples, weights)
    if microbatch_size <= 0 or size % microbatch_size:
        raise ValueError(
            f"microbatch_size must be a positive divisor of the physical batch size {size}; "
            f"got {microbatch_size}."
        )
    num_chunks = size // microbatch_size

    chunks = jax.tree.map(
        lambda x: x.reshape(num_chunks, microbatch_size, *x.shape[1:]), (examples, weights)
    )

    def body(carry, chunk):
        return jax.tree.map(jnp.add, carry, chunk_sum(*chunk)), None

    first = jax.tree.map(lambda x: x[0], chunks)
    # zeros_like of the body's output types, not jnp.zeros(shape): inside shard_map the sums vary
    # over the data axis (params are pcast to varying, examples are sharded) and a scan carry must
    # keep its type; zeros_like carries the varying axes over, an invariant zero would not.
    zeros = jax.tree.map(jnp.zeros_like, jax.eval_shape(chunk_sum, *first))
    total, _ = jax.lax.scan(body, zeros, chunks)
    return total
