r"""What MaskDP writes into the hidden cells of its training views, compared on the validation
split: the tokeniser's fixed texture, a constant grey (what the papers most likely had, with their
pretrained weights), or public backgrounds drawn per clip (domain randomisation,
:class:`maskdp_jax.run.views.PublicFill`). The default run's setting, ε = 1, seeds 0-2.

    python -m maskdp_jax.sweep --config=configs/sweep_fill.py --workdir=docs/results/fill_validation

Evaluated on ``input.eval_split = "validation"`` (a fifth of the training split, held out), never
on the test split: this study chose ``hidden_fill`` of configs/default.py. Each report also holds
the public-view diagnostic, which shows how much of what the noise-free pass learned reaches full
videos. Results: docs/results/fill_validation/; docs/guides/training.md reads them.
"""

import ml_collections

from maskdp_jax.configs import sweep_headline

FILLS = ("texture", "constant", "backgrounds")


def get_config() -> ml_collections.ConfigDict:
    config = sweep_headline.get_config("person")
    config.title = "Hidden-cell fill of MaskDP's views (validation split)"
    config.base.input.eval_split = "validation"
    config.sweep.modes = ("maskdp",)
    config.sweep.epsilons = (1.0,)
    config.sweep.seeds = (0, 1, 2)
    config.sweep.variants = tuple((fill, (("hidden_fill", fill),)) for fill in FILLS)
    config.config_path = "configs/sweep_fill.py"
    return config
