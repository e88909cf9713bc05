r"""DP-CDA (Saha et al. 2024) at the seed's scale: 60,000 training records of 10 balanced classes.

    python -m maskdp_jax.release --config=configs/dpcda_digits60k.py
    --workdir=docs/results/dpcda_digits60k

No dataset of that size ships with a package this project may install, and none can be
downloaded here, so the records come from a generator: the bundled digits' 80/20 split, each side
grown from its own originals by one-pixel shifts and a little pixel noise to 60,000 training
and 10,000 test images, 6,000 / 1,000 per class (``data.source="digits_jittered"``,
maskdp_jax/release/datasets.py). The class size is public by construction, so
``min_class_size`` = 6,000 exactly and the accountant's rate is l / 6,000. Everything else is
``configs/dpcda_digits.py``'s: one release at l = 4, ε = 5, exact label. The utility study sweeps
l from 1 to 4,096 (×4 steps) × ε ∈ {1, 5, ∞}, exact label, one seed: each cell mixes 60,000
samples (about a minute on this 2-core CPU, whatever l: drawing a uniform l-subset sorts the
class's 6,000 keys per sample) and fits a logistic regression on them; the seed's noised label
and ε = 10 are left out for that time. What it can show: where
the best l lies when N and the class sizes are the seed's (l* ≈ 4 there), against the 1,437-record
digits study whose classes hold 130.
"""

import ml_collections

from maskdp_jax.configs import dpcda_digits


def get_config() -> ml_collections.ConfigDict:
    config = dpcda_digits.get_config()
    config.title = "digits grown to the seed's scale (60,000 records)"
    config.data = ml_collections.ConfigDict(dict(
        source="digits_jittered", test_fraction=0.2, split_seed=0, num_train=60_000,
        num_test=10_000))
    config.min_class_size = 6_000  # exact: the generator makes 6,000 per class
    config.delta = 1e-5  # the seed's, below 1/N = 1/60,000
    config.sweep.orders = (1, 4, 16, 64, 256, 1024, 4096)
    config.sweep.epsilons = (1.0, 5.0, float("inf"))
    config.sweep.label_noise = (False,)
    config.sweep.seeds = (0,)
    return config
