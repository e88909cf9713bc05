r"""Banded correlated noise (BandMF) on the default experiment: DP and MaskDP at ε ∈ {1, 2, 4, 8},
3 seeds, the private pass's noise banded with 4 bands.

    python -m maskdp_jax.sweep --config=configs/sweep_bandmf.py --workdir=docs/results/bandmf

Each run is the earlier default run (``default.untuned``: the person setting, fine-tuned in full
from the shipped backbone, 16 epochs, seeded randomness) with ``privacy.noise = "banded"`` and
``privacy.bands = 4``: σ re-calibrated for the amplified BandMF bound (rate 4 q over 64 rounds
instead of q over 256 steps), the private batch drawn cyclically from 4 secret groups. Its
independent-noise twin, the same config with ``privacy.noise = "independent"`` and the same
seeds, is the untuned headline's (docs/results/headline_untuned,
configs/sweep_headline.py:person); the guide compares the two (docs/guides/bandmf.md).
"""

import ml_collections

from maskdp_jax.configs import sweep_headline

BANDS = 4


def get_config() -> ml_collections.ConfigDict:
    config = sweep_headline.get_config("person")
    config.title = f"BandMF, {BANDS} bands"
    config.base.privacy.noise = "banded"
    config.base.privacy.bands = BANDS
    config.sweep.modes = ("dp", "maskdp")
    config.sweep.epsilons = (1.0, 2.0, 4.0, 8.0)
    config.sweep.seeds = (0, 1, 2)
    config.config_path = "configs/sweep_bandmf.py"
    return config
