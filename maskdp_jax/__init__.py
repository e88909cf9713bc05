"""The DP core of MaskDP-SGD: the math of one private training step, and nothing else.

No IO, no plots, no config dicts: every function takes typed keyword arguments and the modules
import only jax/flax/optax/einops/numpy, :mod:`accounting` (a library of the same layer) and each
other; never :mod:`data`, :mod:`models`, the run layer or the reporting layer.

* :mod:`maskdp_jax.plan`: :class:`~maskdp_jax.plan.Mode` and the run's
  :class:`~maskdp_jax.plan.PrivacyPlan` (mode, adjacency, effective sampling scheme, q, steps, δ,
  C, σ, accountant), built and validated once, read by the step, the guard and the report.
* :mod:`maskdp_jax.tokenizer`: pixel masks -> token cells -> public and private views (cell
  geometry and the degenerate-mask check live here only).
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
