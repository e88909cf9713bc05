r"""The coupled-sampling attack: the noise-free public gradient reveals who was sampled.

MaskDP's public gradient is not noised, and the adversary knows the public data (public pixels,
masks, labels) and the parameters before a step. From them it computes every video's own public
gradient g_i, then explains the step's public gradient g = Σ_{i∈B_pu} g_i as a combination of
them: w = argmin_w ‖Σ_i w_i g_i − g‖₂ (least squares), and the batch it recovers is
{i : w_i > 1/2}. With more trainable parameters than videos the g_i are linearly independent and
the recovery is exact.

What that reveals about the *private* batch is the point:

* ``sampling="coupled"`` (the paper's Algorithm 1): the private batch *is* the public batch, so
  the attacker knows exactly which videos' private gradients are in the noisy sum. Subsampling
  no longer hides membership, and the private pass must be accounted with the revealed-sample
  bound (:mod:`maskdp_jax.accounting.coupled`), not Theorem 4.1.
* ``sampling="decoupled"`` (our default): the private batch is an independent Poisson draw; the
  recovered public batch overlaps it only by chance, so guessing "private = recovered public"
  has precision and recall ≈ q, the sampling rate.

The public gradients are computed by the training step's own function
(:func:`maskdp_jax.core.train_step.accumulate`, its public pass): g_i is the public sum of the batch
with the one-hot weight e_i, and g is the sum over the step's physical batches. The attacker
needs no private pixel: the public pass never reads one (the bit-exact invariant of the step).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from maskdp_jax import models
from maskdp_jax.core import sampling, train_step
from maskdp_jax.core.mechanism import Mechanism
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.core.tokenizer import Tokenizer


def _flat(tree) -> jax.Array:
    return jnp.concatenate([jnp.ravel(x) for x in jax.tree.leaves(tree)])


@functools.partial(jax.jit, static_argnames=("apply_fn", "plan", "tokens"))
def _public_sum(trainable, frozen, batch, *, apply_fn, plan, tokens):
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=0))
    acc = train_step.accumulate(train_step.zeros_accumulator(trainable), trainable, frozen,
                                batch, public=True, apply_fn=apply_fn, mechanism=mechanism,
                                views=train_step.PixelViews(tokens))
    return _flat(acc.public)


def per_example_public_gradients(trainable, frozen, data: dict, *, apply_fn, plan: PrivacyPlan,
                                 tokens: Tokenizer) -> np.ndarray:
    """``[N, d]``: row i is video i's public gradient (the step's public sum with weight e_i).

    Args:
      trainable, frozen: the parameters before the step (public to the attacker: the previous
        release).
      data: ``video [N, K, T, H, W, 3]``, ``mask [N, K, T, H, W]``, ``label [N]`` of every
        training video; only public pixels influence the result.
    """
    one_hot = np.eye(len(data["label"]), dtype=np.float32)
    return np.stack([
        np.asarray(_public_sum(trainable, frozen, dict(data, weight=weight), apply_fn=apply_fn,
                               plan=plan, tokens=tokens))
        for weight in one_hot])


def step_public_gradient(trainable, frozen, data: dict, indices: np.ndarray, *, apply_fn,
                         plan: PrivacyPlan, tokens: Tokenizer,
                         physical_batch_size: int) -> np.ndarray:
    """``[d]``: the public gradient a step on the public batch ``indices`` computes (its physical
    batches, padded with weight 0, summed as :func:`maskdp_jax.core.train_step.make_train_step`
    does)."""
    total = None
    batches = sampling.physical_batches(indices, physical_batch_size=physical_batch_size)
    for rows, weights in batches:
        batch = {k: v[rows] for k, v in data.items()} | {"weight": weights}
        part = np.asarray(_public_sum(trainable, frozen, batch, apply_fn=apply_fn, plan=plan,
                                      tokens=tokens))
        total = part if total is None else total + part
    if total is None:  # an empty Poisson batch: the public gradient is zero
        total = np.zeros(models.finetune.count_params(trainable), np.float32)
    return total


def recover_batch(gradients: np.ndarray, public_gradient: np.ndarray) -> np.ndarray:
    """The indices whose least-squares weight in ``public_gradient ≈ Σ_i w_i gradients[i]``
    exceeds 1/2.

    Args:
      gradients: ``[N, d]`` per-example public gradients.
      public_gradient: ``[d]``.
    """
    w, *_ = np.linalg.lstsq(np.asarray(gradients, np.float64).T,
                            np.asarray(public_gradient, np.float64), rcond=None)
    return np.flatnonzero(w > 0.5)


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    """One step's attack: the recovered public batch against the true private batch."""

    step: int
    recovered: int
    private: int
    hits: int
    public_exact: bool  # the recovered set equals the true public batch

    @property
    def precision(self) -> float:
        return self.hits / self.recovered if self.recovered else float("nan")

    @property
    def recall(self) -> float:
        return self.hits / self.private if self.private else float("nan")


def attack_steps(trainable, frozen, data: dict, sampler: sampling.PoissonSampler, *,
                 steps: int, sampling_scheme: str, apply_fn, plan: PrivacyPlan,
                 tokens: Tokenizer, physical_batch_size: int) -> list[StepOutcome]:
    """Run the attack on ``steps`` logical steps of ``maskdp`` with the given sampling scheme.

    The parameters stay those before the first step (each step's attack needs only the
    parameters the step started from; holding them fixed keeps the experiment small and does not
    help the attacker, whose g_i would be recomputed each step anyway).
    """
    grads = per_example_public_gradients(trainable, frozen, data, apply_fn=apply_fn, plan=plan,
                                         tokens=tokens)
    out = []
    for step in range(steps):
        batch = sampler.logical_batch(step, mode="maskdp", sampling=sampling_scheme)
        g = step_public_gradient(trainable, frozen, data, batch.public, apply_fn=apply_fn,
                                 plan=plan, tokens=tokens,
                                 physical_batch_size=physical_batch_size)
        recovered = recover_batch(grads, g)
        out.append(StepOutcome(
            step=step, recovered=len(recovered), private=len(batch.private),
            hits=len(np.intersect1d(recovered, batch.private)),
            public_exact=bool(np.array_equal(np.sort(recovered), np.sort(batch.public)))))
    return out
