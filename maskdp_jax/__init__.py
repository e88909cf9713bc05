"""MaskDP in your own training loop: the DP core of MaskDP-SGD and its public API.

``import maskdp_jax as mdp`` gives everything a training loop needs, without the run layer or
``ml_collections`` (docs/api.md is the guide)::

    plan = mdp.PrivacyPlan.calibrate(mode="maskdp", num_examples=N, batch_size=B, epochs=E,
                                     l2_clip_norm=1.0, delta=1e-5, target_epsilon=1.0)
    rng = mdp.Randomness(mode="secret", seed=0, secret=mdp.draw_secret())
    sampler = rng.sampler(num_examples=N, expected_batch_size=B)
    ledger = mdp.Ledger()
    for step in range(plan.steps):
        drawn = sampler.logical_batch(step, mode=plan.mode, sampling=plan.sampling)
        grad, stats = mdp.masked_gradient(loss_fn, params, plan=plan,
                                          key=jax.random.fold_in(rng.noise_key(), step),
                                          public=examples(drawn.public),
                                          private=examples(drawn.private), tokens=tokens)
        ...  # optax update
        plan.record_step(ledger)
    print(plan.epsilon(ledger))

The API, by task:

* the plan: :class:`PrivacyPlan` (``calibrate`` for a target ε or a given σ), :class:`Mode`;
* views: :class:`Tokenizer` (video ``(st, sh, sw)`` or image ``(sh, sw)`` cells),
  :func:`tokenizer_for` (from a model's declared ``patch_stride``/``patch_size``), :class:`Views`;
* the gradient: :func:`masked_gradient` (one call), or its pieces :func:`public_grad_sum`,
  :func:`clipped_grad_sum` and :func:`noisy_gradient` for several physical batches per step;
  :class:`Examples`, :class:`GradStats`, :class:`ClipStats`;
* batches: :class:`PoissonSampler` (public and private draws), :class:`LogicalBatch`,
  :func:`physical_batches` (fixed-size batches with weight-0 padding), :func:`padded_indices`
  (a whole logical batch padded to a multiple of a size);
* randomness: :class:`Randomness` and :func:`draw_secret` (the secret noise key and sampler
  seeds);
* a whole step for a model ``apply_fn(params, x) -> logits`` (what ``train.py`` runs):
  :func:`make_train_step`, :class:`TrainState`, :class:`LogicalBatchData`, :class:`PixelViews`;
  data parallelism over a mesh, several hosts: :mod:`maskdp_jax.parallel`;
* accounting: :class:`Ledger` and :meth:`PrivacyPlan.epsilon`, :func:`epsilon`,
  :func:`calibrate_noise_multiplier` (dp-accounting's RDP and PLD with the masked adjacencies).

The modules:

No IO, no plots, no config dicts: every function takes typed keyword arguments and the modules
import only jax/flax/optax/einops/numpy, :mod:`accounting` (a library of the same layer) and each
other; never :mod:`data`, :mod:`models`, the run layer or the reporting layer.

* :mod:`maskdp_jax.plan`: :class:`~maskdp_jax.plan.Mode` and the run's
  :class:`~maskdp_jax.plan.PrivacyPlan` (mode, adjacency, effective sampling scheme, q, steps, δ,
  C, σ, accountant), built and validated once, read by the step, the guard and the report.
* :mod:`maskdp_jax.tokenizer`: pixel masks -> token cells -> public and private views (cell
  geometry and the degenerate-mask check live here only).
* :mod:`maskdp_jax.gradient`: the masked gradient of one logical batch for any model and loop
  (public sum, the noise once, the division by B), what the step is built from.
* :mod:`maskdp_jax.clipping` (per-example clipped gradient sum), :mod:`maskdp_jax.noise`
  (Gaussian noise on the clipped sum), :mod:`maskdp_jax.sampling` (Poisson sampler, physical
  batches), :mod:`maskdp_jax.randomness` (the secret or seeded noise key and batch seeds).
* :mod:`maskdp_jax.train_step`: ``train_step(state, batch, key) -> (state, metrics)``, one code
  path for ``maskdp``, ``dp`` and ``nonprivate``.
* :mod:`maskdp_jax.partition` (trainable / frozen split), :mod:`maskdp_jax.parallel` (data
  parallelism over a device mesh, several hosts).
* :mod:`maskdp_jax.compilation`: the XLA compile options of the step's programs and the ``jit``
  that applies them (also used by the audit's shadow models).
"""

from accounting import Ledger, calibrate_noise_multiplier, epsilon
from maskdp_jax.clipping import ClipStats, clipped_grad_sum
from maskdp_jax.gradient import (
    Examples,
    GradStats,
    masked_gradient,
    noisy_gradient,
    pass_examples,
    pass_view,
    public_grad_sum,
)
from maskdp_jax.plan import Mode, PrivacyPlan
from maskdp_jax.randomness import Randomness, draw_secret
from maskdp_jax.sampling import (
    PRIVATE_STREAM,
    PUBLIC_STREAM,
    LogicalBatch,
    PoissonSampler,
    padded_indices,
    physical_batches,
)
from maskdp_jax.tokenizer import Tokenizer, Views, tokenizer_for, warn_degenerate_masks
from maskdp_jax.train_step import (
    LogicalBatchData,
    PixelViews,
    TrainState,
    ViewFn,
    make_train_step,
)

__all__ = [
    "PRIVATE_STREAM",
    "PUBLIC_STREAM",
    "ClipStats",
    "Examples",
    "GradStats",
    "Ledger",
    "LogicalBatch",
    "LogicalBatchData",
    "Mode",
    "PixelViews",
    "PoissonSampler",
    "PrivacyPlan",
    "Randomness",
    "Tokenizer",
    "TrainState",
    "ViewFn",
    "Views",
    "calibrate_noise_multiplier",
    "clipped_grad_sum",
    "draw_secret",
    "epsilon",
    "make_train_step",
    "masked_gradient",
    "noisy_gradient",
    "pass_examples",
    "padded_indices",
    "pass_view",
    "physical_batches",
    "public_grad_sum",
    "tokenizer_for",
    "warn_degenerate_masks",
]
