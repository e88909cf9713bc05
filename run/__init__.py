"""The run layer: what turns the DP core into a training run a person can start, stop and trust.

Above :mod:`maskdp_jax` (the DP core), :mod:`accounting`, :mod:`models` and :mod:`data`; below the
entry points (``train.py``, ``sweep.py``) and the product parts that train (:mod:`audit`,
:mod:`release`). Nothing below imports it.

* :mod:`run.command`: every command's front: ``--config`` and its keys checked, one error
  convention (``error: <reason>``, exit status 2, nothing written).
* :mod:`run.config`: the config, read once: up-front checks, the privacy plan, typed objects for
  the library (``ml_collections`` config dicts end here).
* :mod:`run.model`: the one model factory (preset, weights, trainable/frozen split, apply) of
  ``train.py``, the audits and the benchmarks.
* :mod:`run.datasets`: ``config.input`` -> the training and test splits; :mod:`run.prepare`
  (``python -m run.prepare``): the clip stores a config names.
* :mod:`run.views`: one-view training (the context ablation) and feature masking, made before
  the DP core; :mod:`run.features`: the frozen prefix's feature cache.
* :mod:`run.guard`: :class:`~run.guard.PrivacyGuard`, the one owner of the ledger, the journal,
  the checkpoints and the run's identity: resume refusal, the budget, and the release rule
  ("nothing leaves the run before the journal covers it").
* :mod:`run.checkpoint` (orbax, storage only), :mod:`run.journal` (the privacy-ledger journal),
  :mod:`run.identity` (config fingerprint, topology), :mod:`run.workdir_lock` (one run per
  workdir).
* :mod:`run.evaluation` (held-out accuracy, view diagnostics), :mod:`run.metrics` (metrics.jsonl
  and TensorBoard).
"""
