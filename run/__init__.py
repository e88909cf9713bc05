"""The run layer: what turns the DP core into a training run a person can start, stop and trust.

Above :mod:`maskdp_jax` (the DP core), :mod:`accounting`, :mod:`models` and :mod:`data`; below the
entry points (``train.py``, ``sweep.py``). Nothing below imports it.

* :mod:`run.config`: the config, read once: up-front checks, the privacy plan, typed objects for
  the library (``ml_collections`` config dicts end here).
* :mod:`run.guard`: :class:`~run.guard.PrivacyGuard`, the one owner of the ledger, the journal,
  the checkpoints and the run's identity: resume refusal, the budget, and the release rule
  ("nothing leaves the run before the journal covers it").
* :mod:`run.checkpoint` (orbax, storage only), :mod:`run.journal` (the privacy-ledger journal),
  :mod:`run.identity` (config fingerprint, topology).
* :mod:`run.evaluation` (held-out accuracy, view diagnostics), :mod:`run.metrics` (metrics.jsonl
  and TensorBoard).
"""
