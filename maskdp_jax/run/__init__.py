"""The run layer: what turns the DP core into a training run a person can start, stop and trust.

Above the DP core (:mod:`maskdp_jax`'s top-level modules), :mod:`maskdp_jax.accounting`,
:mod:`maskdp_jax.models` and :mod:`maskdp_jax.data`; below the commands (:mod:`maskdp_jax.train`,
:mod:`maskdp_jax.sweep`, :mod:`maskdp_jax.prepare`) and the product parts that train
(:mod:`maskdp_jax.audit`, :mod:`maskdp_jax.release`). Nothing below imports it.

* :mod:`maskdp_jax.run.command`: every command's front: ``--config`` and its keys checked, one error
  convention (``error: <reason>``, exit status 2, nothing written).
* :mod:`maskdp_jax.run.config`: the config, read once: up-front checks, the privacy plan, typed
  objects for the library (``ml_collections`` config dicts end here).
* :mod:`maskdp_jax.run.model`: the one model factory (preset, weights, trainable/frozen split,
  apply) of ``train.py``, the audits and the benchmarks.
* :mod:`maskdp_jax.run.datasets`: ``config.input`` -> the training and test splits;
  :mod:`maskdp_jax.prepare` (``python -m maskdp_jax.prepare``): the clip stores a config names.
* :mod:`maskdp_jax.run.views`: one-view training (the context ablation) and feature masking, made
  before the DP core; :mod:`maskdp_jax.run.features`: the frozen prefix's feature cache.
* :mod:`maskdp_jax.run.guard`: :class:`~maskdp_jax.run.guard.PrivacyGuard`, the one owner of the
  ledger, the journal, the checkpoints and the run's identity: resume refusal, the budget, and the
  release rule ("nothing leaves the run before the journal covers it").
* :mod:`maskdp_jax.run.checkpoint` (orbax, storage only), :mod:`maskdp_jax.run.journal` (the
  privacy-ledger journal), :mod:`maskdp_jax.run.identity` (config fingerprint, topology),
  :mod:`maskdp_jax.run.workdir_lock` (one run per workdir).
* :mod:`maskdp_jax.run.evaluation` (held-out accuracy, view diagnostics),
  :mod:`maskdp_jax.run.metrics` (metrics.jsonl and TensorBoard).
"""
