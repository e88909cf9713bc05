"""Empirical privacy audits (seed 004 and beyond): how much does a guarantee protect, measured.

    python -m audit --config=configs/audit_coupled.py --workdir=docs/results/audit_coupled

The LiRA attack and its per-example success rates (:mod:`audit.lira`), the metrics the
auditing literature reports (:mod:`audit.metrics`), and the coupled-sampling attack on the
training step (:mod:`audit.coupled`), shadow models trained with the project's step
(:mod:`audit.shadows`, :mod:`audit.membership`), canaries in the private and the public region
audited in one run (:mod:`audit.canaries`), feature masking chosen by explainer sensitivities
(seed 004, Alg. 1; :mod:`audit.feature_masking`), all run by :mod:`audit.runs`.
"""
