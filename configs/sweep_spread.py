r"""How much a plain ``python train.py`` varies: the default run (maskdp, ε = 1, 16 epochs) with
*secret* randomness, as a user gets it, over seeds 0-9.

    python -m maskdp_jax.sweep --config=configs/sweep_spread.py --workdir=docs/results/spread

Each run draws a fresh secret for its noise and batches (model initialisation and clip offsets
come from the seed), so the runs are what ten users would see; they cannot be reproduced bit for
bit, which is the point. docs/getting-started.md quotes the median and the range. Results:
docs/results/spread/.
"""

import ml_collections

from maskdp_jax.configs import default, sweep_synthetic


def get_config() -> ml_collections.ConfigDict:
    config = sweep_synthetic.get_config()
    config.title = "Spread of the default run (secret randomness)"
    # The earlier default run (context data, from scratch), which its committed results measured.
    config.base = default.get_config("context_scratch")
    config.base.tensorboard = False
    config.base.input.prefetch = 1
    config.sweep.modes = ("maskdp",)
    config.sweep.epsilons = (1.0,)
    config.sweep.seeds = tuple(range(10))
    config.sweep.clips = (1,)
    config.config_path = "configs/sweep_spread.py"
    return config
