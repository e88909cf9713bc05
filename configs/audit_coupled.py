r"""The coupled-sampling attack: does the noise-free public gradient reveal the
private batch? Coupled (the paper's Algorithm 1) vs decoupled (our default) sampling.

    python -m maskdp_jax.audit --config=configs/audit_coupled.py
    --workdir=docs/results/audit_coupled

The tiny CPU model, fully fine-tuned (more trainable parameters than videos, so the per-video
public gradients are linearly independent), at its initial weights, on 64 embedded videos.
"""

import ml_collections

from maskdp_jax.configs import default


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.audit = "coupled"
    config.seed = 0
    config.input = ml_collections.ConfigDict(dict(num_train=64, frames=16, clip_frames=8,
                                                  size=32))
    config.model = default.model()  # the model a user trains (run/model.py)
    config.model.update(dict(name="mvit_test", finetune="full"))
    config.batch_size = 8  # expected Poisson batch: q = 8/64
    config.physical_batch_size = 16
    config.attack_steps = 20
    # The ε column: a training run of num_epochs at this q and σ, as each scheme is accounted.
    config.num_epochs = 16.0
    config.noise_multiplier = 1.0
    config.delta = 1e-5
    return config
