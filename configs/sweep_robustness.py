r"""Is the default run on a knife's edge? The default (maskdp, ε = 1, 16 epochs, Adam 3e-3,
C = 0.1) with one hyperparameter halved or doubled at a time, secret randomness, seeds 0-2.

    python -m maskdp_jax.sweep --config=configs/sweep_robustness.py
    --workdir=docs/results/robustness

Every variant is calibrated to the same ε = 1 (the epoch variants therefore get another σ). The
default itself, over ten secret-randomness runs, is docs/results/spread (median 21.5 %, range
14.6-25.4 %); a variant whose range sits inside that one is not distinguishable from the default
with three runs, one that falls to chance (12.5 %, 8 classes) would mark an edge. Results:
docs/results/robustness/ and docs/guides/training.md, "How sensitive the default is to its
settings".
"""

import ml_collections

from maskdp_jax.configs import sweep_spread


def get_config() -> ml_collections.ConfigDict:
    config = sweep_spread.get_config()
    config.title = "Robustness of the default run: one hyperparameter halved or doubled"
    config.sweep.seeds = (0, 1, 2)
    config.sweep.variants = (  # (name, ((dotted key of the training config, value), ...))
        ("lr_half", (("optimizer.learning_rate", 1.5e-3),)),
        ("lr_double", (("optimizer.learning_rate", 6e-3),)),
        ("clip_half", (("privacy.l2_clip_norm", 0.05),)),
        ("clip_double", (("privacy.l2_clip_norm", 0.2),)),
        ("epochs_12", (("num_epochs", 12.0),)),
        ("epochs_24", (("num_epochs", 24.0),)),
    )
    config.config_path = "configs/sweep_robustness.py"
    return config
