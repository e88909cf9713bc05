"""DP-CDA (Saha et al. 2024): a differentially private synthetic dataset by class-centric mixing.

    python -m maskdp_jax.release --config=configs/dpcda_digits.py
    --workdir=docs/results/dpcda_digits

The mechanism is :mod:`maskdp_jax.release.mixing`, its privacy :mod:`maskdp_jax.accounting.dpcda`
(the project's accountant layer), the data :mod:`maskdp_jax.release.datasets`, the run and the
utility study :mod:`maskdp_jax.release.run`, the record of every release a workdir made (and the
refusal of a second one unless ``release.another=True``) :mod:`maskdp_jax.release.ledger`.
"""
