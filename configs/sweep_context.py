r"""Context ablation sweep (Schneider et al. 2024a Table 3) on the embedded dataset: avatar only,
background only and both, non-private, over seeds.

    # the default setting (the label is the avatar's action), fine-tuned from the public
    # pretraining as the default run is, 5 seeds:
    python -m maskdp_jax.sweep --config=configs/sweep_context.py:person \
        --workdir=docs/results/context_person
    # the earlier default (context data, from scratch; configs/context_ablation.py), 3 seeds:
    python -m maskdp_jax.sweep --config=configs/sweep_context.py --workdir=docs/results/context

Results: docs/results/context_person/ and docs/results/context/ (the table is
``reporting.results.view_table`` of the runs); docs/guides/context.md reads them.
"""

import ml_collections

from maskdp_jax.configs import context_ablation, default, sweep_synthetic

SETTINGS = ("context_scratch", "person")


def get_config(setting: str = "context_scratch") -> ml_collections.ConfigDict:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {SETTINGS} "
                         "(--config=configs/sweep_context.py:<setting>).")
    config = sweep_synthetic.get_config()
    config.title = "Context ablation (Schneider et al. 2024a, Table 3)"
    if setting == "person":
        config.base = default.untuned("person")
        config.base.mode = "nonprivate"
        config.base.tensorboard = False
        config.base.checkpoint.every_steps = 0
        config.sweep.seeds = (0, 1, 2, 3, 4)
        config.config_path = "configs/sweep_context.py:person"
    else:
        config.base = context_ablation.get_config("anonymized")
        config.config_path = "configs/sweep_context.py"
    config.base.input.prefetch = 1
    config.base.privacy.randomness = "seeded"
    config.sweep.modes = ("nonprivate",)
    config.sweep.epsilons = ()
    config.sweep.views = tuple(context_ablation.ROWS.values())
    config.sweep.clips = (1,)
    return config
