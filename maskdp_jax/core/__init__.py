"""The DP core of MaskDP-SGD: the modules the public API (:mod:`maskdp_jax`) is made of.

No IO, no plots, no config dicts: every function takes typed keyword arguments and the modules
import only jax/flax/optax/einops/numpy, :mod:`maskdp_jax.accounting` (a library of the same
layer) and each other; never :mod:`maskdp_jax.data`, :mod:`maskdp_jax.models`, the run layer or
the reporting layer.

* :mod:`maskdp_jax.core.plan`: :class:`~maskdp_jax.core.plan.Mode` and the run's
  :class:`~maskdp_jax.core.plan.PrivacyPlan` (mode, adjacency, effective sampling scheme, q, steps,
  δ, C, σ, accountant), built and validated once, read by the step, the guard and the report.
* :mod:`maskdp_jax.core.tokenizer`: pixel masks -> token cells -> public and private views (cell
  geometry and the degenerate-mask check live here only).
* :mod:`maskdp_jax.core.gradient`: the masked gradient of one logical batch for any model and loop
  (public sum, the noise once, the division by B), what the step is built from.
* :mod:`maskdp_jax.core.mechanism`: the plan with its noise stream, sampler and ledger (the
  library's private step); :mod:`maskdp_jax.core.per_pass`: an optimiser per pass for its two
  parts (post-processing of the release).
* :mod:`maskdp_jax.core.clipping` (per-example clipped gradient sum), :mod:`maskdp_jax.core.noise`
  (Gaussian noise on the clipped sum), :mod:`maskdp_jax.core.bandmf` (banded correlated noise and
  its accounting; not yet a plan option), :mod:`maskdp_jax.core.sampling` (Poisson sampler, physical
  batches), :mod:`maskdp_jax.core.randomness` (the secret or seeded noise key and batch seeds).
* :mod:`maskdp_jax.core.train_step`: ``train_step(state, batch) -> (state, metrics)`` on a
  :class:`~maskdp_jax.core.mechanism.Mechanism` (its ``accumulate`` per physical batch, its
  ``finish`` per logical step; the state carries the mechanism's state), one code path for every
  mode.
* :mod:`maskdp_jax.core.partition` (trainable / frozen split), :mod:`maskdp_jax.core.parallel` (data
  parallelism over a device mesh, several hosts).
* :mod:`maskdp_jax.core.compilation`: the XLA compile options of the step's programs and the ``jit``
  that applies them (also used by the audit's shadow models).

Above the core: the run layer (:mod:`maskdp_jax.run`), reporting, the product parts and the
commands (the top-level modules of :mod:`maskdp_jax`); nothing here imports them
(tests/test_layers.py).
"""
