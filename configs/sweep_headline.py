r"""The Table-1-style headline: non-private, public-only (MaskDP's public pass alone, ε = 0: what
the private pass adds is MaskDP minus it), DP and MaskDP at ε ∈ {0.5, 1, 2, 4, 8}, 5 seeds each,
in one of two settings of the embedded dataset (data/synthetic.py, "Settings").

    python -m maskdp_jax.sweep --config=configs/sweep_headline.py:person \
        --workdir=docs/results/headline_untuned
    python -m maskdp_jax.sweep --config=configs/sweep_headline.py:context \
        --workdir=docs/results/headline_context

Every mode runs at the earlier default's settings (``default.untuned``: MaskDP's, before every
mode was tuned; configs/sweep_headline_tuned.py is the headline at each mode's tuned settings).
``person`` is the default run's setting and protocol (configs/default.py): the label is the
avatar's action, the room is context, and the model is fine-tuned from the shipped public
pretraining (configs/pretrain.py). ``context`` is the earlier default's data, whose label is half
in the private room, trained the same way: where MaskDP's limits show. Each run is the default
run at its ε (σ re-calibrated), seeded randomness so that the table can be rebuilt from its
command. ``python -m maskdp_jax.paper_tables --headline=<workdir>`` prints the table with the
95 % interval of MaskDP − DP (docs/guides/training.md reads it).
"""

import ml_collections

from maskdp_jax.configs import default, sweep_synthetic

SETTINGS = ("person", "context")


def get_config(setting: str = "person") -> ml_collections.ConfigDict:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {SETTINGS} "
                         "(--config=configs/sweep_headline.py:<setting>).")
    config = sweep_synthetic.get_config()
    config.title = f"Headline: the {setting} setting"
    config.base = default.untuned()
    config.base.input.setting = setting
    config.base.tensorboard = False
    config.base.input.prefetch = 1
    config.base.privacy.randomness = "seeded"
    config.base.checkpoint.every_steps = 0
    config.sweep.modes = ("nonprivate", "public_only", "dp", "maskdp")
    config.sweep.epsilons = (0.5, 1.0, 2.0, 4.0, 8.0)
    config.sweep.seeds = (0, 1, 2, 3, 4)
    config.config_path = f"configs/sweep_headline.py:{setting}"
    return config
