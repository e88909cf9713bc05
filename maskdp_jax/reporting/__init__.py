"""What a person reads after runs: run reports, sweep tables and figures.

* :mod:`maskdp_jax.reporting.privacy`: the privacy statement of a run: ε with what exactly it
  protects.
* :mod:`maskdp_jax.reporting.run_report`: :class:`~maskdp_jax.reporting.run_report.RunReport`, one
  run's ``report.json`` (for machines) and ``report.md`` (for people).
* :mod:`maskdp_jax.reporting.results`: a sweep's runs aggregated into the papers' tables (CSV,
  Markdown), read from the runs' ``report.json`` files, never recomputed.
* :mod:`maskdp_jax.reporting.plots`: figures (PNG): accuracy vs ε, per-class accuracy, training
  curves. The only module of the library packages that imports matplotlib; import it by name
  (``from reporting import plots``), this package does not, so ``import reporting`` stays light.

Layers: reporting sits above ``models/``, ``data/``, ``accounting/`` and the DP core
``maskdp_jax/``, beside the run layer; it may import those, never the entry points (``train.py``,
``python -m maskdp_jax.sweep``). Nothing below it imports it.
"""
