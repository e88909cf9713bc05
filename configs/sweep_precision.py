r"""bfloat16 against float32 compute on the embedded data: the default run (maskdp, ε = 1, 16
epochs) with ``compute.dtype`` float32 and bfloat16, seeds 0-2.

    python -m maskdp_jax.sweep --config=configs/sweep_precision.py --workdir=docs/results/precision

Seeded randomness, so that the two runs of a seed draw the same batches, clips and noise and
differ only in the precision of the products: a paired comparison (the seeds are published in
the reports; this is a measurement, not a private release). bfloat16 keeps the parameters,
norms, softmax, residual stream, logits and gradients (so clipping and noise) in float32
(models/mvit.py). Results: docs/results/precision/ and docs/guides/gpu_bf16.md, "bfloat16 compute".
"""

import ml_collections

from maskdp_jax.configs import sweep_spread


def get_config() -> ml_collections.ConfigDict:
    config = sweep_spread.get_config()
    config.title = "bfloat16 against float32 compute (maskdp, ε = 1, paired seeds)"
    config.base.privacy.randomness = "seeded"
    config.sweep.seeds = (0, 1, 2)
    config.sweep.variants = (  # (name, ((dotted key of the training config, value), ...))
        ("float32", (("compute.dtype", "float32"),)),
        ("bfloat16", (("compute.dtype", "bfloat16"),)),
    )
    config.config_path = "configs/sweep_precision.py"
    return config
