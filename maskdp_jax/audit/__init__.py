"""Empirical privacy audits (Gu & Chen 2024 and beyond): how much does a guarantee protect,
measured.

    python -m maskdp_jax.audit --config=configs/audit_coupled.py
    --workdir=docs/results/audit_coupled

The LiRA attack and its per-example success rates (:mod:`maskdp_jax.audit.lira`), the metrics the
auditing literature reports (:mod:`maskdp_jax.audit.metrics`), and the coupled-sampling attack on
the training step (:mod:`maskdp_jax.audit.coupled`), shadow models trained with the project's step
(:mod:`maskdp_jax.audit.shadows`, :mod:`maskdp_jax.audit.membership`), canaries in the private and
the public region audited in one run (:mod:`maskdp_jax.audit.canaries`), feature masking chosen by
explainer sensitivities (Gu & Chen 2024, Alg. 1; :mod:`maskdp_jax.audit.feature_masking`), all run
by :mod:`maskdp_jax.audit.runs`.
"""
