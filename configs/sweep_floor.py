r"""The headline's floor, as a reviewer reads it: what the frozen public backbone gives with a
head trained on the private videos, without DP and with DP-SGD.

    python -m maskdp_jax.sweep --config=configs/sweep_floor.py --workdir=docs/results/floor

Two rows, over the tuned headline's data draws and seeds (configs/sweep_headline_tuned.py), the
person setting, test split: a non-private linear probe on the frozen shipped backbone
(``nonprivate``, ``model.finetune = "linear"``) and DP-SGD on the head alone (``dp``, linear, at
ε ∈ {1, 8}). The learning rate is the linear strategy's best of each mode on the validation split
(configs/sweep_tuning.py, stage one: 1e-2 for both). A backbone whose frozen features already
separate the target's classes sets a floor far above chance: anything a private mode learns
must be read against it.
"""

import ml_collections

from maskdp_jax.configs import sweep_headline_tuned

#: The linear strategy's best learning rate on validation, per mode (docs/results/tuning).
LINEAR_LEARNING_RATE = {"nonprivate": 1e-2, "dp": 1e-2}


def get_config(setting: str = "person") -> ml_collections.ConfigDict:
    config = sweep_headline_tuned.get_config(setting)
    config.title = f"The floor: the frozen backbone with a trained head ({setting})"
    config.sweep.modes = tuple(LINEAR_LEARNING_RATE)
    config.sweep.epsilons = (1.0, 8.0)
    config.sweep.mode_overrides = tuple(
        (mode, (("model.finetune", "linear"), ("optimizer.learning_rate", lr)))
        for mode, lr in LINEAR_LEARNING_RATE.items())
    config.config_path = f"configs/sweep_floor.py:{setting}"
    return config
