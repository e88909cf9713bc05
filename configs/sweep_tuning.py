r"""Every mode tuned with one budget on the validation split: the fine-tuning strategy and the
learning rate, at ε = 1 (the headline's ε) in the default run's setting.

    python -m maskdp_jax.sweep --config=configs/sweep_tuning.py --workdir=docs/results/tuning

Each of ``public_only``, ``dp``, ``maskdp`` and ``nonprivate`` runs the same 12 variants (4
strategies × 3 learning rates) on the same 2 seeds; everything else is the default run's
(configs/default.py: 16 epochs, C = 0.1, Adam with 1 warm-up epoch). Evaluated on
``input.eval_split = "validation"`` (a fifth of the training split, class-stratified, held out
from training), never on the test split: results.md names each mode's best variant, which the
headline runs use. A mode's best is chosen by its mean validation top-1 over the two seeds, so
with twelve variants the winner's figure is biased upwards (the maximum of noisy means); the test
split, read once by the headline, is not.
"""

import ml_collections

from maskdp_jax.configs import sweep_headline

FINETUNES = ("linear", "selective", "norms", "full")
LEARNING_RATES = (1e-3, 3e-3, 1e-2)


def get_config(setting: str = "person") -> ml_collections.ConfigDict:
    config = sweep_headline.get_config(setting)
    config.title = f"Every mode's strategy and learning rate on the validation split ({setting})"
    config.base.input.eval_split = "validation"
    config.sweep.modes = ("nonprivate", "public_only", "dp", "maskdp")
    config.sweep.epsilons = (1.0,)
    config.sweep.seeds = (0, 1)
    config.sweep.variants = tuple(
        (f"{finetune}_lr{lr:g}", (("model.finetune", finetune),
                                  ("optimizer.learning_rate", lr)))
        for finetune in FINETUNES for lr in LEARNING_RATES)
    config.config_path = f"configs/sweep_tuning.py:{setting}"
    return config
