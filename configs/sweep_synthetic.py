r"""Privacy-utility sweep on the embedded dataset: ε ∈ {0.25, 0.5, 1, 2, 5, ∞} × 3 modes × 3 seeds.

    python sweep.py --config=configs/sweep_synthetic.py --workdir=docs/results/synthetic --workers=2

Add K = 4 clips at ε = 1 with ``--config.sweep.clips='(1, 4)'``. The base run is
``configs/default.py`` (its σ is re-calibrated for every ε). Results: docs/results/synthetic/.
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.base = default.get_config()
    config.base.tensorboard = False
    config.sweep = ml_collections.ConfigDict()
    config.sweep.epsilons = (0.25, 0.5, 1.0, 2.0, 5.0)
    config.sweep.modes = ("nonprivate", "dp", "maskdp")
    config.sweep.seeds = (0, 1, 2)
    config.sweep.clips = (1,)
    config.sweep.clips_epsilon = 1.0
    config.sweep.per_class_epsilon = 1.0
    config.config_path = "configs/sweep_synthetic.py"
    return config
