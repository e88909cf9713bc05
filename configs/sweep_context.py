r"""Context ablation sweep (Schneider et al. 2024a Table 3) on the embedded dataset: the three rows
of ``configs/context_ablation.py`` x 3 seeds, non-private.

    python -m maskdp_jax.sweep --config=configs/sweep_context.py --workdir=docs/results/context

Results: docs/results/context/ (the table is ``reporting.results.view_table`` of the runs).
"""

import ml_collections

from maskdp_jax.configs import context_ablation, sweep_synthetic


def get_config() -> ml_collections.ConfigDict:
    config = sweep_synthetic.get_config()
    config.title = "Context ablation (Schneider et al. 2024a, Table 3)"
    config.base = context_ablation.get_config("anonymized")
    config.base.input.prefetch = 1
    config.base.privacy.randomness = "seeded"
    config.sweep.modes = ("nonprivate",)
    config.sweep.epsilons = ()
    config.sweep.views = tuple(context_ablation.ROWS.values())
    config.sweep.clips = (1,)
    config.config_path = "configs/sweep_context.py"
    return config
