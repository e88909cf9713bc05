r"""The headline with every mode at its own tuned settings, over three data draws × five seeds.

    python -m maskdp_jax.sweep --config=configs/sweep_headline_tuned.py:person \
        --workdir=docs/results/default --workers=2

The same grid as configs/sweep_headline.py (non-private, public-only, DP and MaskDP at
ε ∈ {0.5, 1, 2, 4, 8}, seeds 0–4), each mode at the fine-tuning strategy, learning rate, clip norm
and epochs that won its tuning on the validation split (configs/sweep_tuning.py, ``tuned``), and
every run repeated on three draws of the embedded dataset (``input.data_seed`` ∈ {0, 1, 2}: new
training and test videos each). The settings were chosen on draw 0's validation split; each
draw is evaluated on its own test split, read once. The gap's interval is taken over the draws
(maskdp_jax/reporting/results.py, ``difference``), so it carries the data draw's variance as well
as the seeds'.
"""

import ml_collections

from maskdp_jax.configs import sweep_headline, sweep_tuning

DATA_SEEDS = (0, 1, 2)


def get_config(setting: str = "person") -> ml_collections.ConfigDict:
    config = sweep_headline.get_config(setting)
    config.title = (f"Headline, every mode tuned, {len(DATA_SEEDS)} data draws: "
                    f"the {setting} setting")
    config.sweep.mode_overrides = tuple((mode, sweep_tuning.tuned(mode))
                                        for mode in config.sweep.modes)
    config.sweep.data_seeds = DATA_SEEDS
    config.config_path = f"configs/sweep_headline_tuned.py:{setting}"
    return config
