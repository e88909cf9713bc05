r"""Canaries in the private and in the public region, audited in one training run each
(:mod:`maskdp_jax.audit.canaries`).

    python -m maskdp_jax.audit --config=configs/audit_canaries.py
    --workdir=docs/results/audit_canaries

64 embedded videos plus 128 label-flipped canaries, each with a ±1.5 sign pattern (in normalised
pixel units) on its background (private) or on its avatar (public) by a fair coin; for
``nonprivate``, and ``dp`` and ``maskdp`` at ε = 1 and 4 (``replace`` adjacency), three seeds,
one run per (region, seed), the six runs of a setting vmapped. Sized for this 2-core CPU (the
report gives the total time).
"""

import ml_collections

from maskdp_jax.configs import default


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.audit = "canaries"
    config.seed = 0  # initial parameters (public)
    config.data_seed = 0
    config.input = ml_collections.ConfigDict(dict(num_train=64, frames=8, clip_frames=8,
                                                  size=32))
    config.model = default.model()  # the model a user trains (run/model.py)
    config.model.update(dict(name="mvit_test", finetune="full"))
    config.num_canaries = 128  # m: more canaries, a higher certifiable bound
    config.amplitude = 1.5  # the pattern's ± in normalised pixel units
    config.modes = ("nonprivate", "dp", "maskdp")
    config.epsilons = (1.0, 4.0)
    config.seeds = (0, 1, 2)
    config.batch_size = 8
    config.physical_batch_size = 8
    config.num_epochs = 16.0
    config.l2_clip_norm = 0.1
    config.learning_rate = 3e-3
    # δ ≪ 1/N: the one-run bound's p-value carries a 2mδ term (Steinke et al. 2023; jax_privacy),
    # which at δ = 1e-3 and m = 128 (0.26) would swamp the 5 % significance.
    config.delta = 1e-5
    return config
