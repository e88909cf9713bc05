r"""LiRA against shadow models trained with our step (Gu & Chen 2024 Sec. III).

    python -m maskdp_jax.audit --config=configs/audit_synthetic.py
    --workdir=docs/results/audit_synthetic

For each setting (non-private; DP and MaskDP at each ε) and seed: 16 shadow models of the tiny
CPU model, each trained on a complementary half of 64 embedded videos, vmapped over the models
(audit/shadows.py); every video scored on every model; offline and online LiRA; ASR^M next to
random guessing's. Small enough for this 2-core CPU (see the report's total time).
"""

import ml_collections

from maskdp_jax.configs import default


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.audit = "lira"
    config.seed = 0  # initial parameters (public)
    config.data_seed = 0
    config.input = ml_collections.ConfigDict(dict(num_train=64, frames=8, clip_frames=8,
                                                  size=32))
    config.model = default.model()  # the model a user trains (run/model.py)
    config.model.update(dict(name="mvit_test", finetune="full"))
    config.modes = ("nonprivate", "dp", "maskdp")
    config.epsilons = (1.0, 4.0, 8.0)
    config.seeds = (0, 1, 2)
    config.num_shadows = 16
    # LiRA's fits (audit/lira.py): "auto" = one pooled within-example σ below 64 shadow models
    # (Carlini et al. advise a fixed σ there; their released total σ is "carlini_fixed");
    # queries: the video, then flipped and shifted copies (audit/shadows.py, augment).
    config.lira = ml_collections.ConfigDict(dict(
        variance="auto", estimator="mean", augmentations=("none", "hflip", "shift_x", "shift_y")))
    config.batching = "vmap"  # or "loop": as fast on this 2-core CPU (docs/benchmarks.md)
    config.chunk = 16  # shadow models trained at once
    config.batch_size = 8  # expected Poisson batch of a shadow model: q = 8/32
    config.physical_batch_size = 8
    config.num_epochs = 16.0
    config.l2_clip_norm = 0.1
    config.learning_rate = 3e-3
    config.delta = 1e-3  # < 1/32, the shadow models' N
    return config
