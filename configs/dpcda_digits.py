r"""DP-CDA (Saha et al. 2024) on scikit-learn's bundled handwritten digits (1,797 real 8×8 images).

    python -m maskdp_jax.release --config=configs/dpcda_digits.py
    --workdir=docs/results/dpcda_digits

Releases one synthetic set at l = 4 (the seed's l*), ε = 5, and, in ``study/`` (outside the
release's ε: public benchmark data), sweeps l over the whole range 1 … min_class_size − 1
(log-spaced) × ε ∈ {1, 5, 10, ∞} × 3 seeds × {noised label (the seed's), exact label}, training
a logistic regression on each synthetic set and testing it on the real held-out 20 %. The
seed's CNN is for 28×28 images; on 64 features a linear model is the fitting small classifier.
Expected: with exact labels the best l is the largest (noisy class means), docs/guides/dpcda.md.

The release keeps the label exact (``release.label_noise=False``): under class-centric mixing
the label mean is always e_k, so the seed's label noise buys no privacy (accounting/dpcda.py)
and, at the σy a small ε needs on data this small, flips most labels (the study measures both).
``--config.release.label_noise=True`` is the seed's recipe exactly.

Each release is recorded in ``<workdir>/release_ledger.json`` before its file is written. Run
again into the same workdir, the command refuses: a second release of the same private data
composes with the first (ε = 5 + 5). ``--config.release.another=True`` releases again
(``synthetic_2.npz``, ...) and reports the composed ε of all releases in the workdir; a fresh
``--workdir`` is for other data.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.title = "scikit-learn digits"
    config.data = ml_collections.ConfigDict(dict(
        source="digits",
        test_fraction=0.2,  # held-out real test data (stratified, fixed public split seed)
        split_seed=0,
    ))
    # Features are pixel / 16 in [0, 1] (the format's fixed range: no private statistics);
    # their norms are 3.4-4.3 (5th-95th percentile), so c = 4 clips about half a little.
    config.clip_norm = 4.0
    # A public lower bound on every class's size: the accountant's rate is l / min_class_size
    # (the exact sizes are private under label-changing replacement). load_digits has about 180
    # images per class (its documentation) and the split keeps 80 % of each: 130 is safe.
    config.min_class_size = 130
    config.num_synthetic = 0  # T; 0: as many as the private training records
    config.delta = 1e-5  # below 1/N = 1/1437
    config.sigma_ratio = 1.0  # σy / σx when the label is noised (the seed's recipe)
    config.draws = "all"  # compose all T draws (the seed); "affected": only the record's class
    config.classifier = "logistic"  # or "mlp"
    config.randomness = "secret"  # the release's draws and noise (maskdp_jax.core.randomness)
    config.seed = 0  # public; used for the seeded mode and the classifier
    config.release = ml_collections.ConfigDict(dict(
        order=4, epsilon=5.0, label_noise=False,
        # A workdir that holds a release refuses another (the same data released twice has the ε
        # of both); True releases again and reports the composed ε (release/ledger.py).
        another=False,
        # epsilon=inf mixes without noise; on own (private) data only with this set to True.
        without_privacy=False,
    ))
    config.sweep = ml_collections.ConfigDict(dict(
        enabled="auto",  # "auto": on benchmark sources only; "yes", "no"
        orders=(1, 2, 4, 8, 16, 32, 64, 96, 129),  # up to min_class_size - 1
        epsilons=(1.0, 5.0, 10.0, float("inf")),
        seeds=(0, 1, 2),
        label_noise=(True, False),
    ))
    return config
